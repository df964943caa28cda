//! The size of the Checkmate model (`milp`, `lp-bound`, `lp-rounding`) of each graph file,
//! as the solvers estimate it before building it: columns, rows, nonzeros and the bytes a
//! solve needs. `cargo run --example model_size -- graph.json ...`; one JSON line each.

use remat::graph::load::{load_graph, Format};
use remat::solve::model_size;

fn main() {
    for path in std::env::args().skip(1) {
        match load_graph(std::path::Path::new(&path), Format::Auto) {
            Ok(graph) => {
                let size = model_size(&graph);
                println!(
                    "{{\"graph\": {path:?}, \"nodes\": {}, \"edges\": {}, \"columns\": {}, \
                     \"rows\": {}, \"nonzeros\": {}, \"bytes\": {}}}",
                    graph.len(),
                    graph.edge_count(),
                    size.columns,
                    size.rows,
                    size.nonzeros,
                    size.bytes
                );
            }
            Err(e) => eprintln!("{path}: {e}"),
        }
    }
}
