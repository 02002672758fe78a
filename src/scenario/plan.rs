//! The `Plan`: a validated scenario lowered into concrete, resolved steps.
//!
//! Everything random (which users send, who is in which group) is resolved here from the
//! scenario's seed, so every shard and process computes the same plan. The engine runs a
//! `Plan` and never sees TOML.

use std::time::Duration;

pub use super::chaos_step::{
    ChaosAction, ChaosStep, NetFault, ProcRef, RESTART_WAIT, RETRANSMIT_TIMEOUT,
};
pub use crate::driver::Auth;
use crate::driver::{Caps, Config, Endpoint, Spec};

pub use super::contacts::{resolve as resolve_contacts, ContactModel, Contacts};
pub use super::dist::ThinkTimes;
pub use super::sessions::{Sessions, OPEN};
pub use super::signals::SignalsPlan;
pub use super::sizes::{summary as size_summary, BodySize, Sizes};
pub use crate::vocab::{CheckMetric, LedgerOpts, StreamId, UserIx};

/// A runnable scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Scenario name (file stem unless `name` is set), shown in the report.
    pub name: String,
    /// Seed used to resolve every random choice.
    pub seed: u64,
    /// What to connect to.
    pub target: Target,
    /// Who logs in, when, and who is late or churns.
    pub population: Population,
    /// Traffic patterns, each with its own resolved streams.
    pub traffic: Vec<Traffic>,
    /// Delivery verification settings.
    pub ledger: LedgerOpts,
    /// SLO checks that decide the exit code.
    pub checks: Vec<Check>,
    /// Output settings.
    pub report: ReportOpts,
    /// Target processes on this host whose CPU and memory the run samples.
    pub monitor: MonitorOpts,
    /// Grace period after the last scheduled send for in-flight deliveries (and on Ctrl-C).
    pub drain: Duration,
    /// The generator's wake tick ([`crate::runtime`]; zero: none): a whole number of
    /// milliseconds, at most 10 ms.
    pub wake_tick: Duration,
    /// This process's slice of the user range.
    pub shard: Shard,
    /// The scenario's `[find]` table: how `msgstorm find` searches when no flags say.
    pub find: Option<FindOpts>,
    /// What the run cannot verify as the scenario asks, one `warning: FILE:LINE: KEY: …`
    /// line each: printed by `validate` and `run`, never an error.
    pub warnings: Vec<String>,
    /// Fault steps during the load (`[[chaos]]`), in file order.
    pub chaos: Vec<ChaosStep>,
    /// What users send besides messages (`[signals]`), when the scenario asks for any.
    pub signals: Option<SignalsPlan>,
}

/// A number of `[find]` and whether it is written whole (then every step is whole).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FindValue {
    /// The number.
    pub value: f64,
    /// Written as an integer.
    pub whole: bool,
}

/// The scenario's `[find]` table, checked; every key but `vary` may be left out.
#[derive(Debug, Clone, PartialEq)]
pub struct FindOpts {
    /// The scenario key to vary.
    pub vary: String,
    /// First value.
    pub from: Option<FindValue>,
    /// Highest value.
    pub to: Option<FindValue>,
    /// How close the answer must be.
    pub precision: Option<crate::vocab::Precision>,
    /// Every pattern's duration in a step.
    pub step_duration: Option<Duration>,
    /// Traffic left out at the start of each step.
    pub warmup: Option<Duration>,
    /// Most steps.
    pub max_steps: Option<u32>,
    /// Each step connects everyone at once (a connection storm).
    pub storm: bool,
}

/// The target server.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `ws://…`, `mqtt://…`; `None` starts the embedded reference server (or, for an
    /// in-process driver, means there is nothing to connect to).
    pub endpoint: Option<Endpoint>,
    /// The protocol driver.
    pub driver: &'static Spec,
    /// How users authenticate.
    pub auth: Auth,
    /// Limit for TCP connect + protocol handshake + login of one user.
    pub connect_timeout: Duration,
    /// Heartbeat interval of every online user (`None`: no heartbeats).
    pub heartbeat: Option<Duration>,
    /// Local addresses client sockets bind to, user `i` using `source_addrs[i % len]`
    /// (empty: the system chooses), for drivers that honour them. Each one adds a range
    /// of ephemeral ports towards the target.
    pub source_addrs: Vec<std::net::IpAddr>,
    /// The driver's own `[target.<driver>]` table, checked by the driver at validation.
    pub options: toml::Table,
    /// The scenario file's directory: files the driver's options name are relative to it.
    pub dir: std::path::PathBuf,
    /// What the driver can do as configured (found when its options were checked).
    pub caps: Caps,
    /// The signals the driver can send as configured (found with `caps`).
    pub signals: crate::driver::Signals,
    /// The traffic kinds of the scenario, for drivers configured per kind.
    pub kinds: Vec<&'static str>,
    /// Where the users connect instead of the endpoint's host and port: msgstorm's chaos
    /// proxy, set at run time when a `[[chaos]]` step needs it (TLS and the protocol still
    /// name the endpoint).
    pub relay: Option<std::net::SocketAddr>,
}

impl Target {
    /// The driver's configuration for run `run_id`, whose largest body is `max_body`.
    pub fn driver_config(&self, max_body: usize, run_id: u32) -> Config {
        Config {
            spec: self.driver,
            endpoint: self.endpoint.clone(),
            auth: self.auth.clone(),
            connect_timeout: self.connect_timeout,
            heartbeat: self.heartbeat,
            source_addrs: self.source_addrs.clone(),
            max_body,
            run_id,
            kinds: self.kinds.clone(),
            options: self.options.clone(),
            dir: self.dir.clone(),
            directory: None,
            relay: self.relay,
            wires: Default::default(),
        }
    }
}

/// The user population.
#[derive(Debug, Clone, PartialEq)]
pub struct Population {
    /// How many users this plan simulates in all shards (`0..users`).
    pub users: u32,
    /// Prefix of wire user ids.
    pub prefix: String,
    /// Numeric offset of wire ids: user `i` is `{prefix}{first_id + i}`.
    pub first_id: u64,
    /// Login arrival: consecutive phases of linearly changing rates.
    pub arrival: Vec<ArrivalPhase>,
    /// Users that are offline from the start and log in later (sorted ascending).
    pub late: Vec<UserIx>,
    /// When the late users log in, after the start of the run.
    pub late_at: Duration,
    /// How the late users arrive from `late_at` on: the k-th late user (in ascending
    /// order) logs in at `late_at` + the arrival offset of `k` along these
    /// phases (zero-rate phases hold). Empty: every late user at `late_at`. Scenario files
    /// cannot set it; `msgstorm find --vary population.users` adds users step by step with it.
    pub late_arrival: Vec<ArrivalPhase>,
    /// Users that go offline during traffic and come back (sorted ascending, disjoint
    /// from `late`).
    pub churn: Vec<UserIx>,
    /// When churning users disconnect, after the start of the run.
    pub churn_offline_at: Duration,
    /// When churning users reconnect and sync, after the start of the run.
    pub churn_back_at: Duration,
    /// Every user's online windows when users come and go over a day
    /// (`[population.sessions]`); then nobody is late, churning or on time.
    pub sessions: Option<std::sync::Arc<Sessions>>,
    /// The contact graph, when a pattern sends to contacts.
    pub contacts: Option<std::sync::Arc<Contacts>>,
}

/// One phase of login arrivals: rate goes linearly from `rate_from` to `rate_to`
/// logins/s over `duration` (equal rates: steady; a list of steady phases: steps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrivalPhase {
    /// Phase length.
    pub duration: Duration,
    /// Logins per second at the start of the phase (> 0).
    pub rate_from: f64,
    /// Logins per second at the end of the phase (> 0).
    pub rate_to: f64,
}

/// One traffic pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// `name` from the scenario, or `traffic[i]`.
    pub name: String,
    /// Start, relative to the moment all on-time users are logged in.
    pub start: Duration,
    /// Stop sending after this long (`None`: when the counts are done).
    pub duration: Option<Duration>,
    /// What it does.
    pub kind: TrafficShape,
}

/// The users of an `idle` pattern. The whole population is never listed: it may be
/// 10⁸ users, and every shard process holds the plan.
#[derive(Debug, Clone, PartialEq)]
pub enum IdleUsers {
    /// Every user of the population.
    All,
    /// These users, sorted ascending.
    Chosen(Vec<UserIx>),
}

impl IdleUsers {
    /// Whether user `u` idles.
    pub fn contains(&self, u: UserIx) -> bool {
        match self {
            IdleUsers::All => true,
            IdleUsers::Chosen(users) => users.binary_search(&u).is_ok(),
        }
    }
}

/// The resolved shape of a traffic pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum TrafficShape {
    /// Fixed senders × receivers, each sender cycling over the receivers round-robin.
    Direct(DirectTraffic),
    /// Group chat.
    Group(GroupTraffic),
    /// Online with heartbeats only; `users` stay connected for the duration.
    Idle {
        /// The users that idle.
        users: IdleUsers,
    },
    /// Closed-loop request/response at fixed concurrency, optionally swept.
    Request(RequestTraffic),
    /// Round trips through an echo endpoint at a fixed rate per connection.
    Echo(EchoTraffic),
    /// The population talks to its contacts.
    Chat(ChatTraffic),
    /// Recorded messages replayed.
    Trace(TraceTraffic),
}

impl TrafficShape {
    /// The sizes its message bodies are drawn from, if it sends messages.
    pub fn size(&self) -> Option<&BodySize> {
        match self {
            TrafficShape::Direct(d) => Some(&d.size),
            TrafficShape::Group(g) => Some(&g.size),
            TrafficShape::Echo(e) => Some(&e.size),
            TrafficShape::Chat(c) => Some(&c.size),
            TrafficShape::Trace(t) => Some(&t.size),
            TrafficShape::Idle { .. } | TrafficShape::Request(_) => None,
        }
    }
}

/// A trace replayed: every recorded message at its time, from its sender to its recipient
/// or group.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceTraffic {
    /// The senders, by user, ascending.
    pub senders: std::sync::Arc<[TraceSender]>,
    /// The trace's groups.
    pub groups: Vec<GroupSpec>,
    /// The sizes of messages the trace gives none.
    pub size: BodySize,
    /// The stream of a sender's `k`-th target is `stream_base` + the targets of the
    /// senders before it + `k`.
    pub stream_base: StreamId,
}

/// One sender of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSender {
    /// Who.
    pub user: UserIx,
    /// Where its messages go, each target one stream.
    pub targets: Vec<TraceTarget>,
    /// Each message: when it is due from the pattern's start, and its target.
    pub sends: Vec<(Duration, u32)>,
    /// Each message's body bytes (0: drawn from the pattern's `size`).
    pub sizes: Vec<u32>,
}

/// Where a traced message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceTarget {
    /// A user.
    User(UserIx),
    /// A group of the trace, by index.
    Group(u32),
}

/// Chat traffic: each user sends to its contacts, a Poisson process at its own rate while
/// it is online.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTraffic {
    /// Messages/s the population sends in all, on average over the pattern.
    pub rate: f64,
    /// Each user's share of the sends (Zipf by a seeded rank), summing to 1; scaled by
    /// the engine to the time each user is online and has contacts.
    pub weights: std::sync::Arc<[f32]>,
    /// Who talks to whom.
    pub contacts: std::sync::Arc<Contacts>,
    /// Body bytes.
    pub size: BodySize,
    /// The stream of user `u`'s messages to its `k`-th contact is
    /// `stream_base + contacts.offset(u) + k`.
    pub stream_base: StreamId,
    /// The pattern's seed: user `u` draws its send times and contacts from `mix(seed, u)`.
    pub seed: u64,
    /// Messages/s into `groups`, in all, on average over the pattern.
    pub group_rate: f64,
    /// The population's groups; their senders are the members who speak.
    pub groups: Vec<GroupSpec>,
    /// Each group's share of `group_rate` (Zipf by a seeded rank), summing to 1.
    pub group_weights: std::sync::Arc<[f32]>,
    /// The stream of the `k`-th sender of group `g` is `group_stream_base` + the senders
    /// of the groups before `g` + `k`.
    pub group_stream_base: StreamId,
}

/// Direct (1:1) traffic: every sender sends `messages` to every receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectTraffic {
    /// Sending users.
    pub senders: Vec<UserIx>,
    /// Receiving users.
    pub receivers: Vec<UserIx>,
    /// Messages per sender × receiver pair (`None`: until `duration`).
    pub messages: Option<u64>,
    /// When each sender's sends are due.
    pub pace: Pace,
    /// Body size in bytes (the envelope is padded to it).
    pub size: BodySize,
    /// Stream id of pair (sender `s`, receiver `r`) is
    /// `stream_base + s_pos * receivers.len() + r_pos`.
    pub stream_base: StreamId,
}

/// Group traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupTraffic {
    /// The groups, with members and senders.
    pub groups: Vec<GroupSpec>,
    /// Messages per sender (`None`: until `duration`).
    pub messages: Option<u64>,
    /// When each sender's sends are due.
    pub pace: Pace,
    /// Body size in bytes.
    pub size: BodySize,
    /// Stream id of (group `g`, sender position `k`) is
    /// `stream_base + g * senders_per_group + k`.
    pub stream_base: StreamId,
    /// Senders in each group.
    pub senders_per_group: u32,
}

/// When one sender's sends are due, counted from its pattern's start. Senders' first
/// sends are staggered evenly over one interval ([`Pace::spacing`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Pace {
    /// One send every this long.
    Every(Duration),
    /// Artillery's flow: each sender thinks, then loops {send one message to each of its
    /// receivers (or into its group), think}; due times still come from the schedule.
    Think(Think),
}

impl Pace {
    /// The mean time between two sends (or loops) of one sender.
    pub fn spacing(&self) -> Duration {
        match self {
            Pace::Every(interval) => *interval,
            Pace::Think(t) => t.times.mean(),
        }
    }
}

/// Think times drawn per sender from a seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Think {
    /// How long a user thinks.
    pub times: ThinkTimes,
    /// The pattern's seed (drawn from the scenario seed); sender `k` draws from
    /// [`Think::rng`]`(k)`.
    pub seed: u64,
}

impl Think {
    /// The random source of the sender at `position` in its pattern.
    pub fn rng(&self, position: usize) -> fastrand::Rng {
        let k = (position as u64).wrapping_add(1);
        fastrand::Rng::with_seed(self.seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
}

/// One group of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSpec {
    /// Group name on the wire (unique per run: it includes the run's seed).
    pub name: String,
    /// Members, sorted ascending; `members[0]` creates the group.
    pub members: Vec<UserIx>,
    /// The members that send, `senders_per_group` of them.
    pub senders: Vec<UserIx>,
}

/// Closed-loop request/response.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTraffic {
    /// The request, one of the driver's [`Spec::requests`].
    pub request: &'static str,
    /// Concurrency per step; one element without a sweep. User `i` works in a step when
    /// `i < concurrency`.
    pub steps: Vec<u32>,
    /// How long each step runs.
    pub step_duration: Duration,
}

/// Echo round trips.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoTraffic {
    /// Connections that send.
    pub users: Vec<UserIx>,
    /// Time between two sends on one connection.
    pub interval: Duration,
    /// Frame size in bytes.
    pub size: BodySize,
    /// Stream id of the connection at position `k` of `users` is `stream_base + k`.
    pub stream_base: StreamId,
}

/// A bound on a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Passes when the value is ≤ this.
    AtMost(f64),
    /// Passes when the value is ≥ this.
    AtLeast(f64),
}

/// One SLO check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The scenario key, e.g. `checks.max_lost`; the report names failed checks by it.
    pub key: String,
    /// What is measured.
    pub metric: CheckMetric,
    /// The bound it must satisfy.
    pub bound: Bound,
}

/// Processes to watch during a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MonitorOpts {
    /// Process ids.
    pub pids: Vec<u32>,
    /// Process names, matched against /proc/PID/comm when the run starts.
    pub names: Vec<String>,
    /// Prometheus/OpenMetrics endpoints (`http://` URLs) scraped once a second.
    pub prometheus: Vec<String>,
    /// Which scraped series to keep (all when empty).
    pub series: Vec<crate::scrape::SeriesFilter>,
}

/// Output settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReportOpts {
    /// Where results go (`None`: a new timestamped folder under `./msgstorm-results/`).
    pub out: Option<std::path::PathBuf>,
    /// Where the run serves its OpenMetrics while it lasts (`report.metrics_listen`,
    /// `--metrics-listen`); shards on one host add their index to the port.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Where the run pushes the same series by Prometheus remote-write every few seconds
    /// and at its end (`report.metrics_push`, `--metrics-push`).
    pub metrics_push: Option<http::Uri>,
}

/// A slice of the user range: shard `index` of `count` owns users
/// `users * index / count .. users * (index + 1) / count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based shard index.
    pub index: u32,
    /// Number of shards (≥ 1).
    pub count: u32,
}

impl Shard {
    /// The whole population in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// The users this shard owns out of `users`.
    pub fn range(self, users: u32) -> std::ops::Range<UserIx> {
        let lo = (u64::from(users) * u64::from(self.index) / u64::from(self.count)) as u32;
        let hi = (u64::from(users) * u64::from(self.index + 1) / u64::from(self.count)) as u32;
        lo..hi
    }

    /// The index of the shard (of `self.count`) that owns user `u` of `users`.
    pub fn owner(self, users: u32, u: UserIx) -> u32 {
        let count = self.count.max(1);
        let shard = |index| Shard { index, count };
        let mut index = ((u64::from(u) * u64::from(count)) / u64::from(users.max(1))) as u32;
        index = index.min(count - 1);
        while index + 1 < count && shard(index).range(users).end <= u {
            index += 1;
        }
        while index > 0 && shard(index).range(users).start > u {
            index -= 1;
        }
        index
    }

    /// Which shard sent each stream of `plan`, when the plan has several shards.
    pub fn senders(plan: &Plan) -> Option<SenderShards> {
        (plan.shard.count > 1).then(|| SenderShards::of(plan))
    }
}

impl Plan {
    /// The run's groups, numbered as the engine numbers them: pattern by pattern, in plan
    /// order, each pattern's groups in its order.
    pub fn groups(&self) -> impl Iterator<Item = &GroupSpec> + '_ {
        self.traffic.iter().flat_map(|t| match &t.kind {
            TrafficShape::Group(g) => g.groups.as_slice(),
            TrafficShape::Chat(c) => c.groups.as_slice(),
            TrafficShape::Trace(t) => t.groups.as_slice(),
            _ => &[],
        })
    }

    /// The largest message body any traffic pattern sends, bytes.
    pub fn max_body(&self) -> usize {
        let listed = |t: &TrafficShape| match t {
            TrafficShape::Trace(t) => t.senders.iter().flat_map(|s| s.sizes.iter()).max().copied(),
            _ => None,
        };
        self.traffic
            .iter()
            .map(|t| {
                let drawn = t.kind.size().map_or(0, BodySize::max);
                drawn.max(listed(&t.kind).map_or(0, |m| m as usize))
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether a pattern draws its body sizes from a distribution (not one size).
    pub fn draws_sizes(&self) -> bool {
        let drawn = |t: &TrafficShape| {
            t.size()
                .is_some_and(|b| !matches!(*b.sizes, Sizes::Fixed(_)))
        };
        self.traffic.iter().any(|t| drawn(&t.kind))
    }

    /// The driver's configuration for run `run_id`.
    pub fn driver_config(&self, run_id: u32) -> Config {
        self.target.driver_config(self.max_body(), run_id)
    }
}

impl Population {
    /// The wire id of user `ix`.
    pub fn user_id(&self, ix: UserIx) -> String {
        format!("{}{}", self.prefix, self.first_id + u64::from(ix))
    }
}

/// The shard that sent each direct and group stream of a sharded plan, so that a receiver
/// can tell latencies measured across two shards' clocks from those on its own clock.
#[derive(Debug, Clone)]
pub struct SenderShards {
    /// This process's shard.
    me: Shard,
    /// Users of the plan in all shards.
    users: u32,
    /// Per direct pattern: first stream, receivers per sender, senders.
    direct: Vec<(StreamId, u32, Vec<UserIx>)>,
    /// Per group pattern: first stream, senders per group, each group's senders.
    group: Vec<(StreamId, u32, Vec<Vec<UserIx>>)>,
    /// Per chat pattern: first stream and the contacts, whose slots are its streams.
    chat: Vec<(StreamId, std::sync::Arc<Contacts>)>,
    /// Per chat pattern with groups and per trace: the first stream and the sender of
    /// each stream in order.
    chat_groups: Vec<(StreamId, Vec<UserIx>)>,
}

impl SenderShards {
    /// The senders of `plan`'s streams.
    pub fn of(plan: &Plan) -> SenderShards {
        let mut out = SenderShards {
            me: plan.shard,
            users: plan.population.users,
            direct: Vec::new(),
            group: Vec::new(),
            chat: Vec::new(),
            chat_groups: Vec::new(),
        };
        for t in &plan.traffic {
            match &t.kind {
                TrafficShape::Direct(d) => {
                    out.direct
                        .push((d.stream_base, d.receivers.len() as u32, d.senders.clone()))
                }
                TrafficShape::Group(g) => out.group.push((
                    g.stream_base,
                    g.senders_per_group,
                    g.groups.iter().map(|x| x.senders.clone()).collect(),
                )),
                TrafficShape::Chat(c) => {
                    out.chat.push((c.stream_base, c.contacts.clone()));
                    let senders = c.groups.iter().flat_map(|g| g.senders.iter().copied());
                    out.chat_groups
                        .push((c.group_stream_base, senders.collect()));
                }
                TrafficShape::Trace(t) => {
                    let senders = t
                        .senders
                        .iter()
                        .flat_map(|s| std::iter::repeat_n(s.user, s.targets.len()));
                    out.chat_groups.push((t.stream_base, senders.collect()));
                }
                // Echo streams come back to their sender; the others carry no envelopes.
                TrafficShape::Echo(_) | TrafficShape::Idle { .. } | TrafficShape::Request(_) => {}
            }
        }
        out
    }

    /// The user that sends `stream`, if it is a direct or group stream of the plan.
    pub fn sender(&self, stream: StreamId) -> Option<UserIx> {
        for (base, receivers, senders) in &self.direct {
            let k = stream.wrapping_sub(*base) as usize;
            if stream >= *base && k < senders.len() * *receivers as usize {
                return Some(senders[k / *receivers as usize]);
            }
        }
        for (base, per_group, groups) in &self.group {
            let k = stream.wrapping_sub(*base) as usize;
            let per_group = *per_group as usize;
            if stream >= *base && k < groups.len() * per_group {
                return groups[k / per_group].get(k % per_group).copied();
            }
        }
        for (base, contacts) in &self.chat {
            let k = stream.wrapping_sub(*base) as usize;
            if stream >= *base && k < contacts.slots() {
                return Some(contacts.owner(k as u32));
            }
        }
        for (base, senders) in &self.chat_groups {
            let k = stream.wrapping_sub(*base) as usize;
            if stream >= *base && k < senders.len() {
                return Some(senders[k]);
            }
        }
        None
    }

    /// This process's shard index.
    pub fn me(&self) -> u32 {
        self.me.index
    }

    /// The shard that sent `stream`, when it is another shard than this process's.
    pub fn other_shard(&self, stream: StreamId) -> Option<u32> {
        let from = self.me.owner(self.users, self.sender(stream)?);
        (from != self.me.index).then_some(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_user_has_the_shard_whose_range_holds_it() {
        for (users, count) in [(1003, 7), (10, 3), (5, 8), (100_000, 64)] {
            for u in (0..users).step_by(((users / 500).max(1)) as usize) {
                let owner = Shard { index: 0, count }.owner(users, u);
                assert!(
                    Shard {
                        index: owner,
                        count
                    }
                    .range(users)
                    .contains(&u),
                    "{u} of {users} in {count}"
                );
            }
        }
    }

    #[test]
    fn shards_partition_the_range() {
        let users = 1003;
        let mut next = 0;
        for index in 0..7 {
            let r = Shard { index, count: 7 }.range(users);
            assert_eq!(r.start, next);
            next = r.end;
        }
        assert_eq!(next, users);
    }
}
