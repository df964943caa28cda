//! The solver options a caller may set, and the one validator that turns them into
//! `SolveOptions` for the command line and the service alike.
//!
//! The ranges (each message states its option's):
//! - a time limit: seconds in `(0, MAX_SECONDS]` (10^6 s, about 11.6 days; the same range
//!   as every other duration the program reads, such as `remat serve --grace`, see
//!   [`seconds`]);
//! - a MIP gap: a finite number `>= 0`;
//! - threads: `1..=MAX_THREADS` (1024);
//! - `auto`'s effort: a multiple of its default work in `(0, MAX_EFFORT]`, or `time`
//!   ([`parse_effort`]).
//!
//! An [`InvalidOption`] says which option and value; each shell names the option its own
//! way ([`OptionName::flag`] on the command line, [`OptionName::field`] in a request body).

use crate::graph::load::compact;
use crate::solve::{Effort, SolveOptions};
use std::fmt;
use std::time::Duration;

/// The longest duration the program accepts, in seconds (10^6 s, about 11.6 days): time
/// limits, and the service's grace period and job lifetime.
pub const MAX_SECONDS: f64 = 1e6;

/// The most threads one solve may use.
pub const MAX_THREADS: u32 = 1024;

/// The largest multiple of `auto`'s default work one solve may ask for.
pub const MAX_EFFORT: f64 = 1e4;

/// `auto`'s effort as a caller writes it: a multiple of its default work (`2`, `0.5`:
/// deterministic), or `time` (spend the time limit; not reproducible). The range is
/// checked by [`OptionsInput::validate`].
pub fn parse_effort(text: &str) -> Result<Effort, String> {
    match text.trim() {
        "time" => Ok(Effort::Time),
        t => t.parse::<f64>().map(Effort::Work).map_err(|_| {
            format!("expected a multiple of the default work (1, 0.5, 4) or 'time', got '{text}'")
        }),
    }
}

/// A flag's number of seconds within [`seconds`]' range, so that every duration built from
/// it (deadlines, the grace period, job lifetimes, a probe's timeout) is representable.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of seconds, got '{s}'"))?;
    seconds(v).map(|_| v)
}

/// A duration in seconds within `(0, MAX_SECONDS]`, or why not (the range, for messages).
pub fn seconds(value: f64) -> Result<Duration, String> {
    if value > 0.0 && value <= MAX_SECONDS {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(format!(
            "must be a number of seconds greater than 0 and at most {MAX_SECONDS:e}, got {}",
            compact(value)
        ))
    }
}

/// The options as the caller wrote them, before validation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OptionsInput {
    /// Wall-clock limit in seconds.
    pub time_limit_s: Option<f64>,
    /// Relative MIP gap at which a MILP may stop.
    pub mip_gap: Option<f64>,
    /// Seed for randomised steps.
    pub seed: u64,
    /// Threads a solver may use.
    pub threads: Option<u32>,
    /// Bytes one solve may use for its model (`super::memory`).
    pub memory_limit: Option<u64>,
    /// `auto`'s effort (default: its default work, deterministic).
    pub effort: Option<Effort>,
}

/// An option that has a value to validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionName {
    TimeLimit,
    MipGap,
    Threads,
    Effort,
}

impl OptionName {
    /// The command-line flag: `--time-limit`, `--mip-gap`.
    pub fn flag(self) -> &'static str {
        match self {
            OptionName::TimeLimit => "--time-limit",
            OptionName::MipGap => "--mip-gap",
            OptionName::Threads => "--threads",
            OptionName::Effort => "--effort",
        }
    }

    /// The request field: `time_limit_s`, `mip_gap`.
    pub fn field(self) -> &'static str {
        match self {
            OptionName::TimeLimit => "time_limit_s",
            OptionName::MipGap => "mip_gap",
            OptionName::Threads => "threads",
            OptionName::Effort => "effort",
        }
    }
}

/// An option whose value is out of range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InvalidOption {
    pub option: OptionName,
    pub value: f64,
}

impl InvalidOption {
    /// What is wrong, naming the option as `name` (a flag or a field).
    pub fn message(&self, name: &str) -> String {
        let value = self.value;
        match self.option {
            OptionName::TimeLimit => {
                format!("{name} {}", seconds(value).expect_err("an invalid option"))
            }
            OptionName::MipGap => {
                format!(
                    "{name} must be a finite number >= 0, got {}",
                    compact(value)
                )
            }
            OptionName::Threads => {
                format!(
                    "{name} must be an integer from 1 to {MAX_THREADS}, got {}",
                    compact(value)
                )
            }
            OptionName::Effort => format!(
                "{name} must be 'time' or a number greater than 0 and at most {MAX_EFFORT:e}, \
                 got {}",
                compact(value)
            ),
        }
    }
}

/// Names the option by its command-line flag.
impl fmt::Display for InvalidOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(self.option.flag()))
    }
}

impl std::error::Error for InvalidOption {}

impl OptionsInput {
    /// Checks every option and builds the `SolveOptions` (no cancel flag raised, no
    /// progress sink: the caller adds its own).
    pub fn validate(self) -> Result<SolveOptions, InvalidOption> {
        let time_limit = match self.time_limit_s.map(seconds).transpose() {
            Ok(t) => t,
            Err(_) => {
                return Err(InvalidOption {
                    option: OptionName::TimeLimit,
                    value: self.time_limit_s.unwrap_or_default(),
                })
            }
        };
        if let Some(g) = self.mip_gap.filter(|g| !(g.is_finite() && *g >= 0.0)) {
            return Err(InvalidOption {
                option: OptionName::MipGap,
                value: g,
            });
        }
        if let Some(t) = self.threads.filter(|t| !(1..=MAX_THREADS).contains(t)) {
            return Err(InvalidOption {
                option: OptionName::Threads,
                value: t.into(),
            });
        }
        if let Some(Effort::Work(e)) = self.effort {
            if !(e > 0.0 && e <= MAX_EFFORT) {
                return Err(InvalidOption {
                    option: OptionName::Effort,
                    value: e,
                });
            }
        }
        Ok(SolveOptions {
            time_limit,
            mip_gap: self.mip_gap,
            seed: self.seed,
            threads: self.threads,
            memory_limit: self.memory_limit,
            effort: self.effort.unwrap_or_default(),
            ..SolveOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_named_as_each_shell_spells_them() {
        for (input, option, value) in [
            (
                OptionsInput {
                    time_limit_s: Some(0.0),
                    ..OptionsInput::default()
                },
                OptionName::TimeLimit,
                "0",
            ),
            (
                OptionsInput {
                    mip_gap: Some(-1.0),
                    ..OptionsInput::default()
                },
                OptionName::MipGap,
                "-1",
            ),
            (
                OptionsInput {
                    mip_gap: Some(f64::NAN),
                    ..OptionsInput::default()
                },
                OptionName::MipGap,
                "NaN",
            ),
            (
                OptionsInput {
                    mip_gap: Some(f64::INFINITY),
                    ..OptionsInput::default()
                },
                OptionName::MipGap,
                "inf",
            ),
            (
                OptionsInput {
                    time_limit_s: Some(1e19),
                    ..OptionsInput::default()
                },
                OptionName::TimeLimit,
                "1e19",
            ),
            (
                OptionsInput {
                    threads: Some(4_000_000_000),
                    ..OptionsInput::default()
                },
                OptionName::Threads,
                "4000000000",
            ),
            (
                OptionsInput {
                    effort: Some(Effort::Work(0.0)),
                    ..OptionsInput::default()
                },
                OptionName::Effort,
                "0",
            ),
            (
                OptionsInput {
                    effort: Some(Effort::Work(f64::NAN)),
                    ..OptionsInput::default()
                },
                OptionName::Effort,
                "NaN",
            ),
        ] {
            let Err(e) = input.validate() else {
                panic!("{input:?} passed")
            };
            assert_eq!(e.option, option);
            assert!(e.to_string().starts_with(option.flag()), "{e}");
            assert!(e.to_string().ends_with(&format!("got {value}")), "{e}");
            assert!(e.message(option.field()).starts_with(option.field()));
        }
    }

    #[test]
    fn good_values_pass_through() {
        let o = OptionsInput {
            time_limit_s: Some(1.5),
            mip_gap: Some(0.0),
            seed: 7,
            threads: Some(2),
            memory_limit: Some(1 << 30),
            effort: Some(Effort::Time),
        }
        .validate()
        .unwrap();
        assert_eq!(o.time_limit, Some(Duration::from_millis(1500)));
        assert_eq!((o.mip_gap, o.seed, o.threads), (Some(0.0), 7, Some(2)));
        assert_eq!(o.memory_limit, Some(1 << 30));
        assert_eq!(o.effort, Effort::Time);
        let default = OptionsInput::default().validate().unwrap();
        assert_eq!(default.effort, Effort::Work(1.0));
    }

    #[test]
    fn effort_reads_a_multiple_or_time() {
        assert_eq!(parse_effort("time"), Ok(Effort::Time));
        assert_eq!(parse_effort(" 2.5"), Ok(Effort::Work(2.5)));
        let e = parse_effort("fast").unwrap_err();
        assert!(e.contains("'fast'"), "{e}");
    }
}
