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
const TRANSFORMER_NODES_PER_LAYER: usize = 31;
/// Nodes of [`transformer`] outside the layers: embedding, final layernorm, logits, loss
/// and their backward ops.
const TRANSFORMER_NODES_OUTSIDE: usize = 8;

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
    let TransformerShape {
        layers,
        hidden: d,
        seq: s,
        heads: h,
        batch: b,
        vocab: v,
    } = *shape;
    for (value, name) in [
        (layers as u64, "layers"),
        (d, "hidden"),
        (s, "seq"),
        (h, "heads"),
        (b, "batch"),
        (v, "vocab"),
    ] {
        if value == 0 {
            return Err(ShapeError::Zero(name));
        }
    }
    if d % h != 0 {
        return Err(ShapeError::Heads {
            hidden: d,
            heads: h,
        });
    }
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
    let (bf, sf, df, hf, vf) = (b as f64, s as f64, d as f64, h as f64, v as f64);
    let tokens = bf * sf;
    let proj = 2.0 * tokens * df * df;
    let mm = 8.0 * tokens * df * df;
    let attn = 2.0 * tokens * sf * df;
    let norm = 8.0 * tokens * df;
    let add = tokens * df;
    let soft = 5.0 * bf * hf * sf * sf;

    let mut nodes =
        Vec::with_capacity(layers * TRANSFORMER_NODES_PER_LAYER + TRANSFORMER_NODES_OUTSIDE);
    let mut node = |id: String, op: &str, kind, cost: f64, memory: u64, inputs: &[&str]| {
        nodes.push(NodeSpec {
            id,
            cost,
            memory,
            inputs: inputs.iter().map(|i| i.to_string()).collect(),
            kind: Some(kind),
            op: Some(op.into()),
        });
    };
    use NodeKind::{Backward as B, Forward as F, Loss};
    node("embed".into(), "embedding", F, add, act, &[]);
    let mut x = "embed".to_string();
    for l in 0..layers {
        let n = |op: &str| format!("L{l}.{op}");
        let (ln1, q, k, vv, scores, softmax, ctx, prj, res1, ln2, fc1, gelu, fc2, res2) = (
            n("ln1"),
            n("q"),
            n("k"),
            n("v"),
            n("scores"),
            n("softmax"),
            n("ctx"),
            n("proj"),
            n("res1"),
            n("ln2"),
            n("fc1"),
            n("gelu"),
            n("fc2"),
            n("res2"),
        );
        node(ln1.clone(), "layernorm", F, norm, act, &[&x]);
        for p in [&q, &k, &vv] {
            node(p.clone(), "matmul", F, proj, act, &[&ln1]);
        }
        node(scores.clone(), "matmul", F, attn, att, &[&q, &k]);
        node(softmax.clone(), "softmax", F, soft, att, &[&scores]);
        node(ctx.clone(), "matmul", F, attn, act, &[&softmax, &vv]);
        node(prj.clone(), "matmul", F, proj, act, &[&ctx]);
        node(res1.clone(), "add", F, add, act, &[&x, &prj]);
        node(ln2.clone(), "layernorm", F, norm, act, &[&res1]);
        node(fc1.clone(), "matmul", F, mm, mlp, &[&ln2]);
        node(gelu.clone(), "gelu", F, 2.0 * mm / df, mlp, &[&fc1]);
        node(fc2.clone(), "matmul", F, mm, act, &[&gelu]);
        node(res2.clone(), "add", F, add, act, &[&res1, &fc2]);
        x = res2;
    }
    node("lnf".into(), "layernorm", F, norm, act, &[&x]);
    node(
        "logits".into(),
        "matmul",
        F,
        2.0 * tokens * df * vf,
        logits,
        &["lnf"],
    );
    let xent = 5.0 * tokens * vf;
    node("loss".into(), "cross_entropy", Loss, xent, 4, &["logits"]);
    node(
        "loss.bwd".into(),
        "cross_entropy_backward",
        B,
        xent,
        logits,
        &["loss", "logits"],
    );
    node(
        "logits.bwd".into(),
        "matmul_backward",
        B,
        4.0 * tokens * df * vf,
        act,
        &["loss.bwd", "lnf"],
    );
    node(
        "lnf.bwd".into(),
        "layernorm_backward",
        B,
        2.0 * norm,
        act,
        &["logits.bwd", &x],
    );
    let mut dy = "lnf.bwd".to_string();
    for l in (0..layers).rev() {
        let n = |op: &str| format!("L{l}.{op}");
        let input = if l == 0 {
            "embed".to_string()
        } else {
            format!("L{}.res2", l - 1)
        };
        let g = |op: &str| format!("L{l}.{op}");
        node(
            g("fc2.bwd"),
            "matmul_backward",
            B,
            2.0 * mm,
            mlp,
            &[&dy, &n("gelu")],
        );
        node(
            g("gelu.bwd"),
            "gelu_backward",
            B,
            4.0 * mm / df,
            mlp,
            &[&g("fc2.bwd"), &n("fc1")],
        );
        node(
            g("fc1.bwd"),
            "matmul_backward",
            B,
            2.0 * mm,
            act,
            &[&g("gelu.bwd"), &n("ln2")],
        );
        node(
            g("ln2.bwd"),
            "layernorm_backward",
            B,
            2.0 * norm,
            act,
            &[&g("fc1.bwd"), &n("res1")],
        );
        node(g("res1.grad"), "add", B, add, act, &[&dy, &g("ln2.bwd")]);
        node(
            g("proj.bwd"),
            "matmul_backward",
            B,
            2.0 * proj,
            act,
            &[&g("res1.grad"), &n("ctx")],
        );
        node(
            g("ctx.bwd_p"),
            "matmul_backward",
            B,
            attn,
            att,
            &[&g("proj.bwd"), &n("v")],
        );
        node(
            g("ctx.bwd_v"),
            "matmul_backward",
            B,
            attn,
            act,
            &[&g("proj.bwd"), &n("softmax")],
        );
        node(
            g("softmax.bwd"),
            "softmax_backward",
            B,
            soft,
            att,
            &[&g("ctx.bwd_p"), &n("softmax")],
        );
        node(
            g("scores.bwd_q"),
            "matmul_backward",
            B,
            attn,
            act,
            &[&g("softmax.bwd"), &n("k")],
        );
        node(
            g("scores.bwd_k"),
            "matmul_backward",
            B,
            attn,
            act,
            &[&g("softmax.bwd"), &n("q")],
        );
        node(
            g("q.bwd"),
            "matmul_backward",
            B,
            2.0 * proj,
            act,
            &[&g("scores.bwd_q"), &n("ln1")],
        );
        node(
            g("k.bwd"),
            "matmul_backward",
            B,
            2.0 * proj,
            act,
            &[&g("scores.bwd_k"), &n("ln1")],
        );
        node(
            g("v.bwd"),
            "matmul_backward",
            B,
            2.0 * proj,
            act,
            &[&g("ctx.bwd_v"), &n("ln1")],
        );
        node(
            g("ln1.grad"),
            "add",
            B,
            2.0 * add,
            act,
            &[&g("q.bwd"), &g("k.bwd"), &g("v.bwd")],
        );
        node(
            g("ln1.bwd"),
            "layernorm_backward",
            B,
            2.0 * norm,
            act,
            &[&g("ln1.grad"), &input],
        );
        node(
            g("in.grad"),
            "add",
            B,
            add,
            act,
            &[&g("res1.grad"), &g("ln1.bwd")],
        );
        dy = g("in.grad");
    }
    node(
        "embed.bwd".into(),
        "embedding_backward",
        B,
        add,
        embedding,
        &[&dy],
    );
    Graph::new(GraphSpec {
        name: Some(format!("transformer-l{layers}-d{d}-s{s}-h{h}-b{b}-v{v}")),
        fixed_memory: fixed,
        cost_unit: Some("FLOP".into()),
        nodes,
    })
    .map_err(|e| ShapeError::Limits(e.to_string()))
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
