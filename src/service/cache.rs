//! The bounded result cache. The key is the BLAKE3 hash of a canonical serialization of
//! what determines a result: the validated graph in the native format (nodes in solver
//! order, so two spellings of one graph share a key) and its storage tier, the budget resolved to bytes, the
//! solver and every option that reaches it. The crate version is part of the key.
//! Only deterministic answers are kept (`optimal`, `feasible`, `infeasible`); a time limit
//! with no schedule, an error or a cancel is never cached. When full, the least recently
//! used entry goes.

use crate::graph::Graph;
use crate::solve::{SolveResult, Status};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub type Key = [u8; 32];

/// The inputs of a solve, as they enter the key.
pub struct KeyParts<'a> {
    pub graph: &'a Graph,
    pub budget: u64,
    pub solver: &'a str,
    pub time_limit_s: f64,
    pub mip_gap: Option<f64>,
    pub seed: u64,
}

impl KeyParts<'_> {
    pub fn key(&self) -> Key {
        #[derive(Serialize)]
        struct Canonical<'a> {
            version: &'static str,
            graph: crate::graph::GraphSpec,
            storage: Option<&'a crate::graph::Storage>,
            budget: u64,
            solver: &'a str,
            time_limit_s: f64,
            mip_gap: Option<f64>,
            seed: u64,
        }
        let bytes = serde_json::to_vec(&Canonical {
            version: env!("CARGO_PKG_VERSION"),
            graph: self.graph.to_spec(),
            storage: self.graph.storage(),
            budget: self.budget,
            solver: self.solver,
            time_limit_s: self.time_limit_s,
            mip_gap: self.mip_gap,
            seed: self.seed,
        })
        .expect("keys serialise");
        *blake3::hash(&bytes).as_bytes()
    }
}

/// Whether a result may be served again for the same key.
pub fn cacheable(result: &SolveResult) -> bool {
    matches!(
        result.status,
        Status::Optimal | Status::OptimalInScope | Status::Feasible | Status::Infeasible
    )
}

struct Inner {
    entries: HashMap<Key, (Arc<SolveResult>, u64)>,
    tick: u64,
}

pub struct Cache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl Cache {
    /// A cache of at most `capacity` results (0 disables it).
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                tick: 0,
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("cache lock").entries.len()
    }

    pub fn get(&self, key: &Key) -> Option<Arc<SolveResult>> {
        let mut inner = self.inner.lock().expect("cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        inner.entries.get_mut(key).map(|(r, used)| {
            *used = tick;
            r.clone()
        })
    }

    pub fn put(&self, key: Key, result: Arc<SolveResult>) {
        if self.capacity == 0 || !cacheable(&result) {
            return;
        }
        let mut inner = self.inner.lock().expect("cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.entries.contains_key(&key) && inner.entries.len() >= self.capacity {
            let oldest = inner
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                inner.entries.remove(&k);
            }
        }
        inner.entries.insert(key, (result, tick));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{generate, Storage};
    use crate::solve::{self, Instance, SolveOptions};

    fn result(graph: &Graph, budget: u64) -> Arc<SolveResult> {
        let r = solve::solve(
            &Instance { graph, budget },
            "checkpoint-all",
            &SolveOptions::default(),
        )
        .unwrap();
        Arc::new(r)
    }

    fn key(graph: &Graph, budget: u64, solver: &str) -> Key {
        KeyParts {
            graph,
            budget,
            solver,
            time_limit_s: 10.0,
            mip_gap: None,
            seed: 0,
        }
        .key()
    }

    #[test]
    fn keys_differ_by_every_input_and_lru_evicts() {
        let g = generate::linear(3);
        let h = generate::linear(4);
        let tiered = g
            .clone()
            .with_storage(Some(Storage::per_copy(4.0).unwrap()));
        let ks = [
            key(&g, 100, "auto"),
            key(&g, 101, "auto"),
            key(&g, 100, "chen-sqrt"),
            key(&h, 100, "auto"),
            key(&tiered, 100, "auto"),
        ];
        for i in 0..ks.len() {
            for j in 0..i {
                assert_ne!(ks[i], ks[j]);
            }
        }
        assert_eq!(key(&g, 100, "auto"), ks[0]);
        let c = Cache::new(2);
        let r = result(&g, 1 << 20);
        c.put(ks[0], r.clone());
        c.put(ks[1], r.clone());
        assert!(c.get(&ks[0]).is_some());
        c.put(ks[2], r);
        assert_eq!(c.len(), 2);
        assert!(
            c.get(&ks[1]).is_none(),
            "the least recently used entry goes"
        );
        assert!(c.get(&ks[0]).is_some() && c.get(&ks[2]).is_some());
    }
}
