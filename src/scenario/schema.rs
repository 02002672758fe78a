//! The scenario file as written: serde types that mirror the TOML keys one to one.
//!
//! Every table denies unknown keys, and every value that validation may complain about is
//! wrapped in [`Spanned`] so the complaint can name its line. Numbers are read as `i64` /
//! `f64` so that `-5` reaches validation and gets "must be > 0, got -5" rather than a
//! type error. `docs/scenario.md` documents each key.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::values::Dur;
use crate::vocab::TrafficKind;

/// An optional spanned value, the shape of almost every key.
pub type Opt<T> = Option<Spanned<T>>;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Shown in the report; defaults to the file stem.
    pub name: Opt<String>,
    /// Seed of every random choice.
    pub seed: Opt<i64>,
    /// Grace period for in-flight deliveries.
    pub drain: Opt<Dur>,
    /// The generator's wake tick (`"0s"`: none).
    pub wake_tick: Opt<Dur>,
    /// What to connect to (absent: the embedded reference server).
    pub target: Option<Spanned<TargetSpec>>,
    /// Who logs in and when.
    pub population: Spanned<PopulationSpec>,
    /// Traffic patterns.
    #[serde(default)]
    pub traffic: Vec<Spanned<TrafficSpec>>,
    /// Delivery verification.
    pub ledger: Option<LedgerSpec>,
    /// SLO checks.
    pub checks: Option<ChecksSpec>,
    /// Output settings.
    pub report: Option<ReportSpec>,
    /// Target processes to watch.
    pub monitor: Option<MonitorSpec>,
    /// How `msgstorm find` searches (`src/scenario/find.rs`).
    pub find: Option<Spanned<FindSpec>>,
    /// Fault steps during the load (`src/scenario/chaos.rs`).
    #[serde(default)]
    pub chaos: Vec<Spanned<ChaosSpec>>,
    /// Read receipts, typing and presence (`src/scenario/signals.rs`).
    pub signals: Option<Spanned<SignalsSpec>>,
}

/// `[signals]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalsSpec {
    /// Share of received messages read and receipted.
    pub receipts: Opt<f64>,
    /// How long after its arrival a message is read (a duration distribution).
    pub read_delay: Opt<toml::Value>,
    /// Share of sends (direct and group) preceded by a typing notice.
    pub typing: Opt<f64>,
    /// How long before its message a typing notice goes.
    pub typing_lead: Opt<Dur>,
    /// Presence published at every login and logout.
    pub presence: Opt<bool>,
    /// How long a recipient must stay online after a typing notice or a presence change
    /// to be owed it.
    pub within: Opt<Dur>,
    /// Shares for one `[[traffic]]` pattern's messages, by its name, in place of the run's.
    #[serde(default)]
    pub pattern: std::collections::BTreeMap<Spanned<String>, PatternSignalsSpec>,
}

/// `[signals.pattern.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternSignalsSpec {
    /// Share of the pattern's messages read and receipted.
    pub receipts: Opt<f64>,
    /// Share of the pattern's sends preceded by a typing notice.
    pub typing: Opt<f64>,
}

/// `[target]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// Server URL.
    pub url: Opt<String>,
    /// Protocol driver, by its registry name.
    pub driver: Opt<String>,
    /// Connect + handshake + login limit.
    pub connect_timeout: Opt<Dur>,
    /// Heartbeat interval; `0s` or absent for none.
    pub heartbeat: Opt<Dur>,
    /// Local addresses client sockets bind to, round-robin by user.
    #[serde(default)]
    pub source_addresses: Vec<Spanned<String>>,
    /// `[target.auth]`.
    pub auth: Option<Spanned<AuthSpec>>,
}

/// The keys of `[target]` besides the drivers' own tables (`[target.<driver>]`, taken out
/// of the tree before it is read into [`TargetSpec`] and checked by the driver).
pub const TARGET_KEYS: [&str; 6] = [
    "url",
    "driver",
    "connect_timeout",
    "heartbeat",
    "source_addresses",
    "auth",
];

/// `[target.auth]`: `secret`, or `username` + `password`, or empty for none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    /// Native token secret.
    pub secret: Opt<String>,
    /// Username template (`{user}` is replaced).
    pub username: Opt<String>,
    /// Password template (`{user}` is replaced).
    pub password: Opt<String>,
}

/// `[population]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopulationSpec {
    /// Number of users.
    pub users: Spanned<i64>,
    /// Wire id prefix.
    pub prefix: Opt<String>,
    /// Wire id offset.
    pub first_id: Opt<i64>,
    /// Shorthand for one steady arrival phase.
    pub login_rate: Opt<f64>,
    /// Arrival phases.
    pub arrival: Option<Spanned<Vec<Spanned<PhaseSpec>>>>,
    /// Users that log in late.
    pub late: Option<Spanned<LateSpec>>,
    /// Users that go offline and come back.
    pub churn: Option<Spanned<ChurnSpec>>,
    /// Users who come and go over a compressed day.
    pub sessions: Option<Spanned<SessionsSpec>>,
    /// Who talks to whom.
    pub contacts: Option<Spanned<ContactsSpec>>,
    /// Groups with heavy-tailed sizes.
    pub groups: Option<Spanned<GroupsSpec>>,
}

/// `[population.groups]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsSpec {
    /// How many groups.
    pub count: Spanned<i64>,
    /// Fewest members.
    pub min: Opt<i64>,
    /// Most members.
    pub max: Opt<i64>,
    /// Zipf exponent of the sizes.
    pub exponent: Opt<f64>,
    /// `"contacts"` or `"uniform"`.
    pub members: Opt<String>,
    /// Most senders per group.
    pub speakers: Opt<i64>,
}

/// `[population.sessions]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsSpec {
    /// The compressed day's length.
    pub day: Spanned<Dur>,
    /// `"day"`, `"flat"` or relative rates at evenly spaced points.
    pub curve: Opt<toml::Value>,
    /// Session lengths (a duration distribution).
    pub length: Opt<toml::Value>,
    /// Offline gaps (a duration distribution).
    pub gap: Opt<toml::Value>,
    /// Most users online at once.
    pub max_online: Opt<i64>,
}

/// `[population.contacts]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactsSpec {
    /// Mean contacts per user.
    pub mean: Opt<f64>,
    /// Exponent of the degree distribution.
    pub exponent: Opt<f64>,
}

/// One arrival phase: `{ duration, rate }` or `{ duration, from, to }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Phase length.
    pub duration: Spanned<Dur>,
    /// Steady logins/s.
    pub rate: Opt<f64>,
    /// Ramp start, logins/s.
    pub from: Opt<f64>,
    /// Ramp end, logins/s.
    pub to: Opt<f64>,
}

/// `population.late`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LateSpec {
    /// Fraction of users that are late.
    pub fraction: Opt<f64>,
    /// Number of users that are late.
    pub count: Opt<i64>,
    /// When they log in, from the start of the run.
    pub at: Spanned<Dur>,
}

/// `population.churn`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChurnSpec {
    /// Fraction of users that churn.
    pub fraction: Opt<f64>,
    /// Number of users that churn.
    pub count: Opt<i64>,
    /// When they disconnect, from the start of the run.
    pub offline_at: Spanned<Dur>,
    /// When they reconnect, from the start of the run.
    pub back_at: Spanned<Dur>,
}

/// One `[[traffic]]` entry: the union of every kind's keys; validation checks that only
/// the keys of its `kind` are present.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficSpec {
    /// Pattern name.
    pub name: Opt<String>,
    /// What the pattern does.
    pub kind: Spanned<TrafficKind>,
    /// Start, after all on-time users are in.
    pub start: Opt<Dur>,
    /// How long it sends.
    pub duration: Opt<Dur>,
    /// How users are chosen: random or every k-th.
    pub pick: Opt<Pick>,
    /// Direct: number of senders.
    pub senders: Opt<i64>,
    /// Direct: number of receivers.
    pub receivers: Opt<i64>,
    /// Direct/group: messages per pair / per sender.
    pub messages: Opt<i64>,
    /// Time between two sends of one sender.
    pub interval: Opt<Dur>,
    /// Total messages/s of the pattern.
    pub rate: Opt<f64>,
    /// Body bytes, or a distribution of them (`sizes`).
    pub size: Opt<toml::Value>,
    /// Group: number of groups.
    pub groups: Opt<i64>,
    /// Group: members per group.
    pub group_size: Opt<i64>,
    /// Group: senders per group.
    pub senders_per_group: Opt<i64>,
    /// Idle: users that idle.
    pub users: Opt<i64>,
    /// Request: which request (one of the driver's).
    pub request: Opt<String>,
    /// Request: fixed concurrency.
    pub concurrency: Opt<i64>,
    /// Request: concurrency sweep.
    pub sweep: Opt<Vec<Spanned<i64>>>,
    /// Request: length of each sweep step.
    pub step_duration: Opt<Dur>,
    /// Echo: connections that send.
    pub connections: Opt<i64>,
    /// Flow: where each user's messages go, `"direct"` or `"group"`.
    pub to: Opt<String>,
    /// Flow: iterations of {send, think} per user.
    pub loops: Opt<i64>,
    /// Flow: think time, `"2s"`, `{ uniform = ["1s", "3s"] }` or `{ exponential = "2s" }`.
    pub think: Opt<toml::Value>,
    /// Chat: Zipf exponent of the users' message rates.
    pub activity: Opt<f64>,
    /// Chat: messages/s into the population's groups.
    pub group_rate: Opt<f64>,
    /// Trace: the file of recorded messages.
    pub file: Opt<String>,
    /// Trace: replay speed.
    pub speed: Opt<f64>,
}

impl TrafficSpec {
    /// The optional keys present besides `name`, `kind`, `start` and `duration`, with
    /// their spans (each kind takes some of them).
    pub fn present(&self) -> Vec<(&'static str, Range<usize>)> {
        fn add<T>(v: &mut Vec<(&'static str, Range<usize>)>, name: &'static str, o: &Opt<T>) {
            if let Some(x) = o {
                v.push((name, x.span()));
            }
        }
        let mut v = Vec::new();
        add(&mut v, "pick", &self.pick);
        add(&mut v, "senders", &self.senders);
        add(&mut v, "receivers", &self.receivers);
        add(&mut v, "messages", &self.messages);
        add(&mut v, "interval", &self.interval);
        add(&mut v, "rate", &self.rate);
        add(&mut v, "size", &self.size);
        add(&mut v, "groups", &self.groups);
        add(&mut v, "group_size", &self.group_size);
        add(&mut v, "senders_per_group", &self.senders_per_group);
        add(&mut v, "users", &self.users);
        add(&mut v, "request", &self.request);
        add(&mut v, "concurrency", &self.concurrency);
        add(&mut v, "sweep", &self.sweep);
        add(&mut v, "step_duration", &self.step_duration);
        add(&mut v, "connections", &self.connections);
        add(&mut v, "to", &self.to);
        add(&mut v, "activity", &self.activity);
        add(&mut v, "group_rate", &self.group_rate);
        add(&mut v, "file", &self.file);
        add(&mut v, "speed", &self.speed);
        add(&mut v, "loops", &self.loops);
        add(&mut v, "think", &self.think);
        v
    }
}

/// `traffic.pick`: how users are chosen from a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    /// A seeded random sample.
    #[default]
    Random,
    /// Evenly spaced: every k-th user of the pool (OpenIM's "等距抽样").
    EveryKth,
}

/// `[ledger]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerSpec {
    /// Fraction of streams tracked.
    pub sample: Opt<f64>,
    /// Deliveries later than this count as late.
    pub late_after: Opt<Dur>,
    /// Examples kept per failure kind.
    pub examples: Opt<i64>,
    /// Final sync after the drain.
    pub verify_sync: Opt<bool>,
}

/// `[checks]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksSpec {
    /// Bound on lost messages.
    pub max_lost: Opt<i64>,
    /// Bound on duplicated deliveries.
    pub max_duplicated: Opt<i64>,
    /// Bound on reordered deliveries.
    pub max_reordered: Opt<i64>,
    /// Bound on corrupted deliveries.
    pub max_corrupted: Opt<i64>,
    /// Bound on late deliveries.
    pub max_late: Opt<i64>,
    /// Bound on end-to-end p99.
    pub e2e_p99: Opt<Dur>,
    /// Bound on send → ack p99.
    pub ack_p99: Opt<Dur>,
    /// Bound on request round-trip p99.
    pub request_p99: Opt<Dur>,
    /// Lower bound on login success ratio.
    pub min_login_success: Opt<f64>,
    /// Bound on failed sends ÷ sends (a built-in check: 1% when not set).
    pub max_send_error_rate: Opt<f64>,
    /// Lower bound on verified ÷ planned deliveries (a built-in check: 90% when not set).
    pub min_verified: Opt<f64>,
    /// Bound on frames the driver did not understand (a built-in check: 10 when not set).
    pub max_protocol_errors: Opt<i64>,
    /// Bound on deliveries found only by the final verification sync ÷ expected (a
    /// built-in check: 0.1% when not set).
    pub max_repaired_rate: Opt<f64>,
    /// Bound on bodies not from this run plus deliveries to unexpected recipients (a
    /// built-in check: 0 when not set).
    pub max_foreign: Opt<i64>,
    /// Bound on failed group joins (a built-in check: 0 when not set).
    pub max_join_failures: Opt<i64>,
    /// Bound on run-time failures of an adapter script (a built-in check with the
    /// `script` driver: 0 when not set).
    pub max_script_errors: Opt<i64>,
    /// Bound on the time to recover after each `[[chaos]]` step.
    pub max_recovery: Opt<Dur>,
    /// Lower bound on users online ÷ users the plan puts online, over the traffic (a
    /// built-in check: 99% when not set).
    pub min_online: Opt<f64>,
    /// Bound on the generator's send lag p99 (a built-in check: 1 s when not set).
    pub max_send_lag: Opt<Dur>,
    /// Lower bound on sends made ÷ sends due by the schedule (a built-in check: 99% when
    /// not set).
    pub min_offered: Opt<f64>,
    /// Bound on read receipts lost (a built-in check with receipts: 0 when not set).
    pub max_receipts_lost: Opt<i64>,
    /// Bound on duplicated read receipts (a built-in check with receipts: 0 when not set).
    pub max_receipts_duplicated: Opt<i64>,
    /// Bound on typing notices owed and missed (a built-in check with typing: 0 when not
    /// set).
    pub max_typing_missed: Opt<i64>,
    /// Bound on presence changes owed and missed (a built-in check with presence: 0 when
    /// not set).
    pub max_presence_missed: Opt<i64>,
    /// Bound on read → receipt p99.
    pub receipt_p99: Opt<Dur>,
    /// Bound on typing → peer p99.
    pub typing_p99: Opt<Dur>,
    /// Bound on login/logout → contact's presence p99.
    pub presence_p99: Opt<Dur>,
}

/// `[report]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportSpec {
    /// Output folder.
    pub out: Opt<String>,
    /// Where to serve the run's OpenMetrics while it lasts (`HOST:PORT`).
    pub metrics_listen: Opt<String>,
    /// Where to push them by Prometheus remote-write (`http://HOST:PORT/PATH`).
    pub metrics_push: Opt<String>,
}

/// `[monitor]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorSpec {
    /// Process ids on this host.
    #[serde(default)]
    pub pids: Vec<Spanned<i64>>,
    /// Process names (as in /proc/PID/comm) on this host.
    #[serde(default)]
    pub names: Vec<Spanned<String>>,
    /// Prometheus/OpenMetrics endpoints to scrape once a second.
    #[serde(default)]
    pub prometheus: Vec<Spanned<String>>,
    /// Which scraped series to keep (all when empty).
    #[serde(default)]
    pub series: Vec<Spanned<String>>,
}

/// `[find]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindSpec {
    /// The key to vary.
    pub vary: Spanned<String>,
    /// First value.
    pub from: Opt<toml::Value>,
    /// Highest value.
    pub to: Opt<toml::Value>,
    /// `25` or `"5%"`.
    pub precision: Opt<toml::Value>,
    /// Every pattern's duration in a step.
    pub step_duration: Opt<Dur>,
    /// Traffic left out at the start of each step.
    pub warmup: Opt<Dur>,
    /// Most steps.
    pub max_steps: Opt<i64>,
    /// Everyone connects at once in each step (with `vary = "population.users"`).
    pub storm: Opt<bool>,
}

/// One `[[chaos]]` step as written: the union of every action's keys; validation checks
/// that only the keys of its `action` are present.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChaosSpec {
    /// What it does.
    pub action: Spanned<String>,
    /// When, from traffic start.
    pub at: Opt<Dur>,
    /// A seeded random start inside these two times.
    pub window: Opt<Vec<Dur>>,
    /// How long it lasts.
    pub duration: Opt<Dur>,
    /// The process, by id.
    pub pid: Opt<i64>,
    /// The process, by name.
    pub process: Opt<String>,
    /// The process, as a `[monitor]` entry: one of its `names`, or one of its `pids`.
    pub monitor: Opt<toml::Value>,
    /// `restart`: the command that starts the process again.
    pub start: Opt<String>,
    /// `restart`: where it listens once up.
    pub listen: Opt<String>,
    /// `exec`: the command.
    pub command: Opt<String>,
    /// `cut`: share of online users; `loss`: share of segments.
    pub fraction: Opt<f64>,
    /// `delay`: added delay.
    pub delay: Opt<Dur>,
    /// `delay`: extra random delay.
    pub jitter: Opt<Dur>,
    /// `bandwidth`: bytes per second.
    pub bandwidth: Opt<String>,
    /// Per-step bound on lost messages.
    pub max_lost: Opt<i64>,
    /// Per-step bound on duplicated deliveries.
    pub max_duplicated: Opt<i64>,
}

impl ChaosSpec {
    /// The keys present besides `action`, `at`, `window` and the per-step bounds, with
    /// their spans (each action takes some of them).
    pub fn present(&self) -> Vec<(&'static str, Range<usize>)> {
        let mut v = Vec::new();
        let mut add = |name: &'static str, span: Option<Range<usize>>| {
            if let Some(span) = span {
                v.push((name, span));
            }
        };
        add("duration", self.duration.as_ref().map(Spanned::span));
        add("pid", self.pid.as_ref().map(Spanned::span));
        add("process", self.process.as_ref().map(Spanned::span));
        add("monitor", self.monitor.as_ref().map(Spanned::span));
        add("start", self.start.as_ref().map(Spanned::span));
        add("listen", self.listen.as_ref().map(Spanned::span));
        add("command", self.command.as_ref().map(Spanned::span));
        add("fraction", self.fraction.as_ref().map(Spanned::span));
        add("delay", self.delay.as_ref().map(Spanned::span));
        add("jitter", self.jitter.as_ref().map(Spanned::span));
        add("bandwidth", self.bandwidth.as_ref().map(Spanned::span));
        v
    }
}
