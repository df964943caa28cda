//! A second, slower storage tier beside the fast memory the budget describes (Kukreja,
//! Hückelheim, Gorman, "Backpropagation for long sequences: beyond memory constraints with
//! constant overheads"): Level 1 is the fast, small memory where every
//! op runs (the budget); Level 2 is large, slow storage (host DRAM, an SSD) that values
//! may be copied to and back from, asynchronously.
//!
//! This is data only: how long a copy takes, in the graph's cost unit (the unit of node
//! costs, so that the per-step times `T_A`, `T_B` of the paper are the node costs). The
//! slow tier is unbounded, as in the paper. Who copies what, and when, is for solvers and
//! the simulator.
//!
//! JSON (the graph's optional `storage` object, and the solve request's):
//!
//! | field             | meaning                                              |
//! |-------------------|------------------------------------------------------|
//! | `write_bandwidth` | bytes per cost unit, fast -> slow                     |
//! | `read_bandwidth`  | bytes per cost unit, slow -> fast                     |
//! | `write_time`      | cost units per copy fast -> slow, whatever its size   |
//! | `read_time`       | cost units per copy slow -> fast, whatever its size   |
//! | `transfer_time`   | both `write_time` and `read_time` (the paper's `T_T`) |
//!
//! Each direction takes exactly one of its bandwidth or its time. A copy takes at most
//! [`MAX_TOTAL_COST`] (10^290) cost units, as a whole graph's compute may: a time above it, or
//! a bandwidth under which the largest value (`MAX_BYTES`) would take longer, is refused, so
//! that no sum of copy times overflows to infinity.

use super::{MAX_BYTES, MAX_TOTAL_COST};
use serde::{Deserialize, Serialize};

/// How long one copy in one direction takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TransferRate {
    /// Bytes per cost unit (> 0): a copy of `b` bytes takes `b / bandwidth`.
    Bandwidth(f64),
    /// Cost units per copy (>= 0), whatever its size: the paper's per-state `T_T`.
    PerCopy(f64),
}

impl TransferRate {
    /// The time to copy `bytes` bytes.
    pub fn time(self, bytes: u64) -> f64 {
        match self {
            TransferRate::Bandwidth(b) => bytes as f64 / b,
            TransferRate::PerCopy(t) => t,
        }
    }
}

/// The slow tier: copy rates in both directions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StorageObject", into = "StorageSpec")]
pub struct Storage {
    /// Fast -> slow (`store`).
    pub write: TransferRate,
    /// Slow -> fast (`load`).
    pub read: TransferRate,
}

/// A storage description that breaks a rule; `field` names the offending field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("storage.{field}: {message}")]
pub struct StorageError {
    pub field: &'static str,
    pub message: String,
}

/// The JSON form of [`Storage`], before validation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a storage tier: an object such as {\"transfer_time\": 8} or {\"write_bandwidth\": 1e9, \"read_bandwidth\": 2e9}"
)]
pub struct StorageSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bandwidth: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bandwidth: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_time: Option<f64>,
}

impl Storage {
    /// The same per-copy time `T_T` in both directions.
    pub fn per_copy(transfer_time: f64) -> Result<Storage, StorageError> {
        Storage::try_from(StorageSpec {
            transfer_time: Some(transfer_time),
            ..StorageSpec::default()
        })
    }
}

/// The least bandwidth: the largest value copied in [`MAX_TOTAL_COST`] cost units.
const MIN_BANDWIDTH: f64 = MAX_BYTES as f64 / MAX_TOTAL_COST;

/// One direction from its bandwidth and time fields (`time` may come from `transfer_time`).
fn direction(
    bandwidth: (&'static str, Option<f64>),
    time: (&'static str, Option<f64>),
) -> Result<TransferRate, StorageError> {
    match (bandwidth.1, time.1) {
        (Some(_), Some(_)) => Err(StorageError {
            field: bandwidth.0,
            message: format!("give either {} or {}, not both", bandwidth.0, time.0),
        }),
        (Some(b), None) if b.is_finite() && b >= MIN_BANDWIDTH => Ok(TransferRate::Bandwidth(b)),
        (Some(b), None) => Err(StorageError {
            field: bandwidth.0,
            message: format!(
                "must be a finite number of bytes per cost unit >= {MIN_BANDWIDTH:e} (2^53 bytes \
                 in 10^290 cost units), got {b}"
            ),
        }),
        (None, Some(t)) if (0.0..=MAX_TOTAL_COST).contains(&t) => Ok(TransferRate::PerCopy(t)),
        (None, Some(t)) => Err(StorageError {
            field: time.0,
            message: format!("must be a number of cost units from 0 to 1e290, got {t}"),
        }),
        (None, None) => Err(StorageError {
            field: bandwidth.0,
            message: format!(
                "the storage needs {} or {} (or transfer_time for both directions)",
                bandwidth.0, time.0
            ),
        }),
    }
}

impl TryFrom<StorageSpec> for Storage {
    type Error = StorageError;
    fn try_from(spec: StorageSpec) -> Result<Storage, StorageError> {
        let (write_time, read_time) = match spec.transfer_time {
            None => (
                ("write_time", spec.write_time),
                ("read_time", spec.read_time),
            ),
            Some(_) if spec.write_time.is_some() || spec.read_time.is_some() => {
                return Err(StorageError {
                    field: "transfer_time",
                    message: "give transfer_time or write_time/read_time, not both".into(),
                })
            }
            Some(t) => (("transfer_time", Some(t)), ("transfer_time", Some(t))),
        };
        Ok(Storage {
            write: direction(("write_bandwidth", spec.write_bandwidth), write_time)?,
            read: direction(("read_bandwidth", spec.read_bandwidth), read_time)?,
        })
    }
}

/// The fields of [`StorageSpec`], for the hint of an unknown one.
const FIELDS: &[&str] = &[
    "write_bandwidth",
    "read_bandwidth",
    "write_time",
    "read_time",
    "transfer_time",
];

/// What [`Storage`] is read from: a JSON object and nothing else. serde's derived reader
/// would also take an array as the fields in their order (`[1e9, 2e9]`: the two bandwidths),
/// and names no field an unknown one most likely means.
struct StorageObject(serde_json::Map<String, serde_json::Value>);

impl<'de> Deserialize<'de> for StorageObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<StorageObject, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Object(fields) => Ok(StorageObject(fields)),
            other => Err(D::Error::custom(format!(
                "the storage tier must be an object such as {{\"transfer_time\": 8}}, not {}",
                super::load::type_name(&other)
            ))),
        }
    }
}

impl TryFrom<StorageObject> for Storage {
    type Error = String;
    fn try_from(object: StorageObject) -> Result<Storage, String> {
        if let Some(field) = object.0.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(super::load::unknown_field_message(field, FIELDS));
        }
        let spec: StorageSpec = serde_json::from_value(serde_json::Value::Object(object.0))
            .map_err(|e| e.to_string())?;
        Storage::try_from(spec).map_err(|e| e.to_string())
    }
}

impl From<Storage> for StorageSpec {
    fn from(storage: Storage) -> StorageSpec {
        let mut spec = StorageSpec::default();
        match storage.write {
            TransferRate::Bandwidth(b) => spec.write_bandwidth = Some(b),
            TransferRate::PerCopy(t) => spec.write_time = Some(t),
        }
        match storage.read {
            TransferRate::Bandwidth(b) => spec.read_bandwidth = Some(b),
            TransferRate::PerCopy(t) => spec.read_time = Some(t),
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Storage, String> {
        serde_json::from_str::<Storage>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn every_form_parses_and_round_trips() {
        let s = parse(r#"{"write_bandwidth": 4, "read_time": 2.5}"#).unwrap();
        assert_eq!(s.write.time(10), 2.5);
        assert_eq!(s.read.time(1 << 30), 2.5);
        let back: Storage = serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            parse(r#"{"transfer_time": 8}"#).unwrap(),
            Storage::per_copy(8.0).unwrap()
        );
    }

    #[test]
    fn the_hint_knows_every_field_and_only_an_object_is_read() {
        let every = StorageSpec {
            write_bandwidth: Some(1.0),
            read_bandwidth: Some(1.0),
            write_time: Some(1.0),
            read_time: Some(1.0),
            transfer_time: Some(1.0),
        };
        let value = serde_json::to_value(every).unwrap();
        let written: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut known = FIELDS.to_vec();
        known.sort_unstable();
        assert_eq!(written, known);
        let said = parse(r#"{"read_tme": 1, "write_time": 1}"#).unwrap_err();
        assert!(said.contains("did you mean `read_time`"), "{said}");
        for json in ["[1e9, 2e9]", "[]", "8", "null"] {
            let said = parse(json).unwrap_err();
            assert!(said.contains("must be an object"), "{json}: {said}");
        }
    }

    #[test]
    fn bad_storage_names_the_field() {
        for (json, field) in [
            (
                r#"{"write_bandwidth": 0, "read_time": 1}"#,
                "write_bandwidth",
            ),
            (r#"{"write_time": -1, "read_time": 1}"#, "write_time"),
            (r#"{"write_time": 1}"#, "read_bandwidth"),
            (
                r#"{"write_time": 1, "write_bandwidth": 1, "read_time": 1}"#,
                "write_bandwidth",
            ),
            (r#"{"transfer_time": 1, "read_time": 1}"#, "transfer_time"),
            // Copy times past 10^290, which sums of them would overflow to infinity.
            (r#"{"write_time": 1e308, "read_time": 1}"#, "write_time"),
            (
                r#"{"write_bandwidth": 1e-300, "read_time": 1}"#,
                "write_bandwidth",
            ),
        ] {
            let e = parse(json).unwrap_err();
            assert!(e.contains(&format!("storage.{field}")), "{json}: {e}");
        }
        assert!(parse(r#"{"transfer_time": 1, "latency": 3}"#)
            .unwrap_err()
            .contains("latency"));
    }
}

#[cfg(test)]
mod load_tests {
    use crate::graph::load::{parse_graph, Format};

    #[test]
    fn a_graph_file_carries_its_storage() {
        let g = parse_graph(
            r#"{"nodes": [{"id": "a", "cost": 1, "memory": 4}],
                "storage": {"write_bandwidth": 2, "read_bandwidth": 4}}"#,
            Format::Auto,
        )
        .unwrap();
        let storage = g.storage().unwrap();
        assert_eq!((storage.write.time(4), storage.read.time(4)), (2.0, 1.0));
        let e = parse_graph(
            r#"{"nodes": [{"id": "a", "cost": 1, "memory": 4}], "storage": {"read_time": 1}}"#,
            Format::Auto,
        )
        .unwrap_err();
        assert!(e.to_string().contains("storage.write_bandwidth"), "{e}");
    }
}
