//! The bounded result cache. The key is the BLAKE3 hash of a canonical serialization of
//! what determines a result: the validated graph in the native format (nodes in solver
//! order, so two spellings of one graph share a key) and its storage tier, the budget resolved to bytes, the
//! solver and every option that reaches it. The crate version is part of the key.
//! Only answers with a verdict are kept (`optimal`, `optimal_in_scope`, `feasible`,
//! `infeasible`), those a clock ended (`ended_by: time_limit`) too: the same request, time
//! limit included, then gets the answer it already got. A time limit with no schedule, an
//! error or a cancel is never cached. The cache holds at most
//! `capacity` results and `max_bytes` of them, each weighed by the length of its JSON
//! (counted without writing it) plus what its events hold in memory ([`held`]: their
//! structures, ids and per-event figures, about twice their JSON), so that `max_bytes`
//! bounds the memory the results hold, not only their JSON; a result heavier than
//! `max_bytes` alone is not kept, and is known to be without a pass over its JSON when
//! its floor is heavier ([`weight_floor`]), or once the count passes `max_bytes`. When
//! full, the least recently used entries go.

use crate::graph::Graph;
use crate::schedule::EventJson;
use crate::solve::{Effort, SolveResult, Status};
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
    pub effort: Effort,
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
            effort: Effort,
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
            effort: self.effort,
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
    /// Result, last use, weight.
    entries: HashMap<Key, (Arc<SolveResult>, u64, usize)>,
    tick: u64,
    /// Σ weights.
    bytes: usize,
}

pub struct Cache {
    capacity: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

/// Counts what is written to it, and refuses to go past `most` bytes.
struct Counter {
    written: usize,
    most: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += buf.len();
        if self.written > self.most {
            return Err(std::io::Error::other("heavier than the cache"));
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The bytes of the shortest JSON an event can have besides its node id:
/// `{"op":"free","node":""}` and the comma after it.
const EVENT_FLOOR: usize = 24;

/// A lower bound on the length of `result`'s JSON: its events' (`EVENT_FLOOR` plus
/// the node id each, a pass over lengths only).
fn json_floor(result: &SolveResult) -> usize {
    result.schedule.as_ref().map_or(0, |s| {
        s.events.iter().map(|e| EVENT_FLOOR + e.node().len()).sum()
    })
}

/// The bytes of memory `result` holds that grow with its schedule: each event (an
/// [`EventJson`] and its node id's allocation) and the simulator's figures per event
/// (`memory_after`) and per node (`computes`). A 1,000,000-event schedule of short ids holds
/// about 72 MB this way against 40 MB of JSON.
pub(super) fn held(result: &SolveResult) -> usize {
    let events = result.schedule.as_ref().map_or(0, |s| {
        let ids: usize = s.events.iter().map(|e| allocation(e.node().len())).sum();
        s.events.capacity() * size_of::<EventJson>() + ids
    });
    let stats = result.stats.as_ref().map_or(0, |s| {
        s.memory_after.capacity() * size_of::<u64>() + s.computes.capacity() * size_of::<u32>()
    });
    events + stats
}

/// The bytes an allocation of `n` bytes takes from glibc's malloc: a chunk of at least 32
/// bytes, 16-aligned, with 8 bytes of header; none for `n` = 0 (an empty `String`).
fn allocation(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).next_multiple_of(16).max(32)
    }
}

/// A lower bound on [`weight`], found in passes over lengths only: [`json_floor`] plus
/// [`held`].
pub(super) fn weight_floor(result: &SolveResult) -> usize {
    json_floor(result) + held(result)
}

/// The weight of `result` (the length of its JSON plus [`held`]) if it is at most `most`
/// bytes; `None` for a heavier one, found without writing its JSON when its floor is already
/// heavier ([`weight_floor`]), else by counting its JSON up to the bytes `held` leaves.
fn weight(result: &SolveResult, most: usize) -> Option<usize> {
    let held = held(result);
    if json_floor(result) + held > most {
        return None;
    }
    let mut counter = Counter {
        written: 0,
        most: most - held,
    };
    serde_json::to_writer(&mut counter, result)
        .ok()
        .map(|()| counter.written + held)
}

impl Cache {
    /// A cache of at most `capacity` results and `max_bytes` of their weight (their JSON and
    /// what their events hold; either 0 disables it).
    pub fn new(capacity: usize, max_bytes: usize) -> Cache {
        Cache {
            capacity,
            max_bytes,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                tick: 0,
                bytes: 0,
            }),
        }
    }

    /// The weight of the results held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.inner.lock().expect("cache lock").bytes
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("cache lock").entries.len()
    }

    pub fn get(&self, key: &Key) -> Option<Arc<SolveResult>> {
        let mut inner = self.inner.lock().expect("cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        inner.entries.get_mut(key).map(|(r, used, _)| {
            *used = tick;
            r.clone()
        })
    }

    pub fn put(&self, key: Key, result: Arc<SolveResult>) {
        if self.capacity == 0 || !cacheable(&result) {
            return;
        }
        let Some(weight) = weight(&result, self.max_bytes) else {
            return;
        };
        let mut inner = self.inner.lock().expect("cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((_, _, old)) = inner.entries.remove(&key) {
            inner.bytes -= old;
        }
        while !inner.entries.is_empty()
            && (inner.entries.len() >= self.capacity || inner.bytes + weight > self.max_bytes)
        {
            let oldest = inner
                .entries
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(k, _)| *k);
            if let Some((_, _, w)) = oldest.and_then(|k| inner.entries.remove(&k)) {
                inner.bytes -= w;
            }
        }
        inner.bytes += weight;
        inner.entries.insert(key, (result, tick, weight));
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
            effort: Effort::default(),
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
        let timed = KeyParts {
            graph: &g,
            budget: 100,
            solver: "auto",
            time_limit_s: 10.0,
            mip_gap: None,
            seed: 0,
            effort: Effort::Time,
        }
        .key();
        assert!(!ks.contains(&timed), "the effort is part of the key");
        let c = Cache::new(2, usize::MAX);
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

    #[test]
    fn the_cache_holds_at_most_its_bytes() {
        let g = generate::linear(3);
        let r = result(&g, 1 << 20);
        let w = weight(&r, usize::MAX).unwrap();
        assert_eq!(w, serde_json::to_vec(&*r).unwrap().len() + held(&r));
        assert_eq!(weight(&r, w), Some(w));
        assert_eq!(weight(&r, w - 1), None, "the count stops past the most");
        let c = Cache::new(100, 2 * w + w / 2);
        for budget in 0..5 {
            c.put(key(&g, budget, "auto"), r.clone());
        }
        assert_eq!((c.len(), c.bytes()), (2, 2 * w));
        assert!(c.get(&key(&g, 4, "auto")).is_some(), "the newest stays");
        let tiny = Cache::new(100, w - 1);
        tiny.put(key(&g, 0, "auto"), r);
        assert_eq!(tiny.len(), 0, "a result over max_bytes alone is not kept");
    }

    /// What a result holds in memory is counted, not only its JSON: each event's structure
    /// and its id's allocation (at least 32 bytes for an id of 1 to 24), and its
    /// `memory_after` figure; about twice the JSON of a chain's schedule.
    #[test]
    fn a_result_weighs_at_least_what_its_events_hold() {
        let g = generate::linear(400);
        let r = result(&g, 1 << 40);
        let events = r.schedule.as_ref().unwrap().events.len();
        let json = serde_json::to_vec(&*r).unwrap().len();
        let w = weight(&r, usize::MAX).unwrap();
        let in_memory = events * (size_of::<EventJson>() + 32 + size_of::<u64>());
        assert!(w >= json + in_memory, "{w} < {json} + {in_memory}");
        assert!(weight_floor(&r) >= in_memory);
    }

    #[test]
    fn the_floor_of_a_result_is_at_most_its_json() {
        for n in [3, 40, 400] {
            let g = generate::linear(n);
            let r = result(&g, 1 << 40);
            let json = serde_json::to_vec(&*r).unwrap().len();
            let events = r.schedule.as_ref().unwrap().events.len();
            let floor = json_floor(&r);
            assert!(
                floor <= json && floor >= EVENT_FLOOR * events,
                "{floor} {json}"
            );
            assert_eq!(weight(&r, weight_floor(&r) - 1), None);
        }
    }
}
