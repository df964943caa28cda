//! `remat gen`: writes a generated training graph (native JSON) to a file or stdout.

use super::args::GenKind;
use super::{bad, write_file, CliError};
use crate::graph::generate;

pub(super) fn run(kind: GenKind) -> Result<i32, CliError> {
    let (g, output) = match kind {
        GenKind::Linear { layers, output } => {
            if layers == 0 {
                return Err(bad("--layers must be at least 1"));
            }
            (generate::linear(layers), output)
        }
        GenKind::Join { branches, output } => {
            if let Some(b) = branches.iter().position(|&l| l == 0) {
                return Err(bad(format!(
                    "--branches: branch {} has length 0; every branch needs a stage",
                    b + 1
                )));
            }
            let stages: usize = branches.iter().sum();
            if stages > (super::args::MAX_GEN_NODES - 1) / 2 {
                return Err(bad(format!(
                    "--branches: {stages} stages in all make {} nodes; at most {} nodes are \
                     generated",
                    2 * stages + 1,
                    super::args::MAX_GEN_NODES
                )));
            }
            (generate::join(&branches), output)
        }
        GenKind::RandomLayered {
            nodes,
            seed,
            output,
        } => {
            if nodes < 3 {
                return Err(bad("--nodes must be at least 3"));
            }
            (generate::random_layered(nodes, seed), output)
        }
        GenKind::Transformer { shape, output } => {
            let g = generate::transformer(&shape.shape()).map_err(|e| match e {
                generate::ShapeError::Zero(flag) => bad(format!("--{flag} must be at least 1")),
                other => bad(other.to_string()),
            })?;
            (g, output)
        }
    };
    let text = serde_json::to_string_pretty(&g.to_spec()).expect("graphs serialise");
    match output {
        Some(path) => write_file(&path, text.as_bytes())?,
        None => println!("{text}"),
    }
    Ok(0)
}
