//! Sequential networks extracted by Checkmate's Keras rule (checkmate.md §4.3: the
//! backward op of stage `j` also reads `x_{j+1}`) are chains: `remat inspect` detects them,
//! `auto`'s exact DP is the chain DP, and chain-dp's plans at several shares of the
//! checkpoint-all peak fit the budget with the predicted cost and peak, never above
//! chen-greedy's cost. The networks are in the MLSys benchmark set: the test runs where
//! `REMAT_MLSYS` names it and is ignored otherwise (`common::mlsys_dir`).

use crate::common;

use remat::budget::Budget;
use remat::graph::structure::chain;
use remat::solve::{self, exact_solver_for, Instance, Scope, SolveOptions, Status};

#[test]
#[ignore = "needs the MLSys set: REMAT_MLSYS=DIR"]
fn mlsys_keras_sequential_networks_are_chains_chain_dp_solves() {
    let set = common::mlsys_dir();
    let cases = [
        (set.join("VGG16_256_224x224_train.json"), [0.9, 0.8, 0.7]),
        (
            set.join("MobileNet_512_224x224_train.json"),
            [0.9, 0.8, 0.7],
        ),
    ];
    for (path, fractions) in cases {
        let graph = common::load(&path);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let c = chain(&graph).unwrap_or_else(|e| panic!("{name}: {e}"));
        let l = c.len();
        for (i, st) in c.stages.iter().enumerate() {
            // Every backward op but the last reads the next stage's output.
            assert_eq!(st.reads_next_output, i + 1 < l, "{name} stage {}", i + 1);
        }
        let exact = exact_solver_for(&graph).expect(&name);
        assert_eq!(
            (exact.info().name, exact.scope()),
            ("chain-dp", Scope::OptimalAmongPersistent)
        );
        for fraction in fractions {
            let budget = Budget::OfPeak(fraction).resolve(&graph).unwrap();
            let instance = Instance {
                graph: &graph,
                budget,
            };
            let run = |s| solve::solve(&instance, s, &SolveOptions::default()).unwrap();
            let (dp, greedy) = (run("chain-dp"), run("chen-greedy"));
            let case = format!("{name} at {fraction}");
            if budget < graph.min_feasible_budget().0 {
                assert_eq!(dp.status, Status::Infeasible, "{case}");
                continue;
            }
            let details = serde_json::to_value(dp.details.unwrap()).unwrap();
            // Optimal when its slots divide every size; else optimal only for the sizes
            // rounded up, which it says, claiming no more than a feasible plan.
            let slot = details["slot_size"].as_u64().unwrap();
            let whole = |b: u64| b % slot == 0;
            if whole(c.loss_size) && c.stages.iter().all(|st| whole(st.x) && whole(st.delta)) {
                assert!(dp.status.is_optimal(), "{case}: {:?}", dp.message);
            } else {
                assert_eq!(dp.status, Status::Feasible, "{case}");
                let message = dp.message.unwrap_or_default();
                assert!(message.contains("rounded up to slots"), "{case}: {message}");
            }
            let stats = dp.stats.unwrap();
            assert!(stats.peak_memory <= budget, "{case}");
            // Equal up to the order of the float sums.
            let predicted = details["predicted_cost"].as_f64().unwrap();
            assert!(
                (predicted - stats.total_cost).abs() <= 1e-9 * stats.total_cost,
                "{case}: predicted {predicted}, simulated {}",
                stats.total_cost
            );
            assert_eq!(details["predicted_peak"].as_u64(), Some(stats.peak_memory));
            if let Some(g) = greedy.stats {
                assert!(stats.total_cost <= g.total_cost, "{case}");
            }
        }
    }
}
