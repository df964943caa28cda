//! `remat inspect`: the graph report of `crate::front::report`, as a table or JSON.

use super::args::InspectArgs;
use super::render::{bytes, num, print_json, unit};
use super::{load, resolve_optional_budget, CliError};
use crate::front::report;

pub(super) fn run(args: &InspectArgs) -> Result<i32, CliError> {
    let g = load(&args.graph)?;
    let budget = resolve_optional_budget(args.budget.as_deref(), &g)?;
    let r = report(&g, budget);
    if args.json {
        print_json(&r);
        return Ok(0);
    }
    println!("graph                {}", g.name().unwrap_or("(unnamed)"));
    println!("nodes                {} ({} edges)", r.nodes, r.edges);
    if g.has_kinds() {
        println!(
            "kinds                {} forward, {} loss, {} backward",
            r.kinds.forward, r.kinds.loss, r.kinds.backward
        );
    }
    println!("total cost           {}{}", num(r.total_cost), unit(&g));
    println!("fixed memory         {}", bytes(r.fixed_memory));
    println!("checkpoint-all peak  {}", bytes(r.checkpoint_all_peak));
    println!(
        "min feasible budget  {} (computing '{}' with its inputs; no schedule fits below it)",
        bytes(r.min_feasible_budget),
        r.min_feasible_budget_node
    );
    println!("structure            {}", r.structure_detail);
    if let Some(tier) = &r.storage_tier {
        println!("storage tier         {}", tier.verdict());
    }
    Ok(0)
}
