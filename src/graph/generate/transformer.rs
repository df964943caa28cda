//! A decoder-only transformer's joint forward and backward training graph, 31 ops a layer,
//! costs in FLOP and sizes in bytes, with the reads autograd makes.

use crate::graph::{Graph, GraphSpec, NodeKind, NodeSpec};

/// The dimensions of a [`transformer`]: a decoder-only transformer's layers, hidden size
/// `d`, sequence length `s`, attention heads `h`, batch `b` and vocabulary `V`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransformerShape {
    pub layers: usize,
    pub hidden: u64,
    pub seq: u64,
    pub heads: u64,
    pub batch: u64,
    pub vocab: u64,
}

impl Default for TransformerShape {
    /// A GPT-2-medium-like block (d 1024, 16 heads) at sequence 1024, batch 4, vocabulary
    /// 32,000, with 12 layers.
    fn default() -> TransformerShape {
        TransformerShape {
            layers: 12,
            hidden: 1024,
            seq: 1024,
            heads: 16,
            batch: 4,
            vocab: 32_000,
        }
    }
}

/// Why [`transformer`] cannot build a shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("the hidden size {hidden} is not a multiple of the {heads} heads")]
    Heads { hidden: u64, heads: u64 },
    #[error("the {0} tensor of this shape has more than 2^64 bytes")]
    TooLarge(&'static str),
    /// The shape's graph is past a limit every graph keeps (a tensor over 2^53 bytes).
    #[error("the graph of this shape is past remat's limits: {0}")]
    Limits(String),
}

/// Nodes per transformer layer in [`transformer`] (14 forward, 17 backward).
pub const TRANSFORMER_NODES_PER_LAYER: usize = 31;
/// Nodes of [`transformer`] outside the layers: embedding, final layernorm, logits, loss
/// and their backward ops.
pub const TRANSFORMER_NODES_OUTSIDE: usize = 8;

/// The joint forward + backward graph of one training step of a decoder-only transformer
/// (pre-layernorm, GPT-style), `31 L + 8` nodes. Per layer, forward: `ln1`, the `q`, `k`,
/// `v` projections, `scores = q kᵀ`, `softmax`, `ctx = softmax · v`, the output projection
/// `proj`, the residual `res1`, `ln2`, the MLP `fc1`, `gelu`, `fc2` and the residual `res2`.
/// Backward, as autograd records it, each op reading the gradient of its output and the
/// forward values its derivative needs: `fc2.bwd` (the gradient and `gelu`), `gelu.bwd`
/// (`fc1`), `fc1.bwd` (`ln2`), `ln2.bwd` (`res1`), `res1.grad` (the two gradients of the
/// residual summed), `proj.bwd` (`ctx`), `ctx.bwd_p` (`v`), `ctx.bwd_v` (`softmax`),
/// `softmax.bwd` (`softmax`), `scores.bwd_q` (`k`), `scores.bwd_k` (`q`), `q.bwd`, `k.bwd`,
/// `v.bwd` (`ln1`), `ln1.grad` (their sum), `ln1.bwd` (the layer input) and `in.grad`
/// (the residual sum, the gradient of the layer input). Around the layers: `embed`,
/// `lnf`, `logits`, `loss` and their backward ops.
///
/// Sizes are bytes of 16-bit values: `b s d` for the hidden states, `4 b s d` in the MLP,
/// `b h s²` for scores and probabilities, `b s V` for the logits. Costs are FLOP: `2 b s d²`
/// per projection, `8 b s d²` per MLP matmul, `2 b s² d` for scores and context, a few per
/// element for layernorms, softmax and additions; a backward matmul costs its forward
/// matmul once per gradient it produces (input and weights). `fixed_memory` holds the
/// weights and their gradients (`12 d² + 4 d` per layer, `V d` for the embedding tied to
/// the logits; 4 bytes per parameter).
pub fn transformer(shape: &TransformerShape) -> Result<Graph, ShapeError> {
    check(shape)?;
    let sizes = Sizes::of(shape)?;
    let flops = Flops::of(shape);
    let layers = shape.layers;
    let mut g = Builder {
        nodes: Vec::with_capacity(layers * TRANSFORMER_NODES_PER_LAYER + TRANSFORMER_NODES_OUTSIDE),
        sizes,
        flops,
    };
    g.node("embed".into(), "embedding", F, flops.add, sizes.act, &[]);
    let mut x = "embed".to_string();
    for l in 0..layers {
        x = g.forward_layer(l, &x);
    }
    let mut dy = g.head(&x);
    for l in (0..layers).rev() {
        let input = if l == 0 {
            "embed".to_string()
        } else {
            format!("L{}.res2", l - 1)
        };
        dy = g.backward_layer(l, &dy, &input);
    }
    g.node(
        "embed.bwd".into(),
        "embedding_backward",
        B,
        flops.add,
        sizes.embedding,
        &[&dy],
    );
    let TransformerShape {
        hidden: d,
        seq: s,
        heads: h,
        batch: b,
        vocab: v,
        ..
    } = *shape;
    Graph::new(GraphSpec {
        name: Some(format!("transformer-l{layers}-d{d}-s{s}-h{h}-b{b}-v{v}")),
        fixed_memory: sizes.fixed,
        cost_unit: Some("FLOP".into()),
        nodes: g.nodes,
    })
    .map_err(|e| ShapeError::Limits(e.to_string()))
}

/// Every dimension at least 1, and the hidden size a multiple of the heads.
fn check(shape: &TransformerShape) -> Result<(), ShapeError> {
    let TransformerShape {
        layers,
        hidden,
        seq,
        heads,
        batch,
        vocab,
    } = *shape;
    let dimensions = [
        (layers as u64, "layers"),
        (hidden, "hidden"),
        (seq, "seq"),
        (heads, "heads"),
        (batch, "batch"),
        (vocab, "vocab"),
    ];
    if let Some(&(_, name)) = dimensions.iter().find(|&&(value, _)| value == 0) {
        return Err(ShapeError::Zero(name));
    }
    if hidden % heads != 0 {
        return Err(ShapeError::Heads { hidden, heads });
    }
    Ok(())
}

/// The tensors' bytes (16-bit values) and `fixed_memory` (4-byte weights and gradients),
/// each checked against 2^64.
#[derive(Clone, Copy)]
struct Sizes {
    /// `b s d`: a hidden state.
    act: u64,
    /// `4 b s d`: the MLP's inner activations.
    mlp: u64,
    /// `b h s²`: attention scores and probabilities.
    att: u64,
    /// `b s V`.
    logits: u64,
    /// `V d`: the embedding's gradient.
    embedding: u64,
    fixed: u64,
}

impl Sizes {
    fn of(shape: &TransformerShape) -> Result<Sizes, ShapeError> {
        let TransformerShape {
            layers,
            hidden: d,
            seq: s,
            heads: h,
            batch: b,
            vocab: v,
        } = *shape;
        let bytes = |what: &'static str, factors: &[u64]| {
            factors
                .iter()
                .try_fold(2u64, |acc, &f| acc.checked_mul(f))
                .ok_or(ShapeError::TooLarge(what))
        };
        let act = bytes("hidden state", &[b, s, d])?;
        let mlp = bytes("MLP", &[4, b, s, d])?;
        let att = bytes("attention", &[b, h, s, s])?;
        let logits = bytes("logits", &[b, s, v])?;
        let embedding = bytes("embedding", &[v, d])?;
        let per_layer = 12 * (d as u128) * (d as u128) + 4 * d as u128;
        let params = per_layer * layers as u128 + (v as u128) * (d as u128);
        let fixed = u64::try_from(4 * params).map_err(|_| ShapeError::TooLarge("weights"))?;
        Ok(Sizes {
            act,
            mlp,
            att,
            logits,
            embedding,
            fixed,
        })
    }
}

/// The ops' FLOP: `2 b s d²` a projection, `8 b s d²` an MLP matmul, `2 b s² d` scores and
/// context, a few per element for layernorms, softmax and additions.
#[derive(Clone, Copy)]
struct Flops {
    proj: f64,
    mm: f64,
    attn: f64,
    norm: f64,
    add: f64,
    soft: f64,
    /// `2 b s d V`: the logits' matmul.
    logits: f64,
    /// `5 b s V`: the cross-entropy and its backward.
    xent: f64,
    /// `d`, which the GELU's cost divides the MLP's by.
    d: f64,
}

impl Flops {
    fn of(shape: &TransformerShape) -> Flops {
        let [b, s, d, h, v] = [
            shape.batch,
            shape.seq,
            shape.hidden,
            shape.heads,
            shape.vocab,
        ]
        .map(|x| x as f64);
        let tokens = b * s;
        Flops {
            proj: 2.0 * tokens * d * d,
            mm: 8.0 * tokens * d * d,
            attn: 2.0 * tokens * s * d,
            norm: 8.0 * tokens * d,
            add: tokens * d,
            soft: 5.0 * b * h * s * s,
            logits: 2.0 * tokens * d * v,
            xent: 5.0 * tokens * v,
            d,
        }
    }
}

use NodeKind::{Backward as B, Forward as F, Loss};

/// One op of a layer: its name within the layer, op, cost, output bytes and inputs (names
/// within the layer, or `^name` for a value from outside it).
type Op<'a> = (&'a str, &'a str, f64, u64, &'a [&'a str]);

/// The graph's nodes in the order they are added, with the shape's sizes and costs.
struct Builder {
    nodes: Vec<NodeSpec>,
    sizes: Sizes,
    flops: Flops,
}

impl Builder {
    fn node(
        &mut self,
        id: String,
        op: &str,
        kind: NodeKind,
        cost: f64,
        memory: u64,
        inputs: &[&str],
    ) {
        self.nodes.push(NodeSpec {
            id,
            cost,
            memory,
            inputs: inputs.iter().map(|i| i.to_string()).collect(),
            kind: Some(kind),
            op: Some(op.into()),
        });
    }

    /// Layer `l`'s 14 forward ops on the hidden state `x`; returns its output, `res2`.
    fn forward_layer(&mut self, l: usize, x: &str) -> String {
        let (Sizes { act, mlp, att, .. }, f) = (self.sizes, self.flops);
        #[rustfmt::skip]
        let ops: [Op; 14] = [
            ("ln1", "layernorm", f.norm, act, &["^x"]),
            ("q", "matmul", f.proj, act, &["ln1"]),
            ("k", "matmul", f.proj, act, &["ln1"]),
            ("v", "matmul", f.proj, act, &["ln1"]),
            ("scores", "matmul", f.attn, att, &["q", "k"]),
            ("softmax", "softmax", f.soft, att, &["scores"]),
            ("ctx", "matmul", f.attn, act, &["softmax", "v"]),
            ("proj", "matmul", f.proj, act, &["ctx"]),
            ("res1", "add", f.add, act, &["^x", "proj"]),
            ("ln2", "layernorm", f.norm, act, &["res1"]),
            ("fc1", "matmul", f.mm, mlp, &["ln2"]),
            ("gelu", "gelu", 2.0 * f.mm / f.d, mlp, &["fc1"]),
            ("fc2", "matmul", f.mm, act, &["gelu"]),
            ("res2", "add", f.add, act, &["res1", "fc2"]),
        ];
        self.layer(l, F, &ops, &[("^x", x)])
    }

    /// The final layernorm, the logits, the loss and their backward ops after the last
    /// layer's output `x`; returns the gradient of `x`.
    fn head(&mut self, x: &str) -> String {
        let (Sizes { act, logits, .. }, f) = (self.sizes, self.flops);
        self.node("lnf".into(), "layernorm", F, f.norm, act, &[x]);
        self.node("logits".into(), "matmul", F, f.logits, logits, &["lnf"]);
        self.node("loss".into(), "cross_entropy", Loss, f.xent, 4, &["logits"]);
        let xent_bwd = "cross_entropy_backward";
        self.node(
            "loss.bwd".into(),
            xent_bwd,
            B,
            f.xent,
            logits,
            &["loss", "logits"],
        );
        let inputs = ["loss.bwd", "lnf"];
        self.node(
            "logits.bwd".into(),
            "matmul_backward",
            B,
            2.0 * f.logits,
            act,
            &inputs,
        );
        let inputs = ["logits.bwd", x];
        self.node(
            "lnf.bwd".into(),
            "layernorm_backward",
            B,
            2.0 * f.norm,
            act,
            &inputs,
        );
        "lnf.bwd".into()
    }

    /// Layer `l`'s 17 backward ops, from the gradient `dy` of its output back to the
    /// gradient of its input (`input`, which `ln1.bwd` reads), which it returns.
    fn backward_layer(&mut self, l: usize, dy: &str, input: &str) -> String {
        let (Sizes { act, mlp, att, .. }, f) = (self.sizes, self.flops);
        let (mm, norm, soft) = ("matmul_backward", "layernorm_backward", "softmax_backward");
        #[rustfmt::skip]
        let ops: [Op; 17] = [
            ("fc2.bwd", mm, 2.0 * f.mm, mlp, &["^dy", "gelu"]),
            ("gelu.bwd", "gelu_backward", 4.0 * f.mm / f.d, mlp, &["fc2.bwd", "fc1"]),
            ("fc1.bwd", mm, 2.0 * f.mm, act, &["gelu.bwd", "ln2"]),
            ("ln2.bwd", norm, 2.0 * f.norm, act, &["fc1.bwd", "res1"]),
            ("res1.grad", "add", f.add, act, &["^dy", "ln2.bwd"]),
            ("proj.bwd", mm, 2.0 * f.proj, act, &["res1.grad", "ctx"]),
            ("ctx.bwd_p", mm, f.attn, att, &["proj.bwd", "v"]),
            ("ctx.bwd_v", mm, f.attn, act, &["proj.bwd", "softmax"]),
            ("softmax.bwd", soft, f.soft, att, &["ctx.bwd_p", "softmax"]),
            ("scores.bwd_q", mm, f.attn, act, &["softmax.bwd", "k"]),
            ("scores.bwd_k", mm, f.attn, act, &["softmax.bwd", "q"]),
            ("q.bwd", mm, 2.0 * f.proj, act, &["scores.bwd_q", "ln1"]),
            ("k.bwd", mm, 2.0 * f.proj, act, &["scores.bwd_k", "ln1"]),
            ("v.bwd", mm, 2.0 * f.proj, act, &["ctx.bwd_v", "ln1"]),
            ("ln1.grad", "add", 2.0 * f.add, act, &["q.bwd", "k.bwd", "v.bwd"]),
            ("ln1.bwd", norm, 2.0 * f.norm, act, &["ln1.grad", "^input"]),
            ("in.grad", "add", f.add, act, &["res1.grad", "ln1.bwd"]),
        ];
        self.layer(l, B, &ops, &[("^dy", dy), ("^input", input)])
    }

    /// Adds layer `l`'s `ops` of `kind`, their ids and inputs prefixed `L{l}.` except the
    /// values from outside the layer, named `^name` and given by `outside`; returns the last
    /// op's id.
    fn layer(&mut self, l: usize, kind: NodeKind, ops: &[Op], outside: &[(&str, &str)]) -> String {
        let id = |op: &str| match outside.iter().find(|&&(name, _)| name == op) {
            Some(&(_, value)) => value.to_string(),
            None => format!("L{l}.{op}"),
        };
        for &(op, name, cost, memory, inputs) in ops {
            let inputs: Vec<String> = inputs.iter().map(|&i| id(i)).collect();
            let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
            self.node(id(op), name, kind, cost, memory, &inputs);
        }
        id(ops.last().expect("a layer has ops").0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformers_have_31_nodes_a_layer_and_reach_10000_nodes() {
        for (layers, nodes) in [(1, 39), (64, 1992), (161, 4999), (322, 9990)] {
            let shape = TransformerShape {
                layers,
                ..TransformerShape::default()
            };
            let g = transformer(&shape).unwrap();
            assert_eq!(g.len(), nodes);
            assert_eq!(
                g.len(),
                TRANSFORMER_NODES_PER_LAYER * layers + TRANSFORMER_NODES_OUTSIDE
            );
            let kinds = |k| g.nodes().iter().filter(|n| n.kind == Some(k)).count();
            assert_eq!(kinds(NodeKind::Loss), 1);
            assert_eq!(kinds(NodeKind::Forward), 14 * layers + 3);
            assert_eq!(kinds(NodeKind::Backward), 17 * layers + 4);
            for v in 0..g.len() {
                assert!(
                    (1e6..1e12).contains(&g.cost(v)) || g.cost(v) < 1e9,
                    "{}",
                    g.id(v)
                );
                assert!(g.memory(v) == 4 || (1 << 20..1 << 30).contains(&g.memory(v)));
            }
        }
        // Backward reads the forward activations autograd saves.
        let g = transformer(&TransformerShape::default()).unwrap();
        let reads = |id: &str| -> Vec<&str> {
            g.preds(g.index_of(id).unwrap())
                .iter()
                .map(|&u| g.id(u))
                .collect()
        };
        assert_eq!(reads("L3.softmax.bwd"), ["L3.softmax", "L3.ctx.bwd_p"]);
        assert_eq!(reads("L0.ln1.bwd"), ["embed", "L0.ln1.grad"]);
    }

    #[test]
    fn transformer_shapes_are_checked() {
        let shape = TransformerShape::default();
        let bad = |s: TransformerShape| transformer(&s).unwrap_err();
        assert_eq!(
            bad(TransformerShape { layers: 0, ..shape }),
            ShapeError::Zero("layers")
        );
        assert_eq!(
            bad(TransformerShape { heads: 5, ..shape }),
            ShapeError::Heads {
                hidden: 1024,
                heads: 5
            }
        );
        assert_eq!(
            bad(TransformerShape {
                seq: 1 << 40,
                ..shape
            }),
            ShapeError::TooLarge("attention")
        );
        // Under 2^64 bytes but over the 2^53 a graph may hold: an error, not a panic.
        let big = bad(TransformerShape {
            batch: 100_000,
            seq: 100_000,
            layers: 1,
            ..shape
        });
        assert!(
            matches!(&big, ShapeError::Limits(m) if m.contains("2^53")),
            "{big}"
        );
    }
}
