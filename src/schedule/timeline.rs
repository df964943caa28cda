//! The time model of a schedule that copies values between a fast and a slow tier
//! (Kukreja, Hückelheim, Gorman, "Backpropagation for long sequences: beyond memory
//! constraints with constant overheads", §2-§3): computes run one after
//! another on one compute stream, copies run asynchronously beside them.
//!
//! Times are in the graph's cost unit: `compute(v)` takes `c_v` (the paper's `T_A` for a
//! forward step, `T_B` for a backward step); a copy of `v` takes the storage's write
//! (`store`) or read (`load`) time for `s_v` bytes (the paper's `T_T`). The events are
//! issued in schedule order at the compute stream's clock `now`:
//!
//! * `compute(v)` starts at `max(now, arrival of each input)` and ends `c_v` later; `now`
//!   moves to its end. When an input is a value still being loaded the stream waits:
//!   that wait is a [`Stall`], the only way compute is ever delayed.
//! * `store(v)` starts at `max(now, write channel free)`: one channel per direction, one
//!   copy at a time on each, in issue order. The compute stream does not wait.
//! * `load(v)` starts at `max(now, read channel free, end of v's store)`; `v` arrives when
//!   it ends. Its destination buffer occupies fast memory from the moment it is issued.
//! * `free(v)` releases `v`'s bytes at `max(now, end of the copies of v in flight)`: a
//!   stored value may leave the fast tier once its copy completes (and a buffer being
//!   loaded into, once the load completes). The compute stream does not wait.
//!
//! A compute's output occupies memory from the compute's start. At equal times releases
//! come before allocations (a buffer released at `t` can be reused at `t`). The fast-tier
//! peak is the maximum of `K +` the bytes allocated and not released, over time; the
//! makespan is the end of the last compute or copy. With no stall, the makespan is
//! `Σ c_v` over the compute events: copies are then free, as the paper's model assumes
//! ("storing and prefetching happens asynchronously", the paper).
//!
//! `replay` assumes a schedule that the event-order rules of the simulator accepted.

use super::{Event, Schedule};
use crate::graph::{Graph, Storage};
use serde::Serialize;

/// A compute that waited for a value to arrive from the slow tier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stall {
    /// Index of the compute event that waited.
    pub event: usize,
    /// The node it computes.
    pub node: String,
    /// The input it waited for.
    pub waits_for: String,
    /// How long it waited, in cost units.
    pub time: f64,
}

/// What the timed replay of a schedule with copies measures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierStats {
    /// End of the last compute or copy, in cost units.
    pub makespan: f64,
    /// Σ c_v over compute events: the makespan if nothing ever stalls.
    pub compute_time: f64,
    /// Σ of the stalls' times: `makespan − compute_time` unless a copy ends last.
    pub stall_time: f64,
    /// Every stall, in event order.
    pub stalls: Vec<Stall>,
    /// Peak bytes in the fast tier over time, `fixed_memory` included.
    pub fast_peak: u64,
    /// Index of the event whose allocation first reaches the fast-tier peak.
    pub fast_peak_event: usize,
    /// Bytes held by the slow tier at the end of the step (slow copies are never dropped,
    /// so this is also its peak).
    pub slow_bytes: u64,
    pub stores: usize,
    pub loads: usize,
    /// Bytes copied fast -> slow and slow -> fast.
    pub bytes_written: u64,
    pub bytes_read: u64,
}

/// A change of fast-tier memory at a time: allocations carry the event that made them.
struct Change {
    time: f64,
    bytes: u64,
    /// `Some(event)` for an allocation, `None` for a release.
    allocation: Option<usize>,
}

/// Stalls shorter than this fraction of the clock are rounding, not waiting.
const TOLERANCE: f64 = 1e-9;

/// Replays `schedule` on the time model above.
pub(crate) fn replay(graph: &Graph, schedule: &Schedule, storage: &Storage) -> TierStats {
    let mut clocks = Clocks::new(graph, storage, schedule.events.len());
    for (index, &event) in schedule.events.iter().enumerate() {
        clocks.issue(index, event);
    }
    let Clocks {
        now,
        write_free,
        read_free,
        mut changes,
        mut stats,
        ..
    } = clocks;
    stats.makespan = now.max(write_free).max(read_free);
    fast_peak(graph.fixed_memory(), &mut changes, &mut stats);
    stats
}

/// The replay so far: the compute stream's clock `now`, when each copy channel is free,
/// the clocks of each value, the fast-tier changes issued and the counts.
struct Clocks<'g> {
    graph: &'g Graph,
    storage: &'g Storage,
    now: f64,
    write_free: f64,
    read_free: f64,
    // When v's fast copy is available, when its slow copy is complete, and until when a
    // copy of its fast buffer is in flight.
    arrival: Vec<f64>,
    store_end: Vec<f64>,
    busy_until: Vec<f64>,
    changes: Vec<Change>,
    stats: TierStats,
}

impl<'g> Clocks<'g> {
    fn new(graph: &'g Graph, storage: &'g Storage, events: usize) -> Clocks<'g> {
        let n = graph.len();
        Clocks {
            graph,
            storage,
            now: 0.0,
            write_free: 0.0,
            read_free: 0.0,
            arrival: vec![0.0f64; n],
            store_end: vec![0.0f64; n],
            busy_until: vec![0.0f64; n],
            changes: Vec::with_capacity(events),
            stats: TierStats {
                makespan: 0.0,
                compute_time: 0.0,
                stall_time: 0.0,
                stalls: Vec::new(),
                fast_peak: graph.fixed_memory(),
                fast_peak_event: 0,
                slow_bytes: 0,
                stores: 0,
                loads: 0,
                bytes_written: 0,
                bytes_read: 0,
            },
        }
    }

    /// Issues the `index`-th event at `now`.
    fn issue(&mut self, index: usize, event: Event) {
        let v = event.node();
        let bytes = self.graph.memory(v);
        match event {
            Event::Compute(_) => self.compute(index, v, bytes),
            Event::Free(_) => self.free(v, bytes),
            Event::Store(_) => self.store(v, bytes),
            Event::Load(_) => self.load(index, v, bytes),
        }
    }

    /// `compute(v)` starts when its last input arrives (a [`Stall`] if that is after
    /// `now`) and moves `now` to its end.
    fn compute(&mut self, index: usize, v: usize, bytes: u64) {
        let (graph, now) = (self.graph, self.now);
        let arrival = &self.arrival;
        let latest = graph
            .preds(v)
            .iter()
            .copied()
            .max_by(|&a, &b| arrival[a].total_cmp(&arrival[b]));
        let start = latest.map_or(now, |u| now.max(arrival[u]));
        if let Some(u) = latest.filter(|_| start - now > TOLERANCE * now.max(1.0)) {
            self.stats.stall_time += start - now;
            self.stats.stalls.push(Stall {
                event: index,
                node: graph.id(v).to_string(),
                waits_for: graph.id(u).to_string(),
                time: start - now,
            });
        }
        self.changes.push(Change {
            time: start,
            bytes,
            allocation: Some(index),
        });
        self.now = start + graph.cost(v);
        self.arrival[v] = self.now;
        self.stats.compute_time += graph.cost(v);
    }

    /// `free(v)` releases `v`'s bytes once the copies of `v` in flight end.
    fn free(&mut self, v: usize, bytes: u64) {
        self.changes.push(Change {
            time: self.now.max(self.busy_until[v]),
            bytes,
            allocation: None,
        });
        self.busy_until[v] = 0.0;
    }

    /// `store(v)` queues on the write channel.
    fn store(&mut self, v: usize, bytes: u64) {
        let start = self.now.max(self.write_free).max(self.arrival[v]);
        self.write_free = start + self.storage.write.time(bytes);
        self.store_end[v] = self.write_free;
        self.busy_until[v] = self.busy_until[v].max(self.write_free);
        self.stats.stores += 1;
        self.stats.bytes_written += bytes;
        self.stats.slow_bytes += bytes;
    }

    /// `load(v)` allocates its buffer now and queues on the read channel after `v`'s
    /// store.
    fn load(&mut self, index: usize, v: usize, bytes: u64) {
        self.changes.push(Change {
            time: self.now,
            bytes,
            allocation: Some(index),
        });
        let start = self.now.max(self.read_free).max(self.store_end[v]);
        self.read_free = start + self.storage.read.time(bytes);
        self.arrival[v] = self.read_free;
        self.busy_until[v] = self.read_free;
        self.stats.loads += 1;
        self.stats.bytes_read += bytes;
    }
}

/// Sets the fast-tier peak, `fixed` included, and the event that first reaches it, from
/// `changes` taken in time order.
fn fast_peak(fixed: u64, changes: &mut [Change], stats: &mut TierStats) {
    // Releases before allocations at equal times; otherwise in time, then event order
    // (the sort is stable).
    changes.sort_by(|a, b| {
        a.time
            .total_cmp(&b.time)
            .then(a.allocation.is_some().cmp(&b.allocation.is_some()))
    });
    let mut memory = fixed;
    for change in changes.iter() {
        match change.allocation {
            Some(event) => {
                memory += change.bytes;
                if memory > stats.fast_peak {
                    stats.fast_peak = memory;
                    stats.fast_peak_event = event;
                }
            }
            None => memory -= change.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::{Graph, GraphSpec, NodeSpec, Storage};
    use crate::schedule::{simulate, Event, Rule, Schedule, ScheduleJson};

    /// `a -> b -> c -> d` plus `d` reading `a` too, unit sizes, costs 1, 2, 3, 4.
    fn graph(storage: Option<Storage>) -> Graph {
        let node = |id: &str, cost: f64, inputs: &[&str]| NodeSpec {
            id: id.into(),
            cost,
            memory: 10,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            kind: None,
            op: None,
        };
        Graph::new(GraphSpec {
            fixed_memory: 5,
            nodes: vec![
                node("a", 1.0, &[]),
                node("b", 2.0, &["a"]),
                node("c", 3.0, &["b"]),
                node("d", 4.0, &["c", "a"]),
            ],
            ..Default::default()
        })
        .unwrap()
        .with_storage(storage)
    }

    use Event::{Compute as C, Free as F, Load as L, Store as S};

    /// Store `a`, drop it, bring it back for `d`.
    fn offload() -> Schedule {
        Schedule::new(vec![C(0), S(0), C(1), F(0), C(2), F(1), L(0), C(3)])
    }

    #[test]
    fn copies_overlap_compute_and_a_stored_value_leaves_when_its_copy_ends() {
        // Write 2.5: the store of a runs [1, 3.5]; free(a) at 3 is deferred to 3.5, after
        // c started at 3, so a, b and c are resident together (K + 30 = 35) although
        // event order says 25. Read 2: load(a) issued at 6 arrives at 8, d starts at 8
        // (a 2-unit stall) and ends at 12.
        let storage: Storage =
            serde_json::from_str(r#"{"write_time": 2.5, "read_time": 2}"#).unwrap();
        let g = graph(Some(storage));
        let stats = simulate(&g, &offload()).unwrap();
        let tiers = stats.tiers.as_ref().unwrap();
        assert_eq!(tiers.compute_time, 10.0);
        assert_eq!(tiers.makespan, 12.0);
        assert_eq!(tiers.stall_time, 2.0);
        assert_eq!(tiers.stalls.len(), 1);
        assert_eq!(
            (
                tiers.stalls[0].node.as_str(),
                tiers.stalls[0].waits_for.as_str()
            ),
            ("d", "a")
        );
        assert_eq!((tiers.fast_peak, tiers.fast_peak_event), (35, 4));
        assert_eq!(stats.peak_memory, 35);
        assert_eq!(stats.memory_after[4], 25);
        assert_eq!((tiers.stores, tiers.loads, tiers.slow_bytes), (1, 1, 10));
    }

    #[test]
    fn fast_copies_cost_no_time() {
        // The store of a runs [1, 3] and its free at 3 releases it at 3, before the load
        // of a (issued at 3, arrives at 5) and c (starts at 3) allocate: K + b, a, c.
        // d starts at 6 without waiting: the makespan is Σ c_v.
        let g = graph(Some(Storage::per_copy(2.0).unwrap()));
        let prefetch = Schedule::new(vec![C(0), S(0), C(1), F(0), L(0), C(2), F(1), C(3)]);
        let stats = simulate(&g, &prefetch).unwrap();
        let tiers = stats.tiers.unwrap();
        assert_eq!(tiers.makespan, 10.0);
        assert!(tiers.stalls.is_empty());
        assert_eq!((stats.peak_memory, tiers.fast_peak_event), (35, 5));
    }

    #[test]
    fn one_copy_at_a_time_per_direction() {
        // Stores of a and b queue on the write channel: a [1, 5], b [5, 9]; the load of
        // b waits for its store, then for a's load on the read channel.
        let g = graph(Some(Storage::per_copy(4.0).unwrap()));
        let schedule = Schedule::new(vec![
            C(0),
            S(0),
            C(1),
            S(1),
            F(0),
            F(1),
            L(0),
            L(1),
            C(2),
            C(3),
        ]);
        let tiers = simulate(&g, &schedule).unwrap().tiers.unwrap();
        // load a [5, 9], load b [9, 13]; c starts at 13, d ends at 20.
        assert_eq!(tiers.makespan, 20.0);
        assert_eq!(tiers.stall_time, 10.0);
    }

    #[test]
    fn copy_rules_name_the_event_and_node() {
        let with = graph(Some(Storage::per_copy(1.0).unwrap()));
        for (graph, events, rule) in [
            (graph(None), vec![C(0), S(0)], Rule::NoStorage),
            (with.clone(), vec![S(0)], Rule::StoreNotResident),
            (with.clone(), vec![C(0), S(0), S(0)], Rule::AlreadyStored),
            (with.clone(), vec![C(0), L(0)], Rule::LoadNotStored),
            (with.clone(), vec![C(0), S(0), L(0)], Rule::AlreadyResident),
        ] {
            let e = simulate(&graph, &Schedule::new(events.clone())).unwrap_err();
            assert_eq!(e.rule, rule, "{events:?}");
            assert_eq!(e.node.as_deref(), Some("a"));
            assert_eq!(e.event, Some(events.len() - 1));
        }
    }

    #[test]
    fn copies_round_trip_through_json() {
        let g = graph(Some(Storage::per_copy(1.0).unwrap()));
        let json = serde_json::to_string(&offload().to_json(&g)).unwrap();
        assert!(json.contains(r#"{"op":"store","node":"a"}"#), "{json}");
        assert!(json.contains(r#"{"op":"load","node":"a"}"#), "{json}");
        let back: ScheduleJson = serde_json::from_str(&json).unwrap();
        assert_eq!(back.resolve(&g).unwrap(), offload());
    }

    #[test]
    fn a_schedule_without_copies_has_no_timed_view() {
        let g = graph(Some(Storage::per_copy(1.0).unwrap()));
        let plain = Schedule::new(vec![C(0), C(1), C(2), F(1), C(3)]);
        let stats = simulate(&g, &plain).unwrap();
        assert!(stats.tiers.is_none());
        assert_eq!(stats.peak_memory, 5 + 30);
        assert!(!serde_json::to_string(&stats).unwrap().contains("tiers"));
    }
}
