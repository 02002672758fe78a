//! Validation: the schema as written → checked, resolved numbers (`Checked`), or the first
//! mistake as `FILE:LINE: KEY: what is wrong`. Everything that can be wrong with a scenario
//! is found here, before anything connects; lowering (`lower.rs`) cannot fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::DeTable;
use toml::Spanned;

use super::arrival;
use super::plan::{
    ArrivalPhase, Bound, Check, CheckMetric, LedgerOpts, MonitorOpts, ReportOpts, Target,
};
use super::schema::{ChecksSpec, Dur, LedgerSpec, MonitorSpec, PopulationSpec, Scenario};
use super::source::Source;
use super::target::{check_driver, target, DriverTable};
use super::traffic::{traffic, Pattern, PatternKind};
use crate::Result;

/// Seed used when the scenario sets none.
pub const DEFAULT_SEED: u64 = 42;
/// Default `population.login_rate`, logins/s.
const LOGIN_RATE: f64 = 1000.0;

/// The longest value of any duration key, and the longest the login arrival, a request
/// sweep or a pattern's count of sends may take: 30 days. Every offset the engine adds to
/// the run's start stays far inside what `Instant` and `Duration` arithmetic can hold.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The slowest rate of any rate key (logins/s, msgs/s): one per 1,000 s.
pub const MIN_RATE: f64 = 1e-3;
/// The fastest rate of any rate key: 10⁹/s, beyond any generator.
pub const MAX_RATE: f64 = 1e9;
/// The shortest time between two sends of one sender.
pub const MIN_INTERVAL: Duration = Duration::from_micros(1);
/// The shortest heartbeat interval (`0s` turns heartbeats off).
const MIN_HEARTBEAT: Duration = Duration::from_millis(1);
/// The most users a scenario may have: 100 million, ~5,000 shard processes of 20k
/// connections each. The plan never lists all of them (see [`MAX_LISTED`]).
pub const MAX_USERS: u32 = 100_000_000;
/// The most user slots the plan may list in all (late and churning users, senders,
/// receivers, group members, chosen idle users, echo connections): 4 bytes each, so
/// the plan every shard process holds stays under 400 MB.
pub const MAX_LISTED: u64 = 100_000_000;
/// The most stream × recipient pairs (what the ledger tracks) of a plan.
pub const MAX_PAIRS: u64 = 1_000_000_000;
/// The most deliveries a plan may schedule: far more than any generator sends in 30 days,
/// and far inside the `u64` counters that add them up.
pub const MAX_DELIVERIES: u64 = 1_000_000_000_000_000;
/// The most examples kept per kind of delivery failure.
const MAX_EXAMPLES: usize = 1000;

/// A validated scenario: every number checked and resolved, users not yet chosen.
#[derive(Debug)]
pub struct Checked {
    /// Plan name.
    pub name: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// Drain grace period.
    pub drain: Duration,
    /// The target.
    pub target: Target,
    /// The population.
    pub population: Pop,
    /// Traffic patterns, with counts still to be resolved into users.
    pub traffic: Vec<Pattern>,
    /// Ledger settings.
    pub ledger: LedgerOpts,
    /// SLO checks.
    pub checks: Vec<Check>,
    /// Output settings.
    pub report: ReportOpts,
    /// Processes to watch.
    pub monitor: MonitorOpts,
    /// The `[find]` table.
    pub find: Option<super::plan::FindOpts>,
    /// What the run cannot verify (see `warnings.rs`).
    pub warnings: Vec<String>,
}

/// The population with counts instead of user lists.
#[derive(Debug)]
pub struct Pop {
    /// All users.
    pub users: u32,
    /// Wire id prefix.
    pub prefix: String,
    /// Wire id offset.
    pub first_id: u64,
    /// Arrival phases fitted to the on-time users.
    pub arrival: Vec<ArrivalPhase>,
    /// Number of late users.
    pub late: u32,
    /// When they log in.
    pub late_at: Duration,
    /// Number of churning users.
    pub churn: u32,
    /// When churning users leave.
    pub churn_offline_at: Duration,
    /// When they come back.
    pub churn_back_at: Duration,
}

impl Pop {
    /// Users online through the whole traffic: neither late nor churning.
    pub fn steady(&self) -> u32 {
        self.users - self.late - self.churn
    }
}

/// Validates a whole scenario read from `file`; `root` is its spanned tree (after
/// overrides) and `tables` the drivers' own tables taken out of it.
pub fn validate(
    src: &Source<'_>,
    s: &Scenario,
    root: &DeTable<'_>,
    tables: &[DriverTable<'_>],
    file: &Path,
) -> Result<Checked> {
    let name = match &s.name {
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(src.at(n, "name", "must not be empty"))
        }
        Some(n) => n.get_ref().clone(),
        None => file
            .file_stem()
            .map_or("scenario".into(), |f| f.to_string_lossy().into_owned()),
    };
    let seed = match &s.seed {
        Some(v) => u64::try_from(*v.get_ref())
            .map_err(|_| src.at(v, "seed", format!("must be ≥ 0, got {}", v.get_ref())))?,
        None => DEFAULT_SEED,
    };
    let drain = match &s.drain {
        Some(d) => duration(src, d, "drain")?,
        None => Duration::from_secs(5),
    };
    let mut target = target(src, s.target.as_ref(), tables)?;
    let population = population(src, &s.population)?;
    let traffic = traffic(src, &s.traffic, &population, target.driver)?;
    target.kinds = kinds(&traffic);
    check_driver(src, root, &mut target, max_body(&traffic))?;
    missed_messages(src, &s.population, &population, &target)?;
    let warnings = super::warnings::warnings(src, &s.population, &population, &traffic, &target);
    let ledger = ledger(src, s.ledger.as_ref())?;
    sampled_streams(src, s.ledger.as_ref(), &ledger, &traffic)?;
    Ok(Checked {
        name,
        seed,
        drain,
        target,
        population,
        traffic,
        ledger,
        checks: checks(src, s.checks.as_ref())?,
        report: ReportOpts {
            out: match s.report.as_ref().and_then(|r| r.out.as_ref()) {
                Some(o) if o.get_ref().is_empty() => {
                    return Err(src.at(o, "report.out", "must name a folder"))
                }
                Some(o) => Some(PathBuf::from(o.get_ref())),
                None => None,
            },
        },
        monitor: monitor(src, s.monitor.as_ref())?,
        find: super::find::find(src, s.find.as_ref())?,
        warnings,
    })
}

/// The traffic kinds of the scenario, each once, in order of first use.
fn kinds(traffic: &[Pattern]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for p in traffic {
        let kind = match &p.kind {
            PatternKind::Direct { .. } => "direct",
            PatternKind::Group { .. } => "group",
            PatternKind::Idle { .. } => "idle",
            PatternKind::Request(_) => "request",
            PatternKind::Echo { .. } => "echo",
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// The largest body any pattern sends, bytes.
fn max_body(traffic: &[Pattern]) -> usize {
    traffic
        .iter()
        .map(|p| match &p.kind {
            PatternKind::Direct { size, .. }
            | PatternKind::Group { size, .. }
            | PatternKind::Echo { size, .. } => *size,
            PatternKind::Idle { .. } | PatternKind::Request(_) => 0,
        })
        .max()
        .unwrap_or(0)
}

/// Refuses a `ledger.sample` so small that the ledger would track no stream of the plan
/// (fewer than one expected): a run that verifies nothing must not pass.
fn sampled_streams(
    src: &Source<'_>,
    spec: Option<&LedgerSpec>,
    opts: &LedgerOpts,
    traffic: &[Pattern],
) -> Result<()> {
    let Some(s) = spec.and_then(|l| l.sample.as_ref()) else {
        return Ok(());
    };
    let streams: u64 = traffic
        .iter()
        .map(|p| match &p.kind {
            PatternKind::Direct {
                senders, receivers, ..
            } => u64::from(*senders) * u64::from(*receivers),
            PatternKind::Group {
                groups,
                senders_per_group,
                ..
            } => u64::from(*groups) * u64::from(*senders_per_group),
            PatternKind::Echo { connections, .. } => u64::from(*connections),
            PatternKind::Idle { .. } | PatternKind::Request(_) => 0,
        })
        .sum();
    let expected = opts.sample * streams as f64;
    if streams == 0 || expected >= 1.0 {
        return Ok(());
    }
    Err(src.at(
        s,
        "ledger.sample",
        format!(
            "{} of {streams} streams is less than one stream, so the ledger would verify \
             nothing; set at least {}",
            number(opts.sample),
            number(1.0 / streams as f64)
        ),
    ))
}

/// Refuses late and churning users when the driver cannot fetch what a user missed while
/// offline: those messages would be reported as the server's loss.
fn missed_messages(
    src: &Source<'_>,
    spec: &Spanned<PopulationSpec>,
    pop: &Pop,
    target: &Target,
) -> Result<()> {
    if target.caps.fetch_missed {
        return Ok(());
    }
    let p = spec.get_ref();
    let (key, span) = match (&p.late, &p.churn) {
        (Some(l), _) if pop.late > 0 => ("population.late", l.span()),
        (_, Some(c)) if pop.churn > 0 => ("population.churn", c.span()),
        _ => return Ok(()),
    };
    let why = if target.driver.caps.fetch_missed {
        "as configured (see its options)"
    } else {
        "at all"
    };
    Err(src.error(
        span,
        key,
        format!(
            "driver `{}` cannot fetch the messages a user missed while offline {why}, so \
             late or churning users' messages would be reported as lost; remove `{key}`",
            target.driver.name
        ),
    ))
}

fn monitor(src: &Source<'_>, spec: Option<&MonitorSpec>) -> Result<MonitorOpts> {
    let Some(m) = spec else {
        return Ok(MonitorOpts::default());
    };
    let mut opts = MonitorOpts::default();
    for (i, p) in m.pids.iter().enumerate() {
        let pid = u32::try_from(*p.get_ref())
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| {
                src.at(
                    p,
                    format!("monitor.pids[{i}]"),
                    format!("must be a process id > 0, got {}", p.get_ref()),
                )
            })?;
        opts.pids.push(pid);
    }
    for (i, n) in m.names.iter().enumerate() {
        let name = n.get_ref().trim();
        if name.is_empty() || name.contains('/') {
            return Err(src.at(
                n,
                format!("monitor.names[{i}]"),
                "must be a process name as in /proc/PID/comm, e.g. \"mosquitto\"",
            ));
        }
        opts.names.push(name.to_owned());
    }
    for (i, u) in m.prometheus.iter().enumerate() {
        let key = format!("monitor.prometheus[{i}]");
        if !cfg!(feature = "prometheus") {
            return Err(src.at(
                u,
                key,
                "this msgstorm was built without scraping (feature `prometheus`)",
            ));
        }
        let url = u.get_ref().trim();
        let ok = url
            .parse::<http::Uri>()
            .is_ok_and(|uri| uri.scheme_str() == Some("http") && uri.host().is_some());
        if !ok {
            return Err(src.at(
                u,
                key,
                format!(
                    "`{url}` is not an http:// URL of a metrics page, e.g. \"http://127.0.0.1:9100/metrics\""
                ),
            ));
        }
        opts.prometheus.push(url.to_owned());
    }
    for (i, f) in m.series.iter().enumerate() {
        let filter = crate::scrape::SeriesFilter::parse(f.get_ref())
            .map_err(|why| src.at(f, format!("monitor.series[{i}]"), why))?;
        opts.series.push(filter);
    }
    Ok(opts)
}

fn population(src: &Source<'_>, spec: &Spanned<PopulationSpec>) -> Result<Pop> {
    let p = spec.get_ref();
    let users = match *p.users.get_ref() {
        n if n <= 0 => {
            return Err(src.at(
                &p.users,
                "population.users",
                format!("must be > 0, got {n}"),
            ))
        }
        n => u32::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_USERS)
            .ok_or_else(|| {
                src.at(
                    &p.users,
                    "population.users",
                    format!("must be at most {MAX_USERS}, got {n}"),
                )
            })?,
    };
    let first_id = match &p.first_id {
        Some(v) => u64::try_from(*v.get_ref()).map_err(|_| {
            src.at(
                v,
                "population.first_id",
                format!("must be ≥ 0, got {}", v.get_ref()),
            )
        })?,
        None => 0,
    };
    let phases = match (&p.login_rate, &p.arrival) {
        (Some(r), None) => {
            let rate = rate(src, r, "population.login_rate")?;
            vec![steady(Duration::from_secs(1), rate)]
        }
        (None, Some(a)) => phases(src, a)?,
        (None, None) => vec![steady(Duration::from_secs(1), LOGIN_RATE)],
        (Some(r), Some(_)) => return Err(src.at(
            r,
            "population.login_rate",
            "set either `login_rate` (one steady phase) or `arrival` (a list of phases), not both",
        )),
    };
    let (late, late_at) = match &p.late {
        Some(l) => {
            let n = share(
                src,
                &l.get_ref().fraction,
                &l.get_ref().count,
                users,
                "population.late",
                l,
            )?;
            (n, duration(src, &l.get_ref().at, "population.late.at")?)
        }
        None => (0, Duration::ZERO),
    };
    let (churn, churn_offline_at, churn_back_at) = match &p.churn {
        Some(c) => {
            let g = c.get_ref();
            let n = share(src, &g.fraction, &g.count, users, "population.churn", c)?;
            let offline_at = duration(src, &g.offline_at, "population.churn.offline_at")?;
            let back_at = duration(src, &g.back_at, "population.churn.back_at")?;
            (n, offline_at, back_at)
        }
        None => (0, Duration::ZERO, Duration::ZERO),
    };
    if late >= users {
        let l = p.late.as_ref().map_or(spec.span(), Spanned::span);
        return Err(src.error(
            l,
            "population.late",
            format!("all {users} users would be late; at least one must log in on time"),
        ));
    }
    if u64::from(late) + u64::from(churn) > u64::from(users) {
        let c = p.churn.as_ref().map_or(spec.span(), Spanned::span);
        return Err(src.error(
            c,
            "population.churn",
            format!(
                "{late} late + {churn} churning users > {users} users; late and churning users \
                 are disjoint, so their fractions must add up to at most 1"
            ),
        ));
    }
    let arrival = arrival::fit(&phases, users - late);
    let ramp_end = arrival::end(&arrival);
    if ramp_end > MAX_DURATION {
        let (key, span) = match (&p.login_rate, &p.arrival) {
            (Some(r), _) => ("population.login_rate", r.span()),
            (_, Some(a)) => ("population.arrival", a.span()),
            _ => ("population.users", p.users.span()),
        };
        return Err(src.error(
            span,
            key,
            format!(
                "logging in {} on-time users at this rate takes {}; the arrival must end \
                 within 30 days: raise the rate",
                users - late,
                show(ramp_end)
            ),
        ));
    }
    if let Some(l) = &p.late {
        let at = &l.get_ref().at;
        if at.get_ref().0 < ramp_end {
            return Err(src.at(
                at,
                "population.late.at",
                format!(
                    "{} is before the on-time users are all logged in ({}); late users log in \
                     after the arrival phases: set `at` ≥ {} or raise the arrival rate",
                    show(at.get_ref().0),
                    show(ramp_end),
                    show(ramp_end)
                ),
            ));
        }
    }
    if let Some(c) = &p.churn {
        let c = c.get_ref();
        if c.offline_at.get_ref().0 < ramp_end {
            return Err(src.at(
                &c.offline_at,
                "population.churn.offline_at",
                format!(
                    "{} is before the on-time users are all logged in ({}); set it ≥ {}",
                    show(churn_offline_at),
                    show(ramp_end),
                    show(ramp_end)
                ),
            ));
        }
        if churn_back_at <= churn_offline_at {
            return Err(src.at(
                &c.back_at,
                "population.churn.back_at",
                format!(
                    "must be after `offline_at` ({}), got {}",
                    show(churn_offline_at),
                    show(churn_back_at)
                ),
            ));
        }
    }
    Ok(Pop {
        users,
        prefix: p
            .prefix
            .as_ref()
            .map_or("u".into(), |s| s.get_ref().clone()),
        first_id,
        arrival,
        late,
        late_at,
        churn,
        churn_offline_at,
        churn_back_at,
    })
}

fn steady(duration: Duration, rate: f64) -> ArrivalPhase {
    ArrivalPhase {
        duration,
        rate_from: rate,
        rate_to: rate,
    }
}

fn phases(
    src: &Source<'_>,
    list: &Spanned<Vec<Spanned<super::schema::PhaseSpec>>>,
) -> Result<Vec<ArrivalPhase>> {
    if list.get_ref().is_empty() {
        return Err(src.at(
            list,
            "population.arrival",
            "needs at least one phase, e.g. `[{ duration = \"10s\", rate = 100 }]`",
        ));
    }
    let mut out = Vec::new();
    for (i, ph) in list.get_ref().iter().enumerate() {
        let key = |k: &str| format!("population.arrival[{i}].{k}");
        let p = ph.get_ref();
        let duration = positive_dur(src, &p.duration, &key("duration"))?;
        let (from, to) = match (&p.rate, &p.from, &p.to) {
            (Some(r), None, None) => {
                let r = rate(src, r, &key("rate"))?;
                (r, r)
            }
            (None, Some(f), Some(t)) => (rate(src, f, &key("from"))?, rate(src, t, &key("to"))?),
            _ => {
                return Err(src.at(
                    ph,
                    format!("population.arrival[{i}]"),
                    "a phase is `{ duration, rate }` (steady) or `{ duration, from, to }` (ramp)",
                ))
            }
        };
        out.push(ArrivalPhase {
            duration,
            rate_from: from,
            rate_to: to,
        });
    }
    Ok(out)
}

/// `fraction` or `count` of `users` (exactly one), rounded down.
fn share<T>(
    src: &Source<'_>,
    fraction: &Option<Spanned<f64>>,
    count: &Option<Spanned<i64>>,
    users: u32,
    key: &str,
    parent: &Spanned<T>,
) -> Result<u32> {
    match (fraction, count) {
        (Some(f), None) => {
            let v = unit(src, f, &format!("{key}.fraction"))?;
            Ok((v * f64::from(users)).floor() as u32)
        }
        (None, Some(c)) => {
            let n = *c.get_ref();
            u32::try_from(n)
                .ok()
                .filter(|&n| n <= users)
                .ok_or_else(|| {
                    src.at(
                        c,
                        format!("{key}.count"),
                        format!("must be in 0..={users} (the users), got {n}"),
                    )
                })
        }
        (Some(f), Some(_)) => Err(src.at(f, key, "set either `fraction` or `count`, not both")),
        (None, None) => Err(src.at(
            parent,
            key,
            "needs `fraction` (e.g. 0.2) or `count` (e.g. 100)",
        )),
    }
}

fn ledger(src: &Source<'_>, spec: Option<&LedgerSpec>) -> Result<LedgerOpts> {
    let mut opts = LedgerOpts {
        sample: 1.0,
        late_after: Duration::from_secs(5),
        examples: 10,
        verify_sync: true,
    };
    let Some(l) = spec else { return Ok(opts) };
    if let Some(s) = &l.sample {
        let v = unit(src, s, "ledger.sample")?;
        if v == 0.0 {
            return Err(src.at(
                s,
                "ledger.sample",
                "must be > 0 (1.0 tracks every stream), got 0",
            ));
        }
        opts.sample = v;
    }
    if let Some(d) = &l.late_after {
        opts.late_after = positive_dur(src, d, "ledger.late_after")?;
    }
    if let Some(e) = &l.examples {
        opts.examples = usize::try_from(*e.get_ref())
            .ok()
            .filter(|&n| n <= MAX_EXAMPLES)
            .ok_or_else(|| {
                src.at(
                    e,
                    "ledger.examples",
                    format!("must be in 0..={MAX_EXAMPLES}, got {}", e.get_ref()),
                )
            })?;
    }
    if let Some(v) = &l.verify_sync {
        opts.verify_sync = *v.get_ref();
    }
    Ok(opts)
}

fn checks(src: &Source<'_>, spec: Option<&ChecksSpec>) -> Result<Vec<Check>> {
    let Some(c) = spec else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let mut push = |key: &str, metric, bound| {
        out.push(Check {
            key: format!("checks.{key}"),
            metric,
            bound,
        })
    };
    let counts = [
        ("max_lost", &c.max_lost, CheckMetric::Lost),
        ("max_duplicated", &c.max_duplicated, CheckMetric::Duplicated),
        ("max_reordered", &c.max_reordered, CheckMetric::Reordered),
        ("max_corrupted", &c.max_corrupted, CheckMetric::Corrupted),
        ("max_late", &c.max_late, CheckMetric::Late),
        (
            "max_protocol_errors",
            &c.max_protocol_errors,
            CheckMetric::ProtocolErrors,
        ),
        ("max_foreign", &c.max_foreign, CheckMetric::Foreign),
        (
            "max_join_failures",
            &c.max_join_failures,
            CheckMetric::JoinFailures,
        ),
    ];
    for (key, v, metric) in counts {
        if let Some(v) = v {
            if *v.get_ref() < 0 {
                return Err(src.at(
                    v,
                    format!("checks.{key}"),
                    format!("must be ≥ 0, got {}", v.get_ref()),
                ));
            }
            push(key, metric, Bound::AtMost(*v.get_ref() as f64));
        }
    }
    let latencies = [
        ("e2e_p99", &c.e2e_p99, CheckMetric::E2eP99),
        ("ack_p99", &c.ack_p99, CheckMetric::AckP99),
        ("request_p99", &c.request_p99, CheckMetric::RequestP99),
    ];
    for (key, v, metric) in latencies {
        if let Some(v) = v {
            let d = positive_dur(src, v, &format!("checks.{key}"))?;
            push(key, metric, Bound::AtMost(d.as_secs_f64() * 1e6));
        }
    }
    if let Some(v) = &c.min_login_success {
        push(
            "min_login_success",
            CheckMetric::LoginSuccess,
            Bound::AtLeast(unit(src, v, "checks.min_login_success")?),
        );
    }
    let fractions = [
        (
            "max_send_error_rate",
            &c.max_send_error_rate,
            CheckMetric::SendErrorRate,
        ),
        (
            "max_repaired_rate",
            &c.max_repaired_rate,
            CheckMetric::RepairedRate,
        ),
    ];
    for (key, v, metric) in fractions {
        if let Some(v) = v {
            push(
                key,
                metric,
                Bound::AtMost(unit(src, v, &format!("checks.{key}"))?),
            );
        }
    }
    if let Some(v) = &c.min_verified {
        push(
            "min_verified",
            CheckMetric::Verified,
            Bound::AtLeast(unit(src, v, "checks.min_verified")?),
        );
    }
    Ok(out)
}

/// A count in `1..=u32::MAX`.
pub fn count(src: &Source<'_>, v: &Spanned<i64>, key: &str) -> Result<u32> {
    let n = *v.get_ref();
    if n <= 0 {
        return Err(src.at(v, key, format!("must be > 0, got {n}")));
    }
    u32::try_from(n).map_err(|_| src.at(v, key, format!("must be at most {}, got {n}", u32::MAX)))
}

/// A rate in [`MIN_RATE`]`..=`[`MAX_RATE`] per second.
pub fn rate(src: &Source<'_>, v: &Spanned<f64>, key: &str) -> Result<f64> {
    let x = *v.get_ref();
    if !(MIN_RATE..=MAX_RATE).contains(&x) {
        return Err(src.at(
            v,
            key,
            format!(
                "must be a rate in {MIN_RATE}..={MAX_RATE} per second, got {}",
                number(x)
            ),
        ));
    }
    Ok(x)
}

/// A fraction in `0..=1`.
pub fn unit(src: &Source<'_>, v: &Spanned<f64>, key: &str) -> Result<f64> {
    let x = *v.get_ref();
    if !(0.0..=1.0).contains(&x) {
        return Err(src.at(
            v,
            key,
            format!("must be a fraction in 0..=1, got {}", number(x)),
        ));
    }
    Ok(x)
}

/// A duration of at most [`MAX_DURATION`].
pub fn duration(src: &Source<'_>, v: &Spanned<Dur>, key: &str) -> Result<Duration> {
    let d = v.get_ref().0;
    if d > MAX_DURATION {
        return Err(src.at(v, key, format!("must be at most 30 days, got {}", show(d))));
    }
    Ok(d)
}

/// A duration > 0 and at most [`MAX_DURATION`].
pub fn positive_dur(src: &Source<'_>, v: &Spanned<Dur>, key: &str) -> Result<Duration> {
    let d = duration(src, v, key)?;
    if d.is_zero() {
        return Err(src.at(v, key, "must be longer than 0s"));
    }
    Ok(d)
}

/// A duration in `min..=`[`MAX_DURATION`].
pub fn at_least(src: &Source<'_>, v: &Spanned<Dur>, key: &str, min: Duration) -> Result<Duration> {
    let d = duration(src, v, key)?;
    if d < min {
        return Err(src.at(
            v,
            key,
            format!("must be at least {}, got {}", show(min), show(d)),
        ));
    }
    Ok(d)
}

/// `target.heartbeat`: `0s` (none) or [`MIN_HEARTBEAT`]`..=`[`MAX_DURATION`].
pub fn heartbeat(src: &Source<'_>, v: &Spanned<Dur>) -> Result<Option<Duration>> {
    if v.get_ref().0.is_zero() {
        return Ok(None);
    }
    at_least(src, v, "target.heartbeat", MIN_HEARTBEAT).map(Some)
}

/// A number as people read it: `0.5`, `1e-300` (not three hundred zeros).
fn number(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A duration as people write it: `12.5s`, `200ms`, `2µs`.
pub fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) && !d.is_zero() {
        format!("{}µs", (d.as_secs_f64() * 1e6 * 1000.0).round() / 1000.0)
    } else if d < Duration::from_secs(1) && !d.is_zero() {
        format!("{}ms", (d.as_secs_f64() * 1e3 * 1000.0).round() / 1000.0)
    } else {
        format!("{}s", (d.as_secs_f64() * 1000.0).round() / 1000.0)
    }
}
