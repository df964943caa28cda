//! Memory budgets as users write them: bytes (`17179869184`), a size with a unit
//! (`"6GiB"`, `"512MB"`, `"1.5 GB"`), or a percentage of the checkpoint-all peak (`"80%"`).
//! The budget always includes the graph's `fixed_memory`.
//! [`Budget::resolve`] turns one into bytes for a graph, computing the checkpoint-all peak
//! (`crate::schedule::checkpoint_all_peak`) when the budget is a percentage: the one place
//! a budget is resolved, for the CLI and the service alike.
//!
//! Every budget is a whole number of bytes from 0 to `MAX_BYTES` (2^53, the limit of a
//! graph's `K + Σ s_v`, so a budget never needs more and every figure stays exact). A number
//! without a unit must be an integer: `0.7` is refused with a hint (`70%`, or bytes), since
//! a fraction of a byte is never what was meant. A size with a unit may be fractional
//! (`1.5 GB`) and rounds down. A percentage is any finite number above 0; it resolves
//! against the graph, and a result above `MAX_BYTES` is refused ([`Budget::resolve`]).

use crate::graph::load::compact;
use crate::graph::{Graph, MAX_BYTES};
use crate::schedule::checkpoint_all_peak;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A budget before it is resolved against a graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    Bytes(u64),
    /// A fraction of the checkpoint-all peak (`"80%"` is 0.8).
    OfPeak(f64),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid budget '{input}': {reason}")]
pub struct BudgetError {
    pub input: String,
    pub reason: String,
}

const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
];

impl Budget {
    /// The budget in bytes for `graph`: a percentage is of its checkpoint-all peak.
    /// Fractions round down, so the resolved budget never exceeds what was asked. A budget
    /// above `MAX_BYTES` (a percentage such as `1e308%`, or bytes built in code) is an error.
    pub fn resolve(self, graph: &Graph) -> Result<u64, BudgetError> {
        self.resolve_with(|| checkpoint_all_peak(graph))
    }

    /// [`Budget::resolve`] with the checkpoint-all peak given by `peak` (called only for a
    /// percentage).
    pub fn resolve_with(self, peak: impl FnOnce() -> u64) -> Result<u64, BudgetError> {
        let bytes = match self {
            Budget::Bytes(b) => b as f64,
            Budget::OfPeak(f) => (f * peak() as f64).floor(),
        };
        if (0.0..=MAX_BYTES as f64).contains(&bytes) {
            // Exact: an integral float below 2^53.
            Ok(bytes as u64)
        } else {
            Err(BudgetError {
                input: self.to_string(),
                reason: format!(
                    "it comes to {bytes:e} bytes for this graph; a budget is at most 2^53 = \
                     {MAX_BYTES} bytes"
                ),
            })
        }
    }
}

/// The budget a fraction `f` (in `[0, 1]`) of the way from `graph`'s minimum feasible
/// budget (`Graph::min_feasible_budget`) to its checkpoint-all peak, rounded down: how the
/// benches and tests place budgets between the tightest and the loosest.
pub fn between_min_and_peak(graph: &Graph, f: f64) -> u64 {
    let (min, _) = graph.min_feasible_budget();
    let peak = checkpoint_all_peak(graph).max(min);
    min + ((peak - min) as f64 * f.clamp(0.0, 1.0)).floor() as u64
}

/// `s` split into its number and its unit (lower case, maybe empty): the unit is the longest
/// known one it ends with where what comes before is a number (`1e3B`, `1.5e3MB`), else
/// whatever starts at the first letter (for the message about an unknown unit).
fn number_and_unit(s: &str) -> (&str, String) {
    let lower = s.to_ascii_lowercase();
    let is_number = |t: &str| {
        t.starts_with(|c: char| c.is_ascii_digit() || c == '.') && t.parse::<f64>().is_ok()
    };
    if is_number(s) {
        return (s, String::new());
    }
    let mut units: Vec<&str> = UNITS.iter().map(|&(u, _)| u).collect();
    units.sort_by_key(|u| std::cmp::Reverse(u.len()));
    for unit in units {
        if let Some(number) = lower.strip_suffix(unit).map(|n| s[..n.len()].trim()) {
            if is_number(number) {
                return (number, unit.to_string());
            }
        }
    }
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    (s[..split].trim(), s[split..].trim().to_ascii_lowercase())
}

/// The decimal `text` (digits, a point, an exponent) as an integer, exactly: `None` where
/// digits are left past the point, or it is too large to hold.
fn decimal_integer(text: &str) -> Option<u128> {
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (text, 0),
    };
    let (int, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = int.chars().chain(fraction.chars()).collect();
    let shift = i64::try_from(fraction.len()).ok()? - exponent;
    let whole = if shift >= 0 {
        let cut = digits.len().checked_sub(usize::try_from(shift).ok()?)?;
        if !digits[cut..].bytes().all(|b| b == b'0') {
            return None;
        }
        digits[..cut].to_string()
    } else {
        format!(
            "{digits}{}",
            "0".repeat(usize::try_from(-shift).ok().filter(|&z| z <= 40)?)
        )
    };
    if whole.is_empty() {
        return Some(0);
    }
    whole.parse().ok()
}

/// A number of bytes written without a unit, or `unit == "b"`: it must be an integer.
fn whole_bytes(value: f64) -> Result<u64, String> {
    if value.fract() != 0.0 {
        let pct = (value * 100.0 * 1e9).round() / 1e9;
        return Err(if value < 1.0 {
            format!(
                "{value} is not a byte count; for {pct}% of the checkpoint-all peak write \
                 {pct}%, or give bytes"
            )
        } else {
            format!(
                "{value} is not a whole number of bytes; give an integer, a size with a unit \
                 (such as 1.5GiB) or a percentage (such as 80%)"
            )
        });
    }
    in_range(value)
}

/// Why a budget of `got` bytes is refused: it is above `MAX_BYTES`.
fn over_max(got: impl fmt::Display) -> String {
    format!("a budget is at most 2^53 = {MAX_BYTES} bytes (8192 TiB), got {got}")
}

/// An integer number of bytes within `0..=MAX_BYTES`.
fn exact_bytes(bytes: u64) -> Result<u64, String> {
    if bytes <= MAX_BYTES {
        Ok(bytes)
    } else {
        Err(over_max(bytes))
    }
}

/// A number of bytes within `0..=MAX_BYTES`, rounded down.
fn in_range(bytes: f64) -> Result<u64, String> {
    if (0.0..=MAX_BYTES as f64).contains(&bytes) {
        Ok(bytes.floor() as u64)
    } else {
        Err(over_max(bytes))
    }
}

impl FromStr for Budget {
    type Err = BudgetError;
    fn from_str(input: &str) -> Result<Budget, BudgetError> {
        let err = |reason: &str| BudgetError {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err("the budget is empty"));
        }
        if let Some(pct) = s.strip_suffix('%') {
            let v: f64 = pct
                .trim()
                .parse()
                .map_err(|_| err("a percentage is a number followed by %, e.g. 80%"))?;
            if !v.is_finite() {
                return Err(err("a percentage must be a finite number, e.g. 80%"));
            }
            if v <= 0.0 {
                return Err(err("a percentage must be greater than 0"));
            }
            return Ok(Budget::OfPeak(v / 100.0));
        }
        let (number, unit) = number_and_unit(s);
        let value: f64 = number
            .parse()
            .map_err(|_| err("expected a number of bytes, a size such as 6GiB or 512MB, or a percentage such as 80%"))?;
        if value.is_infinite() {
            // digits past the largest double (`1e400`)
            return Err(err(&over_max(number)));
        }
        if value.is_nan() || value < 0.0 {
            return Err(err("a budget must be a non-negative number"));
        }
        let multiplier = if unit.is_empty() {
            1
        } else {
            UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|&(_, m)| m)
                .ok_or_else(|| err("unknown unit: use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)"))?
        };
        let digits = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        let bytes = if let (1, Ok(b)) = (multiplier, number.parse::<u64>()) {
            exact_bytes(b)
        } else if multiplier == 1 && digits {
            Err(over_max(number))
        } else if multiplier == 1 && value >= (MAX_BYTES / 2) as f64 {
            // from 2^52 on a double holds no fraction: 9007199254740991.5 would read as 2^53
            match decimal_integer(number) {
                Some(whole) if whole <= u128::from(MAX_BYTES) => Ok(whole as u64),
                Some(_) => Err(over_max(number)),
                None => Err(format!(
                    "{number} is not an exact number of bytes: write a budget of 2^52 bytes or more \
                     in digits only"
                )),
            }
        } else if multiplier == 1 {
            whole_bytes(value)
        } else {
            in_range(value * multiplier as f64)
        };
        bytes.map(Budget::Bytes).map_err(|reason| err(&reason))
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Bytes(b) => write!(f, "{b}"),
            Budget::OfPeak(x) => write!(f, "{}%", compact(x * 100.0)),
        }
    }
}

/// JSON accepts a number of bytes or any of the strings above; anything else is an error
/// that says what a budget is.
impl<'de> Deserialize<'de> for Budget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Budget, D::Error> {
        d.deserialize_any(BudgetVisitor)
    }
}

struct BudgetVisitor;

impl BudgetVisitor {
    fn bytes<E: serde::de::Error>(bytes: Result<u64, String>) -> Result<Budget, E> {
        bytes
            .map(Budget::Bytes)
            .map_err(|m| E::custom(format!("invalid budget: {m}")))
    }
}

impl serde::de::Visitor<'_> for BudgetVisitor {
    type Value = Budget;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a budget: a number of bytes, a size (\"6GiB\") or a share of the checkpoint-all \
             peak (\"80%\")",
        )
    }
    fn visit_u64<E: serde::de::Error>(self, b: u64) -> Result<Budget, E> {
        BudgetVisitor::bytes(exact_bytes(b))
    }
    fn visit_i64<E: serde::de::Error>(self, b: i64) -> Result<Budget, E> {
        match u64::try_from(b) {
            Ok(b) => self.visit_u64(b),
            Err(_) => BudgetVisitor::bytes(Err(format!("must be >= 0, got {b}"))),
        }
    }
    fn visit_f64<E: serde::de::Error>(self, f: f64) -> Result<Budget, E> {
        if f.is_finite() && f >= 0.0 {
            BudgetVisitor::bytes(whole_bytes(f))
        } else {
            BudgetVisitor::bytes(Err(format!("must be >= 0, got {f}")))
        }
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Budget, E> {
        s.parse().map_err(E::custom)
    }
}

impl Serialize for Budget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Budget::Bytes(b) => s.serialize_u64(*b),
            Budget::OfPeak(_) => s.serialize_str(&self.to_string()),
        }
    }
}

/// Bytes for people, in their own binary unit with at most four significant digits:
/// `17 B`, `12.5 MiB`, `1.5 GiB`. The one byte formatter of the command line and the
/// pictures.
pub fn human_bytes(bytes: u64) -> String {
    human_bytes_in(bytes as f64, bytes as f64)
}

/// Bytes in the unit that suits `scale_max` (so that an axis's labels share one unit):
/// `0.5 MiB` for 512 KiB on a scale up to 2 MiB.
pub fn human_bytes_in(bytes: f64, scale_max: f64) -> String {
    let (name, size) = byte_unit(scale_max);
    format!("{} {name}", significant(bytes / size))
}

/// The binary unit that suits `max` bytes: its name and size.
pub fn byte_unit(max: f64) -> (&'static str, f64) {
    const UNITS: [(&str, f64); 5] = [
        ("B", 1.0),
        ("KiB", 1024.0),
        ("MiB", 1048576.0),
        ("GiB", 1073741824.0),
        ("TiB", 1099511627776.0),
    ];
    UNITS
        .iter()
        .rev()
        .find(|(_, size)| max >= *size)
        .copied()
        .unwrap_or(UNITS[0])
}

/// `v` with at most four significant digits (all of its integer digits from 10^4 on),
/// trailing zeros dropped: `12.35`, `1234`, `0.5`.
pub fn significant(v: f64) -> String {
    let digits = if v == 0.0 {
        0
    } else {
        (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!("123".parse::<Budget>().unwrap(), Budget::Bytes(123));
        assert_eq!("6GiB".parse::<Budget>().unwrap(), Budget::Bytes(6 << 30));
        assert_eq!(
            "512MB".parse::<Budget>().unwrap(),
            Budget::Bytes(512_000_000)
        );
        assert_eq!(
            "1.5 GB".parse::<Budget>().unwrap(),
            Budget::Bytes(1_500_000_000)
        );
        assert_eq!("80%".parse::<Budget>().unwrap(), Budget::OfPeak(0.8));
        for exponent in ["1e3", "1E3", "1.5e3", " 1e3 "] {
            assert_eq!(
                exponent.parse::<Budget>().unwrap().to_string().len(),
                4,
                "{exponent}"
            );
        }
    }

    /// From 2^52 on a double has no fraction: a fractional or float-written budget there is
    /// refused, not rounded; digits beyond u64 are echoed as written.
    #[test]
    fn large_budgets_are_read_exactly_or_refused() {
        for inexact in [
            "9007199254740991.5",
            "4503599627370496.5",
            "4.5035996273704965e15",
        ] {
            let e = inexact.parse::<Budget>().unwrap_err().to_string();
            assert!(e.contains("digits only"), "{e}");
        }
        for (exact, bytes) in [
            ("8e15", 8_000_000_000_000_000),
            ("9007199254740992.0", 1 << 53),
        ] {
            assert_eq!(
                exact.parse::<Budget>().unwrap(),
                Budget::Bytes(bytes),
                "{exact}"
            );
        }
        for too_large in ["1e16", "9007199254740993.0"] {
            let e = too_large.parse::<Budget>().unwrap_err().to_string();
            assert!(e.contains("at most 2^53"), "{too_large}: {e}");
        }
        assert_eq!("1e3B".parse::<Budget>().unwrap(), Budget::Bytes(1000));
        assert_eq!(
            "1.5e3 MB".parse::<Budget>().unwrap(),
            Budget::Bytes(1_500_000_000)
        );
        let e = "18446744073709551616"
            .parse::<Budget>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("got 18446744073709551616"), "{e}");
        assert_eq!(
            "9007199254740992".parse::<Budget>().unwrap(),
            Budget::Bytes(1 << 53)
        );
    }

    #[test]
    fn resolves_against_the_checkpoint_all_peak() {
        let g = crate::graph::generate::linear(4);
        let peak = checkpoint_all_peak(&g);
        assert_eq!(Budget::OfPeak(1.0).resolve(&g), Ok(peak));
        assert_eq!(Budget::OfPeak(0.5).resolve(&g), Ok(peak / 2));
        assert_eq!(Budget::Bytes(17).resolve(&g), Ok(17));
        let e = Budget::OfPeak(1e306).resolve(&g).unwrap_err();
        assert!(e.to_string().contains("at most 2^53"), "{e}");
        assert!(Budget::Bytes(u64::MAX).resolve(&g).is_err());
    }

    #[test]
    fn rejects_bad_strings_with_the_input_named() {
        for bad in [
            "",
            "abc",
            "12 parsecs",
            "-5",
            "0%",
            "x%",
            "1e999",
            "1e308%x",
            "9PiB",
        ] {
            let e = bad.parse::<Budget>().unwrap_err();
            assert!(e.to_string().contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn fractional_bytes_are_refused_with_a_hint() {
        let e = "0.7".parse::<Budget>().unwrap_err().to_string();
        assert!(
            e.contains("0.7 is not a byte count") && e.contains("write 70%"),
            "{e}"
        );
        let e = "2.5".parse::<Budget>().unwrap_err().to_string();
        assert!(e.contains("not a whole number of bytes"), "{e}");
        assert_eq!("1.5KiB".parse::<Budget>().unwrap(), Budget::Bytes(1536));
        assert!("9007199254740993".parse::<Budget>().is_err());
        assert!("18446744073709551615".parse::<Budget>().is_err());
        let json = |t: &str| serde_json::from_str::<Budget>(t).map_err(|e| e.to_string());
        assert!(json("0.7").unwrap_err().contains("write 70%"));
        assert_eq!(json("1e9"), Ok(Budget::Bytes(1_000_000_000)));
        assert!(json("1.8e19").unwrap_err().contains("at most 2^53"));
        assert!(json("18446744073709551615").is_err());
        // Not a number nor a string: what a budget is, not serde's words.
        for t in ["true", "[8]", "{}", "null"] {
            let e = json(t).unwrap_err();
            assert!(
                e.contains("expected a budget: a number of bytes"),
                "{t}: {e}"
            );
        }
        assert!(json("-8").unwrap_err().contains("must be >= 0, got -8"));
        assert_eq!(json("\"80%\""), Ok(Budget::OfPeak(0.8)));
    }

    #[test]
    fn human_bytes_rounds() {
        assert_eq!(human_bytes(17), "17 B");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(25 << 19), "12.5 MiB");
        assert_eq!(human_bytes_in(512.0 * 1024.0, 2.0 * 1048576.0), "0.5 MiB");
        assert_eq!(significant(12.345), "12.35");
        assert_eq!(significant(1234.4), "1234");
    }
}
