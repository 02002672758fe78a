//! `[[chaos]]`: fault steps during the load — processes killed, paused or restarted, a
//! user's command, connections cut, the network between the users and the target slowed
//! or stopped — checked here into [`ChaosStep`]s (`docs/chaos.md`).

use std::ops::Range;
use std::time::Duration;

use fastrand::Rng;
use toml::Spanned;

use super::draw::mix;
use super::schema::{ChaosSpec, Opt};
use super::source::{unknown_among, Source};
use super::traffic::Pattern;
use super::values::{duration, positive, show, unit};
use crate::Result;

/// A process a step acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcRef {
    /// By process id.
    Pid(u32),
    /// By name, as in `/proc/PID/comm` (every process of that name).
    Name(String),
}

impl std::fmt::Display for ProcRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcRef::Pid(p) => write!(f, "pid {p}"),
            ProcRef::Name(n) => write!(f, "`{n}`"),
        }
    }
}

/// What the network between the users and the target does during a step (msgstorm's
/// own TCP proxy carries every connection when a scenario has one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NetFault {
    /// Every chunk is held this long (plus up to `jitter`, order kept).
    Delay {
        /// Added one-way delay.
        delay: Duration,
        /// Extra delay, uniform in `0..=jitter`.
        jitter: Duration,
    },
    /// Each chunk, with this probability, is held for one TCP retransmission timeout
    /// ([`RETRANSMIT_TIMEOUT`]) — what a lost segment costs a TCP connection — with everything
    /// behind it on the connection.
    Loss(f64),
    /// At most this many bytes per second each way, per connection.
    Bandwidth(u64),
    /// Nothing passes; connections stay open and what was held passes after the step.
    Blackhole,
}

/// What a lost segment costs: Linux's minimum retransmission timeout.
pub const RETRANSMIT_TIMEOUT: Duration = Duration::from_millis(200);

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum ChaosAction {
    /// SIGKILL.
    Kill(ProcRef),
    /// SIGTERM.
    Term(ProcRef),
    /// SIGSTOP for the step's duration, then SIGCONT.
    Pause(ProcRef),
    /// SIGKILL, then `start` run again (by `sh -c`), waiting until `listen` accepts.
    Restart {
        /// The process.
        process: ProcRef,
        /// The command that starts it.
        start: String,
        /// `host:port` it listens on once up.
        listen: String,
    },
    /// A command (by `sh -c`), its exit code and output kept.
    Exec(String),
    /// This fraction of the online users lose their connection abruptly.
    Cut(f64),
    /// The network misbehaves for the step's duration.
    Net(NetFault),
}

impl ChaosAction {
    /// The action's name as written.
    pub fn name(&self) -> &'static str {
        match self {
            ChaosAction::Kill(_) => "kill",
            ChaosAction::Term(_) => "term",
            ChaosAction::Pause(_) => "pause",
            ChaosAction::Restart { .. } => "restart",
            ChaosAction::Exec(_) => "exec",
            ChaosAction::Cut(_) => "cut",
            ChaosAction::Net(NetFault::Delay { .. }) => "delay",
            ChaosAction::Net(NetFault::Loss(_)) => "loss",
            ChaosAction::Net(NetFault::Bandwidth(_)) => "bandwidth",
            ChaosAction::Net(NetFault::Blackhole) => "blackhole",
        }
    }

    /// Whether the users' connections must go through msgstorm's proxy for it.
    pub fn needs_proxy(&self) -> bool {
        matches!(self, ChaosAction::Net(_) | ChaosAction::Cut(_))
    }
}

/// One checked `[[chaos]]` step.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaosStep {
    /// Its key, `chaos[i]`.
    pub key: String,
    /// What it does.
    pub action: ChaosAction,
    /// When, from traffic start (drawn from `window` with the seed when given so).
    pub at: Duration,
    /// How long it lasts (zero for an instant action).
    pub duration: Duration,
    /// Per-step bound on messages due in the step's window or in its recovery that were
    /// lost.
    pub max_lost: Option<u64>,
    /// The same for duplicated deliveries.
    pub max_duplicated: Option<u64>,
}

impl ChaosStep {
    /// When it ends, from traffic start.
    pub fn end(&self) -> Duration {
        self.at + self.duration
    }
}

/// The actions, as written.
const ACTIONS: [&str; 10] = [
    "kill",
    "term",
    "pause",
    "restart",
    "exec",
    "cut",
    "delay",
    "loss",
    "bandwidth",
    "blackhole",
];

/// How a `restart` waits for the process to listen again, at most.
pub const RESTART_WAIT: Duration = Duration::from_secs(30);

/// What the checks of [`steps`] need to know about the rest of the scenario.
pub struct Context<'a> {
    /// The scenario's seed.
    pub seed: u64,
    /// The traffic patterns (the steps must fall inside them).
    pub traffic: &'a [Pattern],
    /// The target's `host:port`, when it has a URL.
    pub target_addr: Option<String>,
    /// The driver's own table lists more nodes (`urls`): a proxy in front of `target.url`
    /// would not carry them.
    pub more_nodes: bool,
    /// The driver talks to nothing over TCP (`loopback`).
    pub in_process: bool,
}

/// Checks every `[[chaos]]` step.
pub fn steps(
    src: &Source<'_>,
    specs: &[Spanned<ChaosSpec>],
    cx: &Context<'_>,
) -> Result<Vec<ChaosStep>> {
    let end = traffic_end(cx.traffic);
    let steps = specs
        .iter()
        .enumerate()
        .map(|(i, s)| step(src, i, s, cx, end))
        .collect::<Result<Vec<ChaosStep>>>()?;
    // One proxy, one condition at a time: two network steps may not overlap.
    let net: Vec<(usize, &ChaosStep)> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.action, ChaosAction::Net(_)))
        .collect();
    for (n, &(j, b)) in net.iter().enumerate() {
        if let Some(&(_, a)) = net[..n]
            .iter()
            .find(|(_, a)| a.at < b.end() && b.at < a.end())
        {
            return Err(src.error(
                specs[j].span(),
                format!("{}.at", b.key),
                format!(
                    "overlaps {} ({} to {}): network steps take turns",
                    a.key,
                    show(a.at),
                    show(a.end())
                ),
            ));
        }
    }
    Ok(steps)
}

/// When the traffic ends, from its start, if every pattern has a duration.
fn traffic_end(traffic: &[Pattern]) -> Option<Duration> {
    traffic
        .iter()
        .map(|p| p.duration.map(|d| p.start + d))
        .try_fold(Duration::ZERO, |end, e| e.map(|e| end.max(e)))
}

fn step(
    src: &Source<'_>,
    i: usize,
    spec: &Spanned<ChaosSpec>,
    cx: &Context<'_>,
    end: Option<Duration>,
) -> Result<ChaosStep> {
    let key = format!("chaos[{i}]");
    let k = |name: &str| format!("{key}.{name}");
    let s = spec.get_ref();
    let name = s.action.get_ref().as_str();
    if !ACTIONS.contains(&name) {
        return Err(src.at(
            &s.action,
            k("action"),
            unknown_among("action", name, &ACTIONS),
        ));
    }
    let allowed: &[&str] = match name {
        "kill" | "term" => &["pid", "process"],
        "pause" => &["pid", "process", "duration"],
        "restart" => &["pid", "process", "start", "listen"],
        "exec" => &["command"],
        "cut" => &["fraction"],
        "delay" => &["duration", "delay", "jitter"],
        "loss" => &["duration", "fraction"],
        "bandwidth" => &["duration", "bandwidth"],
        _ => &["duration"],
    };
    for (present, span) in s.present() {
        if !allowed.contains(&present) {
            let takes = if allowed.is_empty() {
                "no other keys".to_owned()
            } else {
                allowed.join(", ")
            };
            return Err(src.error(
                span,
                k(present),
                format!("action `{name}` does not take `{present}` (it takes {takes})"),
            ));
        }
    }
    let span = || spec.span();
    let need = |o: bool, what: &str, why: &str| -> Result<()> {
        if o {
            Ok(())
        } else {
            Err(src.error(
                span(),
                k(what),
                format!("action `{name}` needs `{what}` ({why})"),
            ))
        }
    };
    let timed = matches!(name, "pause" | "delay" | "loss" | "bandwidth" | "blackhole");
    let length = match &s.duration {
        Some(d) => src.value(d, k("duration"), positive)?,
        None if timed => {
            need(false, "duration", "how long it lasts, e.g. \"10s\"")?;
            Duration::ZERO
        }
        None => Duration::ZERO,
    };
    let action = match name {
        "kill" | "term" | "pause" | "restart" => {
            let process = process(src, &k, s, span())?;
            match name {
                "kill" => ChaosAction::Kill(process),
                "term" => ChaosAction::Term(process),
                "pause" => ChaosAction::Pause(process),
                _ => {
                    let start = text(src, &k("start"), &s.start)?;
                    need(
                        start.is_some(),
                        "start",
                        "the command that starts the process again",
                    )?;
                    let listen = match text(src, &k("listen"), &s.listen)? {
                        Some(l) => l,
                        None => cx.target_addr.clone().ok_or_else(|| {
                            src.error(
                                span(),
                                k("listen"),
                                "a restart waits until the process listens again: give \
                                 `listen = \"HOST:PORT\"` (the target has no URL to take it from)",
                            )
                        })?,
                    };
                    ChaosAction::Restart {
                        process,
                        start: start.unwrap_or_default(),
                        listen,
                    }
                }
            }
        }
        "exec" => {
            let command = text(src, &k("command"), &s.command)?;
            need(command.is_some(), "command", "what to run, by `sh -c`")?;
            ChaosAction::Exec(command.unwrap_or_default())
        }
        "cut" => {
            need(
                s.fraction.is_some(),
                "fraction",
                "which share of the online users, e.g. 0.3",
            )?;
            let f = s
                .fraction
                .as_ref()
                .map_or(Ok(0.0), |f| src.value(f, k("fraction"), unit))?;
            ChaosAction::Cut(f)
        }
        "delay" => {
            need(s.delay.is_some(), "delay", "how much, e.g. \"100ms\"")?;
            let delay = s
                .delay
                .as_ref()
                .map_or(Ok(Duration::ZERO), |d| src.value(d, k("delay"), positive))?;
            let jitter = s
                .jitter
                .as_ref()
                .map_or(Ok(Duration::ZERO), |d| src.value(d, k("jitter"), duration))?;
            ChaosAction::Net(NetFault::Delay { delay, jitter })
        }
        "loss" => {
            need(
                s.fraction.is_some(),
                "fraction",
                "the share of segments lost, e.g. 0.05",
            )?;
            let f = s
                .fraction
                .as_ref()
                .map_or(Ok(0.0), |f| src.value(f, k("fraction"), unit))?;
            ChaosAction::Net(NetFault::Loss(f))
        }
        "bandwidth" => {
            need(
                s.bandwidth.is_some(),
                "bandwidth",
                "bytes per second, e.g. \"256KiB/s\"",
            )?;
            let b = s.bandwidth.as_ref().map_or(Ok(0), |b| {
                bandwidth(b.get_ref()).map_err(|why| src.at(b, k("bandwidth"), why))
            })?;
            ChaosAction::Net(NetFault::Bandwidth(b))
        }
        _ => ChaosAction::Net(NetFault::Blackhole),
    };
    if action.needs_proxy() {
        if cx.in_process {
            return Err(src.at(
                &s.action,
                k("action"),
                format!(
                    "action `{name}` acts on the users' TCP connections, and this driver has none"
                ),
            ));
        }
        if cx.more_nodes {
            return Err(src.at(
                &s.action,
                k("action"),
                format!(
                    "action `{name}` goes through msgstorm's proxy in front of `target.url`, \
                     and the driver's `urls` name more nodes it would not carry"
                ),
            ));
        }
    }
    let at = when(src, &k, s, length, (cx.seed, i, span()))?;
    let step = ChaosStep {
        key: key.clone(),
        action,
        at,
        duration: length,
        max_lost: bound(src, &k("max_lost"), &s.max_lost)?,
        max_duplicated: bound(src, &k("max_duplicated"), &s.max_duplicated)?,
    };
    if let Some(end) = end {
        if step.end() > end {
            let at_span =
                s.at.as_ref()
                    .map(Spanned::span)
                    .or(s.window.as_ref().map(Spanned::span));
            return Err(src.error(
                at_span.unwrap_or_else(span),
                k(if s.window.is_some() { "window" } else { "at" }),
                format!(
                    "the step ({} to {} after traffic starts) ends after the traffic ({})",
                    show(step.at),
                    show(step.end()),
                    show(end)
                ),
            ));
        }
    }
    Ok(step)
}

/// When the steps begin and end, µs from traffic start: sorted, distinct.
pub fn bounds_us(steps: &[ChaosStep]) -> Vec<u64> {
    let mut b: Vec<u64> = steps
        .iter()
        .flat_map(|s| [s.at, s.end()])
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .collect();
    b.sort_unstable();
    b.dedup();
    b
}

/// `pid` or `process`: exactly one, naming a process on this host now.
fn process(
    src: &Source<'_>,
    k: &dyn Fn(&str) -> String,
    s: &ChaosSpec,
    span: Range<usize>,
) -> Result<ProcRef> {
    match (&s.pid, &s.process) {
        (Some(p), None) => {
            let pid = u32::try_from(*p.get_ref())
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| {
                    src.at(
                        p,
                        k("pid"),
                        format!("must be a process id > 0, got {}", p.get_ref()),
                    )
                })?;
            if !crate::chaos::process::exists(pid) {
                return Err(src.at(p, k("pid"), format!("no process {pid} on this host")));
            }
            Ok(ProcRef::Pid(pid))
        }
        (None, Some(n)) => {
            let name = n.get_ref().trim();
            if name.is_empty() || name.contains('/') {
                return Err(src.at(
                    n,
                    k("process"),
                    "must be a process name as in /proc/PID/comm, e.g. \"mosquitto\"",
                ));
            }
            if crate::chaos::process::named(name).is_empty() {
                return Err(src.at(
                    n,
                    k("process"),
                    format!("no process named `{name}` on this host"),
                ));
            }
            Ok(ProcRef::Name(name.to_owned()))
        }
        (Some(p), Some(_)) => Err(src.at(p, k("pid"), "give `pid` or `process`, not both")),
        (None, None) => Err(src.error(
            span,
            k("process"),
            "needs the process: `pid = N` or `process = \"NAME\"`",
        )),
    }
}

/// A non-empty string key.
fn text(src: &Source<'_>, key: &str, v: &Opt<String>) -> Result<Option<String>> {
    match v {
        Some(t) if t.get_ref().trim().is_empty() => Err(src.at(t, key, "must not be empty")),
        Some(t) => Ok(Some(t.get_ref().trim().to_owned())),
        None => Ok(None),
    }
}

/// A count bound ≥ 0.
fn bound(src: &Source<'_>, key: &str, v: &Opt<i64>) -> Result<Option<u64>> {
    v.as_ref()
        .map(|b| {
            u64::try_from(*b.get_ref())
                .map_err(|_| src.at(b, key, format!("must be ≥ 0, got {}", b.get_ref())))
        })
        .transpose()
}

/// When the step starts: `at`, or a seeded time inside `window` that leaves room for its
/// duration.
fn when(
    src: &Source<'_>,
    k: &dyn Fn(&str) -> String,
    s: &ChaosSpec,
    length: Duration,
    (seed, i, span): (u64, usize, Range<usize>),
) -> Result<Duration> {
    match (&s.at, &s.window) {
        (Some(at), None) => src.value(at, k("at"), duration),
        (None, Some(w)) => {
            let [from, to] = w.get_ref().as_slice() else {
                return Err(src.at(
                    w,
                    k("window"),
                    "must be two durations, e.g. [\"10s\", \"30s\"]",
                ));
            };
            let (from, to) = (duration(*from), duration(*to));
            let (from, to) = (
                from.map_err(|why| src.at(w, k("window"), why))?,
                to.map_err(|why| src.at(w, k("window"), why))?,
            );
            if to < from + length {
                return Err(src.at(
                    w,
                    k("window"),
                    format!(
                        "from {} to {} leaves no room for the step's {}",
                        show(from),
                        show(to),
                        show(length)
                    ),
                ));
            }
            let room = (to - from - length).as_micros() as u64;
            let mut rng = Rng::with_seed(mix(seed, 0xC4A0_5000 + i as u64));
            Ok(from + Duration::from_micros(rng.u64(0..=room)))
        }
        (Some(at), Some(_)) => Err(src.at(at, k("at"), "give `at` or `window`, not both")),
        (None, None) => Err(src.error(
            span,
            k("at"),
            "needs `at = \"20s\"` (from traffic start) or `window = [\"10s\", \"30s\"]`",
        )),
    }
}

/// `"256KiB/s"`, `"1MB/s"`, `"1000B/s"`: bytes per second.
fn bandwidth(text: &str) -> std::result::Result<u64, String> {
    let bad =
        || format!("`{text}` is not a bandwidth: use e.g. \"256KiB/s\", \"1MB/s\", \"64000B/s\"");
    let t = text.trim().strip_suffix("/s").ok_or_else(bad)?.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: f64 = n.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "B" => 1.0,
        "KB" | "kB" => 1e3,
        "KiB" => 1024.0,
        "MB" => 1e6,
        "MiB" => 1024.0 * 1024.0,
        "GB" => 1e9,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = (n * scale).round();
    if !(1.0..=1e12).contains(&bytes) {
        return Err(format!("must be 1 B/s to 1 TB/s, got {text}"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_read_in_bytes_per_second() {
        assert_eq!(bandwidth("256KiB/s"), Ok(262_144));
        assert_eq!(bandwidth("1MB/s"), Ok(1_000_000));
        assert_eq!(bandwidth("64000B/s"), Ok(64_000));
        assert_eq!(bandwidth("1.5 MiB/s"), Ok(1_572_864));
        assert!(bandwidth("fast").is_err());
        assert!(bandwidth("10KiB").is_err(), "per second must be said");
        assert!(bandwidth("0B/s").is_err());
    }
}
