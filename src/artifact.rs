//! The versioned result file (`result.json`): write, read, and merge shard results exactly.
//!
//! The artifact is the seam between running and reporting: `report` (later `compare`) and shard
//! merging are pure functions of artifacts. Its fields are documented in `docs/result.md`
//! and its JSON schema is `schema/result.schema.json`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::chaos::StepRecord;
use crate::error::{Error, Result};
use crate::ledger::signals::{SignalBook, SignalRow};
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::monitor::ProcUsage;
use crate::scenario::{Bound, Check, Plan, TrafficShape};
use crate::scrape::ScrapedSeries;
pub use crate::vocab::CheckMetric;
use crate::vocab::{SignalKind, UserIx};

/// Version of the result file format; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// One run's (or several merged shards') complete result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// Format version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// `msgstorm <version>` that wrote it.
    pub tool: String,
    /// The run id shared by all shards (hex).
    pub run_id: String,
    /// Scenario name.
    pub scenario: String,
    /// Target URL, or `embedded` for the in-process reference server.
    pub target: String,
    /// Driver name.
    pub driver: String,
    /// Whether sends had a server acceptance (false: send→ack latency is not measured).
    pub acceptance: bool,
    /// The delivery checks (`lost`, `duplicated`, `reordered`) the driver's protocol does
    /// not promise with the run's options (MQTT QoS 0: lost and reordered; QoS 1:
    /// duplicated): they are not built in (a scenario may still write them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpromised: Vec<CheckMetric>,
    /// Start of the run, RFC 3339 UTC.
    pub started_at: String,
    /// Start of the run, µs since the Unix epoch.
    pub started_unix_us: u64,
    /// Length of the run (longest shard), seconds.
    pub duration_s: f64,
    /// When traffic started, seconds from the start (`null` when it never did).
    pub traffic_started_s: Option<f64>,
    /// When the traffic was planned to end, seconds from the start (absent when it never
    /// started, a pattern ran until its counts were done, or in files of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_ended_s: Option<f64>,
    /// True when a signal stopped the run (or any shard) early.
    pub interrupted: bool,
    /// One entry per generator process.
    pub shards: Vec<ShardResult>,
    /// The scenario's checks, re-evaluated by `msgstorm report`.
    pub checks: Vec<CheckSpec>,
    /// The first request/response pattern, when the scenario had one (kept for readers of
    /// earlier versions; [`Artifact::request_sweeps`] has them all).
    pub request_sweep: Option<RequestSweep>,
    /// Every request/response pattern, in scenario order (absent from files of earlier
    /// versions, which kept only the first, in `request_sweep`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_sweeps: Vec<RequestSweep>,
    /// Histograms, counters, per-second series, errors.
    pub metrics: Metrics,
    /// Delivery accounting.
    pub ledger: Ledger,
    /// Remarks the report must show (what bounded the run, caveats).
    pub notes: Vec<String>,
    /// CPU and memory of the generator and of the watched target processes.
    #[serde(default)]
    pub processes: Vec<ProcUsage>,
    /// The scenario as run: its text and the `--set` overrides (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario_source: Option<ScenarioSource>,
    /// Series scraped from the `[monitor] prometheus` endpoints, once a second.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<ScrapedSeries>,
    /// What each `[[chaos]]` step did, in plan order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chaos: Vec<StepRecord>,
    /// The shape the plan's population offered (sessions, contacts, groups), when it has
    /// one; absent otherwise and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population: Option<crate::vocab::Offered>,
    /// Read receipts, typing and presence, when the scenario asked for any; absent
    /// otherwise and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<SignalRecord>,
}

/// What a run's users signalled besides messages, and what verifying it needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SignalRecord {
    /// The kinds the scenario asked for, in [`SignalKind::ALL`]'s order.
    pub asked: Vec<SignalKind>,
    /// How long a recipient must stay online after a typing notice or presence change to
    /// be owed it, µs.
    pub within_us: u64,
    /// The contact graph presence goes to, as drawn: (mean, exponent, users, seed).
    pub contacts: Option<(f64, f64, u32, u64)>,
    /// The members of each group a typing notice went to: (the run's group number,
    /// members ascending).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<(u32, Vec<UserIx>)>,
    /// Sent, published and arrived signals.
    pub book: SignalBook,
}

impl SignalRecord {
    /// The record of a plan's `[signals]` with `book` (`None` without signals).
    pub fn of(plan: &Plan, book: SignalBook) -> Option<SignalRecord> {
        let s = plan.signals.as_ref()?;
        let asks = s.asks();
        let asked = SignalKind::ALL
            .into_iter()
            .filter(|k| match k {
                SignalKind::Read => asks.receipts,
                SignalKind::Typing => asks.typing,
                SignalKind::Presence => asks.presence,
            })
            .collect();
        let contacts = plan.population.contacts.as_ref().map(|c| {
            let (model, seed) = c.recipe();
            (model.mean, model.exponent, c.users(), seed)
        });
        let typed = book.groups_typed();
        let groups = plan
            .groups()
            .zip(0u32..)
            .filter(|(_, ix)| typed.binary_search(ix).is_ok())
            .map(|(g, ix)| (ix, g.members.clone()))
            .collect();
        Some(SignalRecord {
            asked,
            within_us: s.within.as_micros() as u64,
            contacts,
            groups,
            book,
        })
    }

    /// What happened to each kind asked for (draws the contact graph again for presence).
    pub fn summary(&self) -> Vec<SignalRow> {
        let graph = match (self.contacts, self.asked.contains(&SignalKind::Presence)) {
            (Some((mean, exponent, users, seed)), true) => {
                Some(crate::scenario::plan::resolve_contacts(
                    crate::scenario::plan::ContactModel { mean, exponent },
                    users,
                    seed,
                ))
            }
            _ => None,
        };
        let contacts = |u: UserIx| graph.as_ref().map_or_else(Vec::new, |g| g.of(u).to_vec());
        let members = |g: u32| {
            self.groups
                .binary_search_by_key(&g, |m| m.0)
                .map_or_else(|_| Vec::new(), |i| self.groups[i].1.clone())
        };
        let all = self.book.summary(self.within_us, &contacts, &members);
        self.asked
            .iter()
            .map(|&kind| SignalRow {
                kind,
                delivery: all[kind as usize],
            })
            .collect()
    }
}

/// The scenario as run, for the report to show.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSource {
    /// The scenario file, or `(built-in default)`.
    pub file: String,
    /// Its text.
    pub text: String,
    /// The `--set KEY=VALUE` overrides, in order.
    pub overrides: Vec<String>,
}

/// What one generator process did and used.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ShardResult {
    /// Shard index.
    pub index: u32,
    /// Shard count.
    pub count: u32,
    /// Users this process simulated.
    pub users: u32,
    /// Length of its run, seconds.
    pub duration_s: f64,
    /// CPU seconds it used.
    pub cpu_s: f64,
    /// Cores it could use.
    pub cores: u32,
    /// Its peak resident memory, bytes.
    pub peak_rss_bytes: u64,
    /// Its open-file limit.
    pub fd_limit: u64,
    /// Its clock's offset to the run's reference clock (shard 0's), when the shards met
    /// over the network (`--start-barrier tcp://…`); absent when they shared a host or a
    /// folder, or in files written before clock offsets existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSync>,
}

/// A shard's clock offset to the run's reference clock, measured before traffic and
/// after it. Its times (send due times, receive times, the run's start) are on the
/// reference clock, corrected by the offset measured before traffic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClockSync {
    /// The reference, e.g. `shard 0 at msgstorm-0.msgstorm:7400`.
    pub reference: String,
    /// How far its clock was ahead of the reference before traffic, µs.
    pub offset_us: i64,
    /// That offset is known to ± this, µs (half the best exchange's round trip).
    pub uncertainty_us: u64,
    /// The offset measured again at the end (`null` when the reference was gone).
    pub end_offset_us: Option<i64>,
    /// Its uncertainty.
    pub end_uncertainty_us: Option<u64>,
}

impl ClockSync {
    /// How far off this shard's corrected times may be from the reference, µs: the larger
    /// uncertainty of both estimates plus the drift between them (times are corrected by
    /// the first). `None` when there was no final estimate: the drift is unknown.
    pub fn bound_us(&self) -> Option<u64> {
        let end = self.end_offset_us?;
        let unc = self
            .uncertainty_us
            .max(self.end_uncertainty_us.unwrap_or(self.uncertainty_us));
        Some(unc + end.abs_diff(self.offset_us))
    }
}

/// A check in serializable form: `{"key": …, "metric": "lost", "op": "<=", "value": 0}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// Scenario key, e.g. `checks.max_lost`.
    pub key: String,
    /// What is measured.
    pub metric: CheckMetric,
    /// How the measured value must compare with `value`.
    pub op: Op,
    /// The bound (µs for latencies, a ratio for rates, a count otherwise).
    pub value: f64,
}

/// The comparison of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Passes when the measured value is ≤ the bound.
    #[serde(rename = "<=")]
    AtMost,
    /// Passes when the measured value is ≥ the bound.
    #[serde(rename = ">=")]
    AtLeast,
}

impl Op {
    /// `<=` or `>=`.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::AtMost => "<=",
            Op::AtLeast => ">=",
        }
    }

    /// Whether `value` satisfies `bound`.
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::AtMost => value <= bound,
            Op::AtLeast => value >= bound,
        }
    }
}

/// The request/response sweep: steps of fixed concurrency, in order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RequestSweep {
    /// The traffic pattern's name (empty in files of earlier versions).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `time` or `kv_get`.
    pub kind: String,
    /// Concurrency of each step.
    pub steps: Vec<u32>,
    /// Length of each step, seconds.
    pub step_s: f64,
    /// Start of the first step, seconds after traffic start.
    pub start_s: f64,
}

impl From<&Check> for CheckSpec {
    fn from(c: &Check) -> Self {
        let (op, value) = match c.bound {
            Bound::AtMost(v) => (Op::AtMost, v),
            Bound::AtLeast(v) => (Op::AtLeast, v),
        };
        CheckSpec {
            key: c.key.clone(),
            metric: c.metric,
            op,
            value,
        }
    }
}

/// The parts of a finished run that are not in the plan.
#[derive(Debug)]
pub struct RunFacts {
    /// Run id.
    pub run_id: u32,
    /// Target as shown in reports.
    pub target: String,
    /// Whether the driver reports acceptance.
    pub acceptance: bool,
    /// The delivery checks the driver's protocol does not promise.
    pub unpromised: Vec<CheckMetric>,
    /// Start, µs since the Unix epoch.
    pub started_unix_us: u64,
    /// Length of the run.
    pub duration: Duration,
    /// Traffic start, from the start of the run.
    pub traffic_started: Option<Duration>,
    /// Interrupted by a signal.
    pub interrupted: bool,
    /// This process's resource use.
    pub shard: ShardResult,
    /// Remarks for the report.
    pub notes: Vec<String>,
    /// What the monitor saw.
    pub processes: Vec<ProcUsage>,
    /// The scenario as run.
    pub scenario_source: Option<ScenarioSource>,
    /// What the Prometheus endpoints said.
    pub server_metrics: Vec<ScrapedSeries>,
    /// What the chaos steps did.
    pub chaos: Vec<StepRecord>,
    /// The shape the plan's population offered, if it has one (the first shard's).
    pub population: Option<crate::vocab::Offered>,
    /// What the users signalled, when the scenario asked for signals.
    pub signals: Option<SignalRecord>,
}

impl Artifact {
    /// Assembles the artifact of one process's run.
    pub fn new(plan: &Plan, facts: RunFacts, metrics: Metrics, ledger: Ledger) -> Self {
        let request_sweeps: Vec<RequestSweep> = plan
            .traffic
            .iter()
            .filter_map(|t| match &t.kind {
                TrafficShape::Request(r) => Some(RequestSweep {
                    name: t.name.clone(),
                    kind: r.request.to_owned(),
                    steps: r.steps.clone(),
                    step_s: r.step_duration.as_secs_f64(),
                    start_s: t.start.as_secs_f64(),
                }),
                _ => None,
            })
            .collect();
        let started = UNIX_EPOCH + Duration::from_micros(facts.started_unix_us);
        Artifact {
            schema_version: SCHEMA_VERSION,
            tool: format!("msgstorm {}", env!("CARGO_PKG_VERSION")),
            run_id: format!("{:08x}", facts.run_id),
            scenario: plan.name.clone(),
            target: facts.target,
            driver: plan.target.driver.name.to_owned(),
            acceptance: facts.acceptance,
            unpromised: facts.unpromised,
            started_at: humantime::format_rfc3339_seconds(started).to_string(),
            started_unix_us: facts.started_unix_us,
            duration_s: facts.duration.as_secs_f64(),
            traffic_started_s: facts.traffic_started.map(|d| d.as_secs_f64()),
            traffic_ended_s: facts
                .traffic_started
                .zip(traffic_len(plan))
                .map(|(t, len)| (t + len).as_secs_f64().min(facts.duration.as_secs_f64())),
            interrupted: facts.interrupted,
            shards: vec![facts.shard],
            checks: plan.checks.iter().map(CheckSpec::from).collect(),
            request_sweep: request_sweeps.first().cloned(),
            request_sweeps,
            metrics,
            ledger,
            notes: facts.notes,
            processes: facts.processes,
            scenario_source: facts.scenario_source,
            server_metrics: facts.server_metrics,
            chaos: facts.chaos,
            population: facts.population,
            signals: facts.signals,
        }
    }

    /// Merges another shard's result of the same run into this one, exactly: the result is
    /// what one process running both shards would have recorded. Refused, with the reason,
    /// when `other` is not of the same run ([`Artifact::mismatch`]) or holds a shard this one
    /// already has: a shard merged twice would count its messages twice.
    pub fn merge(&mut self, other: &Artifact) -> std::result::Result<(), String> {
        if let Some(why) = self.mismatch(other) {
            return Err(why);
        }
        if let Some(s) = other
            .shards
            .iter()
            .find(|s| self.shards.iter().any(|t| t.index == s.index))
        {
            return Err(format!(
                "shard {}/{} of run {} is already merged: the same shard twice",
                s.index, s.count, self.run_id
            ));
        }
        self.duration_s = self.duration_s.max(other.duration_s);
        self.started_unix_us = self.started_unix_us.min(other.started_unix_us);
        self.started_at = humantime::format_rfc3339_seconds(
            UNIX_EPOCH + Duration::from_micros(self.started_unix_us),
        )
        .to_string();
        self.traffic_started_s = match (self.traffic_started_s, other.traffic_started_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.traffic_ended_s = match (self.traffic_ended_s, other.traffic_ended_s) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.interrupted |= other.interrupted;
        self.shards.extend(other.shards.iter().cloned());
        self.shards.sort_by_key(|s| s.index);
        // Sorted, so merging in any order gives the same file.
        self.notes.extend(other.notes.iter().cloned());
        self.notes.sort();
        self.notes.dedup();
        self.processes.extend(other.processes.iter().cloned());
        self.processes
            .sort_by_key(|p| (p.shard, !p.generator, p.pid));
        self.metrics.merge(&other.metrics);
        self.ledger.merge(&other.ledger);
        if self.scenario_source.is_none() {
            self.scenario_source.clone_from(&other.scenario_source);
        }
        if self.population.is_none() {
            self.population.clone_from(&other.population);
        }
        match (&mut self.signals, &other.signals) {
            (Some(mine), Some(theirs)) => mine.book.merge(&theirs.book),
            (None, Some(theirs)) => self.signals = Some(theirs.clone()),
            _ => {}
        }
        // Every shard may scrape the same endpoints: the first shard's series of each stays.
        for s in &other.server_metrics {
            if !self.server_metrics.iter().any(|t| t.same_series(s)) {
                self.server_metrics.push(s.clone());
            }
        }
        crate::chaos::merge(&mut self.chaos, &other.chaos);
        Ok(())
    }

    /// Why `other` cannot be a shard of the same run as this one, if it cannot: another
    /// format version, run id, scenario, driver, shard count or set of checks.
    pub fn mismatch(&self, other: &Artifact) -> Option<String> {
        let differs = |what: &str, theirs: &dyn std::fmt::Display, ours: &dyn std::fmt::Display| {
            Some(format!(
                "{what} {theirs} is not {ours}: only shards of one run merge"
            ))
        };
        if other.schema_version != self.schema_version {
            return differs(
                "schema_version",
                &other.schema_version,
                &self.schema_version,
            );
        }
        if other.run_id != self.run_id {
            return differs("run", &other.run_id, &self.run_id);
        }
        if other.scenario != self.scenario {
            return differs("scenario", &other.scenario, &self.scenario);
        }
        if other.driver != self.driver {
            return differs("driver", &other.driver, &self.driver);
        }
        if other.shard_count() != self.shard_count() {
            return differs("shard count", &other.shard_count(), &self.shard_count());
        }
        if other.checks != self.checks {
            return Some(
                "its checks differ: only shards of one run (one scenario, the same --set) merge"
                    .to_owned(),
            );
        }
        None
    }

    /// The number of shards of the run (the largest `count` its shards state).
    pub fn shard_count(&self) -> u32 {
        self.shards.iter().map(|s| s.count).max().unwrap_or(1)
    }

    /// The shard indices of the run that this result lacks, in order.
    pub fn missing_shards(&self) -> Vec<u32> {
        (0..self.shard_count())
            .filter(|&i| !self.shards.iter().any(|s| s.index == i))
            .collect()
    }

    /// Writes `result.json` into `dir` (created if needed) and returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("result.json");
        let tmp = dir.join("result.json.tmp");
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Other(format!("cannot encode the result: {e}")))?;
        std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }

    /// Reads a result file. A file of another format version is refused with that reason
    /// rather than a confusing field error.
    pub fn read(path: &Path) -> Result<Artifact> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Artifact::from_slice(&text).map_err(|msg| Error::Artifact {
            path: path.to_owned(),
            msg,
        })
    }

    /// Parses the bytes of a result file, as [`Artifact::read`] does; the error says what
    /// is wrong with them.
    pub fn from_slice(text: &[u8]) -> std::result::Result<Artifact, String> {
        let wrong_version = |v: Option<u64>| {
            format!(
                "schema_version {} is not {SCHEMA_VERSION}: written by another msgstorm version",
                v.map_or("missing".to_owned(), |v| v.to_string())
            )
        };
        match serde_json::from_slice::<Artifact>(text) {
            Ok(a) if a.schema_version == SCHEMA_VERSION => match a.shards_problem() {
                Some(msg) => Err(msg),
                None => Ok(a),
            },
            Ok(a) => Err(wrong_version(Some(u64::from(a.schema_version)))),
            Err(e) => {
                // Only on failure: is it another version, or not a result at all?
                #[derive(Deserialize)]
                struct Version {
                    schema_version: Option<u64>,
                }
                match serde_json::from_slice::<Version>(text) {
                    Ok(v) if v.schema_version != Some(u64::from(SCHEMA_VERSION)) => {
                        Err(wrong_version(v.schema_version))
                    }
                    Ok(_) => Err(format!("not a msgstorm result: {e}")),
                    Err(_) => Err(format!("not JSON: {e}")),
                }
            }
        }
    }

    /// Reads several result files of one run and merges them into one. A file of another
    /// run, or one holding a shard an earlier file already gave, is refused with an error
    /// naming both files. Missing shards are not an error here: the report marks the
    /// result incomplete ([`Artifact::missing_shards`]).
    pub fn read_merged(paths: &[PathBuf]) -> Result<Artifact> {
        let (first, rest) = paths
            .split_first()
            .ok_or_else(|| Error::Usage("no result file given".to_owned()))?;
        let mut all = Artifact::read(first)?;
        // Which file each shard came from, to name it when a later file repeats it.
        let mut from: Vec<(u32, &PathBuf)> = all.shards.iter().map(|s| (s.index, first)).collect();
        for p in rest {
            let next = Artifact::read(p)?;
            let bad = |msg: String| Error::Artifact {
                path: p.clone(),
                msg,
            };
            if let Some(why) = all.mismatch(&next) {
                return Err(bad(format!("{why} (as in {})", first.display())));
            }
            for s in &next.shards {
                if let Some((_, earlier)) = from.iter().find(|(i, _)| *i == s.index) {
                    return Err(bad(format!(
                        "shard {}/{} of run {} is also in {}: the same shard given twice",
                        s.index,
                        s.count,
                        next.run_id,
                        earlier.display()
                    )));
                }
            }
            from.extend(next.shards.iter().map(|s| (s.index, p)));
            all.merge(&next).map_err(bad)?;
        }
        Ok(all)
    }

    /// Why the shards of this result are inconsistent, if they are: a count of zero, an
    /// index not below the count, counts that differ, or an index twice.
    fn shards_problem(&self) -> Option<String> {
        let count = self.shard_count();
        for (k, s) in self.shards.iter().enumerate() {
            if s.count != count || s.index >= s.count {
                return Some(format!(
                    "shards[{k}]: shard {}/{} does not fit a run of {count} shard(s)",
                    s.index, s.count
                ));
            }
            if self.shards[..k].iter().any(|t| t.index == s.index) {
                return Some(format!(
                    "shards[{k}]: shard {}/{} appears twice",
                    s.index, s.count
                ));
            }
        }
        None
    }
}

/// How long the plan's traffic lasts from its start, if every pattern has a duration.
fn traffic_len(plan: &Plan) -> Option<Duration> {
    plan.traffic
        .iter()
        .map(|t| t.duration.map(|d| t.start + d))
        .try_fold(Duration::ZERO, |end, e| e.map(|e| end.max(e)))
}

/// A new results folder name: `./msgstorm-results/<UTC timestamp>-<scenario>`.
pub fn default_out_dir(scenario: &str) -> PathBuf {
    let now = SystemTime::now();
    let stamp = humantime::format_rfc3339_seconds(now)
        .to_string()
        .replace(':', "")
        .trim_end_matches('Z')
        .to_owned();
    let safe: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("msgstorm-results").join(format!("{stamp}-{safe}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_specs_keep_their_json_strings() {
        for (metric, op) in [
            ("lost", "<="),
            ("duplicated", "<="),
            ("reordered", "<="),
            ("corrupted", "<="),
            ("late", "<="),
            ("e2e_p99_us", "<="),
            ("ack_p99_us", "<="),
            ("request_p99_us", "<="),
            ("login_success", ">="),
            ("send_error_rate", "<="),
        ] {
            let text =
                format!(r#"{{"key":"checks.x","metric":"{metric}","op":"{op}","value":1.5}}"#);
            let spec: CheckSpec = serde_json::from_str(&text).expect(&text);
            assert_eq!(serde_json::to_string(&spec).expect("encode"), text);
        }
        let bad = r#"{"key":"checks.x","metric":"lost","op":"<","value":0}"#;
        assert!(serde_json::from_str::<CheckSpec>(bad).is_err());
    }

    /// The report's fixture (a real run's result) as shard `index` of `count`.
    fn shard(index: u32, count: u32) -> Artifact {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report/testdata/result.json");
        let mut a = Artifact::read(&path).expect("the fixture reads");
        for s in &mut a.shards {
            (s.index, s.count) = (index, count);
        }
        for p in &mut a.processes {
            p.shard = index;
        }
        a
    }

    #[test]
    fn merge_refuses_a_shard_it_already_has() {
        let a = shard(0, 2);
        let mut m = a.clone();
        let err = m.merge(&a).expect_err("a shard merged with itself");
        assert!(err.contains("shard 0/2") && err.contains("twice"), "{err}");
        assert_eq!(m, a, "a refused merge changes nothing");
        // Also when it is already inside a merge of several.
        let mut both = shard(0, 2);
        both.merge(&shard(1, 2)).expect("shards 0 and 1 merge");
        assert_eq!(both.missing_shards(), Vec::<u32>::new());
        let err = both.merge(&shard(1, 2)).expect_err("shard 1 again");
        assert!(err.contains("shard 1/2"), "{err}");
    }

    #[test]
    fn merge_refuses_results_of_another_run() {
        let a = shard(0, 2);
        type Change = fn(&mut Artifact);
        let cases: [(&str, Change); 6] = [
            ("run 0000beef is not", |b| b.run_id = "0000beef".to_owned()),
            ("scenario other is not", |b| b.scenario = "other".to_owned()),
            ("driver mqtt is not", |b| b.driver = "mqtt".to_owned()),
            ("schema_version 2 is not 1", |b| b.schema_version = 2),
            ("its checks differ", |b| b.checks[0].value += 1.0),
            ("shard count 3 is not 2", |b| {
                b.shards[0].count = 3;
            }),
        ];
        for (expected, change) in cases {
            let mut b = shard(1, 2);
            change(&mut b);
            let err = a.clone().merge(&b).expect_err(expected);
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
        }
    }

    #[test]
    fn missing_shards_are_listed() {
        assert_eq!(shard(0, 2).missing_shards(), [1]);
        let mut m = shard(0, 3);
        m.merge(&shard(2, 3)).expect("shards 0 and 2 of 3 merge");
        assert_eq!(m.missing_shards(), [1]);
        assert_eq!(shard(0, 1).missing_shards(), Vec::<u32>::new());
    }

    #[test]
    fn read_merged_names_both_files() {
        let dir = std::env::temp_dir().join(format!("msgstorm-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let write = |name: &str, a: &Artifact| {
            let sub = dir.join(name);
            a.write(&sub).expect("write a result")
        };
        let a = write("a", &shard(0, 2));
        let b = write("b", &shard(1, 2));
        let mut other = shard(1, 2);
        other.run_id = "0000beef".to_owned();
        let c = write("c", &other);
        let merged = Artifact::read_merged(&[a.clone(), b.clone()]).expect("0/2 and 1/2");
        assert_eq!(merged.shards.len(), 2);
        let message = |paths: &[PathBuf]| {
            let e = Artifact::read_merged(paths).expect_err("refused");
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
            e.to_string()
        };
        let e = message(&[a.clone(), a.clone()]);
        assert_eq!(
            e,
            format!(
                "{}: shard 0/2 of run {} is also in {}: the same shard given twice",
                a.display(),
                merged.run_id,
                a.display()
            )
        );
        let e = message(&[a.clone(), b.clone(), b.clone()]);
        assert!(
            e.starts_with(&format!("{}: shard 1/2 ", b.display())),
            "{e}"
        );
        assert!(e.contains(&format!("also in {}", b.display())), "{e}");
        let e = message(&[a.clone(), c.clone()]);
        assert!(
            e.starts_with(&format!(
                "{}: run 0000beef is not {}",
                c.display(),
                merged.run_id
            )) && e.ends_with(&format!("(as in {})", a.display())),
            "{e}"
        );
        // One file whose own shards do not add up is refused when read.
        let mut twice = shard(0, 2);
        twice.shards.push(twice.shards[0].clone());
        let t = write("t", &twice);
        assert!(message(&[t]).contains("shards[1]: shard 0/2 appears twice"));
        let mut beyond = shard(0, 2);
        beyond.shards[0].index = 2;
        let x = write("x", &beyond);
        assert!(message(&[x]).contains("shards[0]: shard 2/2 does not fit a run of 2 shard(s)"));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn check_specs_follow_the_plan() {
        let check = Check {
            key: "checks.min_login_success".to_owned(),
            metric: CheckMetric::LoginSuccess,
            bound: Bound::AtLeast(0.99),
        };
        assert_eq!(
            CheckSpec::from(&check),
            CheckSpec {
                key: "checks.min_login_success".to_owned(),
                metric: CheckMetric::LoginSuccess,
                op: Op::AtLeast,
                value: 0.99,
            }
        );
    }
}
