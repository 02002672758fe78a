//! The capacity finder (`msgstorm find`): the search over one scenario key ([`search`]),
//! one row per step computed from the step's artifact over its steady window ([`step`]),
//! the answer in words, and the `find.json` file that `msgstorm report` renders ([`text`]).
//!
//! Everything here is a pure function of artifacts; `src/cli/find.rs` runs the steps.

pub mod ladder;
pub mod search;
pub mod step;
pub mod text;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use search::{Precision, Search};
pub use step::Step;

/// Version of the `find.json` format; bumped on any incompatible change.
pub const FIND_SCHEMA_VERSION: u32 = 1;

/// The value of `kind` in every `find.json`: how `report` tells it from a `result.json`.
pub const FIND_KIND: &str = "find";

/// A whole search: what was varied, every step, and the answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FindResult {
    /// Always [`FIND_KIND`].
    pub kind: String,
    /// Format version ([`FIND_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// `msgstorm <version>` that wrote it.
    pub tool: String,
    /// Scenario name.
    pub scenario: String,
    /// Target of the steps as reports show it.
    pub target: String,
    /// The scenario key that was varied, e.g. `traffic[0].rate`.
    pub vary: String,
    /// First value tried.
    pub from: f64,
    /// Highest value the climb may reach.
    pub to: f64,
    /// How close the highest pass and the first fail had to come.
    pub precision: Precision,
    /// Seconds of traffic at the start of every step left out of its numbers.
    pub warmup_s: f64,
    /// The steps in the order they ran.
    pub steps: Vec<Step>,
    /// What the search found.
    pub answer: Answer,
    /// Remarks (how the target was shared between steps, why the search stopped).
    pub notes: Vec<String>,
}

/// The answer of a search.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The highest value that passed (`None`: even the first step failed).
    pub highest_pass: Option<f64>,
    /// The lowest value that failed (`None`: none failed up to `to`).
    pub first_fail: Option<f64>,
    /// The checks that failed at `first_fail`.
    pub failed_checks: Vec<String>,
    /// True when the generator, not the target, was the limit at `first_fail`: then the
    /// target holds at least `highest_pass`, and how much more is unknown.
    pub generator_limited: bool,
    /// The answer in words.
    pub words: String,
}

impl Answer {
    /// The answer of a finished `search` over `key`, given its `steps`.
    pub fn of(key: &str, search: &Search, steps: &[Step], to: f64) -> Answer {
        let (pass, fail) = (search.highest_pass(), search.first_fail());
        let at_fail = fail.and_then(|f| steps.iter().find(|s| s.value == f));
        let failed_checks = at_fail.map(|s| s.failed.clone()).unwrap_or_default();
        let limit = at_fail.and_then(|s| s.generator_limit.clone());
        let failed = failed_checks.join("; ");
        let words = match (pass, fail, &limit) {
            (None, Some(f), _) => {
                format!(
                    "no answer: even the first step ({key} = {}) failed: {failed}",
                    num(f)
                )
            }
            (None, None, _) => "no answer: no step ran to its end".to_owned(),
            (Some(p), None, _) if p >= to => format!(
                "at least {}: {key} = {} passed, the highest value the search was allowed \
                 (--to); search again with a higher --to",
                num(p),
                num(p)
            ),
            (Some(p), None, _) => format!(
                "at least {}: the search stopped (step limit) before any step failed",
                num(p)
            ),
            (Some(p), Some(f), Some(why)) => format!(
                "at least {}: at {key} = {} the generator was the limit ({why}), so that \
                 failure says nothing about the target; add generator processes (`msgstorm \
                 run --shards N`, or more machines) and search again from {}",
                num(p),
                num(f),
                num(p)
            ),
            (Some(p), Some(f), None) => format!(
                "{key} = {} is the highest passing value; at {} {failed}",
                num(p),
                num(f)
            ),
        };
        Answer {
            highest_pass: pass,
            first_fail: fail,
            failed_checks,
            generator_limited: limit.is_some(),
            words,
        }
    }

    /// True when some value passed: the answer `find` exits 0 with.
    pub fn found(&self) -> bool {
        self.highest_pass.is_some()
    }
}

pub use crate::vocab::num;

impl FindResult {
    /// Writes `find.json` into `dir` and returns its path.
    pub fn write(&self, dir: &Path) -> Result<std::path::PathBuf> {
        let path = dir.join("find.json");
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Other(format!("cannot encode find.json: {e}")))?;
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }

    /// Reads the file at `path` as a `find.json`; `Ok(None)` when it is another kind of
    /// file (a `result.json`), an error when it is a `find.json` that cannot be read.
    pub fn read_if_find(path: &Path) -> Result<Option<FindResult>> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        #[derive(Deserialize)]
        struct Kind {
            kind: Option<String>,
        }
        match serde_json::from_slice::<Kind>(&text) {
            Ok(Kind { kind: Some(k) }) if k == FIND_KIND => {}
            _ => return Ok(None),
        }
        let found: FindResult = serde_json::from_slice(&text).map_err(|e| {
            Error::Usage(format!("{}: not a readable find.json: {e}", path.display()))
        })?;
        if found.schema_version != FIND_SCHEMA_VERSION {
            return Err(Error::Usage(format!(
                "{}: schema_version {} is not {FIND_SCHEMA_VERSION}, the version this msgstorm reads",
                path.display(),
                found.schema_version
            )));
        }
        Ok(Some(found))
    }
}

#[cfg(test)]
mod tests {
    use super::step::StepRow;
    use super::*;

    fn step(value: f64, passed: bool, generator_limit: Option<&str>) -> Step {
        Step {
            value,
            passed,
            failed: if passed {
                Vec::new()
            } else {
                vec!["checks.e2e_p99 failed: 80.0 ms > 50.0 ms".to_owned()]
            },
            generator_limit: generator_limit.map(str::to_owned),
            row: StepRow::default(),
            result: String::new(),
        }
    }

    fn searched(steps: &[Step]) -> Search {
        let mut s = Search::new(100.0, 1000.0, true, Precision::Absolute(1.0));
        for st in steps {
            s.record(st.value, st.passed);
        }
        s
    }

    #[test]
    fn a_generator_limited_failure_gives_at_least_and_the_advice() {
        let steps = [
            step(100.0, true, None),
            step(200.0, false, Some("it sent late: send lag p99 40.0 ms")),
        ];
        let a = Answer::of("traffic[0].rate", &searched(&steps), &steps, 1000.0);
        assert!(a.generator_limited && a.found());
        assert!(
            a.words
                .starts_with("at least 100: at traffic[0].rate = 200 the generator was the limit"),
            "{}",
            a.words
        );
        assert!(a.words.contains("--shards"), "{}", a.words);
    }

    #[test]
    fn a_target_failure_names_the_value_and_the_check() {
        let steps = [step(100.0, true, None), step(200.0, false, None)];
        let a = Answer::of("population.users", &searched(&steps), &steps, 1000.0);
        assert!(!a.generator_limited);
        assert_eq!(
            a.words,
            "population.users = 100 is the highest passing value; at 200 checks.e2e_p99 failed: 80.0 ms > 50.0 ms"
        );
    }
}
