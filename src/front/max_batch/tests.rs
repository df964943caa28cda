use super::*;
use crate::graph::generate::{random_dag, DagShape};
use crate::graph::{BatchSpec, GraphSpec};
use crate::schedule::checkpoint_all_peak;

/// A random training graph whose every size is `p_v · b` (batch 1 declared) plus `extra`
/// fixed bytes on every node.
fn linear_in_batch(seed: u64, extra: u64) -> Graph {
    let g = random_dag(&DagShape::sparse(), seed);
    let per: Vec<(String, u64)> = g.nodes().iter().map(|n| (n.id.clone(), n.memory)).collect();
    let mut spec: GraphSpec = g.to_spec();
    for n in &mut spec.nodes {
        n.memory += extra;
    }
    Graph::new(spec)
        .unwrap()
        .with_batch(BatchSpec {
            batch_size: Some(1),
            memory_per_sample: per,
            ..BatchSpec::default()
        })
        .unwrap()
}

#[test]
fn largest_batch_solves_each_line_exactly() {
    assert_eq!(largest_batch([(10, 3), (4, 5)], 30), Some(5));
    assert_eq!(largest_batch([(31, 0)], 30), Some(0));
    assert_eq!(largest_batch([(30, 0)], 30), None);
    assert_eq!(largest_batch([(0, 1)], u64::MAX), Some(u64::MAX));
}

/// The closed forms equal a scan of the simulator's checkpoint-all peak and of the
/// footprint bound over every batch.
#[test]
fn the_no_recompute_batch_is_the_checkpoint_all_scan() {
    for seed in 0..12 {
        let g = linear_in_batch(seed, seed % 3);
        let peak1 = checkpoint_all_peak(&g.at_batch(1).unwrap());
        for memory in [peak1 - 1, peak1, 3 * peak1 + 7, 10 * peak1] {
            let bounds = Bounds::new(&g, memory);
            let scan = |fits: &dyn Fn(&Graph) -> bool| {
                (1..)
                    .take_while(|&b| fits(&g.at_batch(b).unwrap()))
                    .last()
                    .unwrap_or(0)
            };
            assert_eq!(
                bounds.no_recompute,
                scan(&|h| checkpoint_all_peak(h) <= memory),
                "seed {seed} memory {memory}"
            );
            assert_eq!(
                bounds.upper_bound,
                scan(&|h| h.min_feasible_budget().0 <= memory),
                "seed {seed} memory {memory}"
            );
        }
    }
}

#[test]
fn bad_requests_name_their_field() {
    let g = linear_in_batch(1, 0);
    let ask = |memory: &str, rho: Option<f64>, fwd: Option<f64>| {
        MaxBatchInput {
            memory: Some(memory.parse().unwrap()),
            max_overhead: rho,
            max_extra_forward: fwd,
            solver: "checkpoint-all".into(),
        }
        .validate(&g)
        .map(|_| ())
        .map_err(|e| e.field())
    };
    assert_eq!(ask("1GiB", Some(0.9), None), Err(Some(Field::MaxOverhead)));
    assert_eq!(
        ask("1GiB", Some(f64::NAN), None),
        Err(Some(Field::MaxOverhead))
    );
    assert_eq!(
        ask("1GiB", None, Some(-1.0)),
        Err(Some(Field::MaxExtraForward))
    );
    assert_eq!(
        ask("1GiB", Some(1.5), Some(1.0)),
        Err(Some(Field::MaxOverhead))
    );
    assert!(!g.has_kinds(), "random_dag marks no forward op");
    assert_eq!(
        ask("1GiB", None, Some(1.0)),
        Err(Some(Field::MaxExtraForward))
    );
    assert_eq!(ask("1GiB", Some(1.0), None), Ok(()));
    let plain = random_dag(&DagShape::sparse(), 1);
    let e = MaxBatchInput {
        memory: Some(Budget::Bytes(1 << 30)),
        solver: "auto".into(),
        ..MaxBatchInput::default()
    }
    .validate(&plain)
    .unwrap_err();
    assert_eq!(e.field(), Some(Field::BatchSize));
    let mut spec = g.to_spec();
    spec.fixed_memory = 100;
    let fixed = Graph::new(spec)
        .unwrap()
        .with_batch(BatchSpec {
            batch_size: Some(1),
            memory_per_sample: vec![(g.id(0).to_string(), 1)],
            ..BatchSpec::default()
        })
        .unwrap();
    let e = MaxBatchInput {
        memory: Some(Budget::Bytes(99)),
        solver: "auto".into(),
        ..MaxBatchInput::default()
    }
    .validate(&fixed)
    .unwrap_err();
    assert!(matches!(
        e,
        MaxBatchError::BelowFixed {
            memory: 99,
            fixed: 100
        }
    ));
}

#[test]
fn samples_per_cost_is_none_where_nothing_costs() {
    let at = |cost: f64| {
        let g = Graph::new(GraphSpec {
            nodes: vec![crate::graph::NodeSpec {
                id: "a".into(),
                cost,
                memory: 1,
                inputs: Vec::new(),
                kind: None,
                op: None,
            }],
            ..Default::default()
        })
        .unwrap();
        let stats = crate::schedule::simulate(&g, &crate::schedule::checkpoint_all(&g)).unwrap();
        AtBatch::new(4, &stats).samples_per_cost
    };
    assert_eq!(at(0.0), None);
    assert_eq!(at(2.0), Some(2.0));
}

/// A graph whose costs reach `MAX_TOTAL_COST` at a batch its bytes allow: the search stays
/// within the batches the model can build (it answered an error, "at batch 4503599627370495
/// the sum of every node's cost is 4.5e304", naming no field, for a valid graph and memory).
#[test]
fn costs_bound_the_model_limit_as_bytes_do() {
    let mut spec = crate::graph::generate::linear(1).to_spec();
    for n in &mut spec.nodes {
        (n.cost, n.memory) = (1e288, 1);
    }
    let per = spec.nodes.iter().map(|n| (n.id.clone(), 1)).collect();
    let g = Graph::new(spec)
        .unwrap()
        .with_batch(BatchSpec {
            batch_size: Some(1),
            memory_per_sample: per,
            ..BatchSpec::default()
        })
        .unwrap();
    let request = MaxBatchInput {
        memory: Some(Budget::Bytes(crate::graph::MAX_BYTES)),
        solver: "checkpoint-all".into(),
        ..MaxBatchInput::default()
    }
    .validate(&g)
    .unwrap();
    let found = search(&g, &request, &crate::solve::SolveOptions::default()).unwrap();
    assert_eq!(
        found.model_limit, 33,
        "3 nodes of 1e288 a sample: 1e290 at batch 33.3"
    );
    assert_eq!(found.batch, 33);
    assert!(g.at_batch(found.model_limit).is_ok());
    assert!(g.at_batch(found.model_limit + 1).is_err());
}
