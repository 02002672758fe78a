//! `[[chaos]]`: fault steps during the load — processes killed, paused or restarted, a
//! user's command, connections cut, the network between the users and the target slowed
//! or stopped — checked here into [`ChaosStep`]s (`docs/chaos.md`).

use std::ops::Range;
use std::time::Duration;

use fastrand::Rng;
use toml::Spanned;

use super::chaos_step::{ChaosAction, ChaosStep, NetFault, Origin, ProcRef};
use super::draw::mix;
use super::schema::{ChaosSpec, Opt};
use super::source::{unknown_among, Source};
use super::traffic::Pattern;
use super::values::{duration, positive, show, unit};
use crate::Result;

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
    /// The scenario's `[monitor]` processes (a step may name one of them).
    pub monitor: &'a super::plan::MonitorOpts,
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
    let one = One {
        src,
        key: format!("chaos[{i}]"),
        s: spec.get_ref(),
        span: spec.span(),
    };
    let name = one.name()?;
    one.keys(name)?;
    let timed = matches!(name, "pause" | "delay" | "loss" | "bandwidth" | "blackhole");
    let length = match &one.s.duration {
        Some(d) => src.value(d, one.k("duration"), positive)?,
        None if timed => {
            return Err(one.needs(name, "duration", "how long it lasts, e.g. \"10s\""))
        }
        None => Duration::ZERO,
    };
    let action = match name {
        "kill" | "term" | "pause" | "restart" => one.process_action(name, cx)?,
        "exec" => ChaosAction::Exec(one.required(
            name,
            "command",
            &one.s.command,
            "what to run, by `sh -c`",
        )?),
        _ => one.net_action(name)?,
    };
    one.carried(name, &action, cx)?;
    let at = when(
        src,
        &|n| one.k(n),
        one.s,
        length,
        (cx.seed, i, one.span.clone()),
    )?;
    let step = ChaosStep {
        key: one.key.clone(),
        action,
        at,
        duration: length,
        max_lost: bound(src, &one.k("max_lost"), &one.s.max_lost)?,
        max_duplicated: bound(src, &one.k("max_duplicated"), &one.s.max_duplicated)?,
    };
    one.within(&step, end)?;
    Ok(step)
}

/// One `[[chaos]]` entry being checked.
struct One<'a> {
    src: &'a Source<'a>,
    key: String,
    s: &'a ChaosSpec,
    span: Range<usize>,
}

impl One<'_> {
    /// `chaos[i].name`.
    fn k(&self, name: &str) -> String {
        format!("{}.{name}", self.key)
    }

    /// The action's name, one of [`ACTIONS`].
    fn name(&self) -> Result<&str> {
        let name = self.s.action.get_ref().as_str();
        if ACTIONS.contains(&name) {
            Ok(name)
        } else {
            Err(self.src.at(
                &self.s.action,
                self.k("action"),
                unknown_among("action", name, &ACTIONS),
            ))
        }
    }

    /// Only the keys action `name` takes are present.
    fn keys(&self, name: &str) -> Result<()> {
        let allowed: &[&str] = match name {
            "kill" | "term" => &["pid", "process", "monitor"],
            "pause" => &["pid", "process", "monitor", "duration"],
            "restart" => &["pid", "process", "monitor", "start", "listen"],
            "exec" => &["command"],
            "cut" => &["fraction"],
            "delay" => &["duration", "delay", "jitter"],
            "loss" => &["duration", "fraction"],
            "bandwidth" => &["duration", "bandwidth"],
            _ => &["duration"],
        };
        match self
            .s
            .present()
            .into_iter()
            .find(|(p, _)| !allowed.contains(p))
        {
            Some((present, span)) => Err(self.src.error(
                span,
                self.k(present),
                format!(
                    "action `{name}` does not take `{present}` (it takes {})",
                    allowed.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// The error of a missing key.
    fn needs(&self, name: &str, what: &str, why: &str) -> crate::Error {
        self.src.error(
            self.span.clone(),
            self.k(what),
            format!("action `{name}` needs `{what}` ({why})"),
        )
    }

    /// A string key action `name` needs.
    fn required(&self, name: &str, what: &str, v: &Opt<String>, why: &str) -> Result<String> {
        text(self.src, &self.k(what), v)?.ok_or_else(|| self.needs(name, what, why))
    }

    /// A fraction key action `name` needs.
    fn fraction(&self, name: &str, why: &str) -> Result<f64> {
        match &self.s.fraction {
            Some(f) => self.src.value(f, self.k("fraction"), unit),
            None => Err(self.needs(name, "fraction", why)),
        }
    }

    /// `kill`, `term`, `pause`, `restart`.
    fn process_action(&self, name: &str, cx: &Context<'_>) -> Result<ChaosAction> {
        let process = process(self.src, &|n| self.k(n), self.s, self.span.clone(), cx)?;
        Ok(match name {
            "kill" => ChaosAction::Kill(process),
            "term" => ChaosAction::Term(process),
            "pause" => ChaosAction::Pause(process),
            _ => {
                let start = self.required(
                    name,
                    "start",
                    &self.s.start,
                    "the command that starts the process again",
                )?;
                let listen = match text(self.src, &self.k("listen"), &self.s.listen)? {
                    Some(l) => l,
                    None => cx.target_addr.clone().ok_or_else(|| {
                        self.src.error(
                            self.span.clone(),
                            self.k("listen"),
                            "a restart waits until the process listens again: give \
                             `listen = \"HOST:PORT\"` (the target has no URL to take it from)",
                        )
                    })?,
                };
                ChaosAction::Restart {
                    process,
                    start,
                    listen,
                }
            }
        })
    }

    /// `cut` and the network actions.
    fn net_action(&self, name: &str) -> Result<ChaosAction> {
        let s = self.s;
        Ok(match name {
            "cut" => {
                ChaosAction::Cut(self.fraction(name, "which share of the online users, e.g. 0.3")?)
            }
            "delay" => {
                let delay = match &s.delay {
                    Some(d) => self.src.value(d, self.k("delay"), positive)?,
                    None => return Err(self.needs(name, "delay", "how much, e.g. \"100ms\"")),
                };
                let jitter = s.jitter.as_ref().map_or(Ok(Duration::ZERO), |d| {
                    self.src.value(d, self.k("jitter"), duration)
                })?;
                ChaosAction::Net(NetFault::Delay { delay, jitter })
            }
            "loss" => ChaosAction::Net(NetFault::Loss(
                self.fraction(name, "the share of segments lost, e.g. 0.05")?,
            )),
            "bandwidth" => {
                let b = match &s.bandwidth {
                    Some(b) => bandwidth(b.get_ref())
                        .map_err(|why| self.src.at(b, self.k("bandwidth"), why))?,
                    None => {
                        return Err(self.needs(
                            name,
                            "bandwidth",
                            "bytes per second, e.g. \"256KiB/s\"",
                        ))
                    }
                };
                ChaosAction::Net(NetFault::Bandwidth(b))
            }
            _ => ChaosAction::Net(NetFault::Blackhole),
        })
    }

    /// An action on the users' connections needs connections msgstorm's proxy can carry.
    fn carried(&self, name: &str, action: &ChaosAction, cx: &Context<'_>) -> Result<()> {
        if !action.needs_proxy() {
            return Ok(());
        }
        let why = if cx.in_process {
            format!("action `{name}` acts on the users' TCP connections, and this driver has none")
        } else if cx.more_nodes {
            format!(
                "action `{name}` goes through msgstorm's proxy in front of `target.url`, and \
                 the driver's `urls` name more nodes it would not carry"
            )
        } else {
            return Ok(());
        };
        Err(self.src.at(&self.s.action, self.k("action"), why))
    }

    /// The step ends before the traffic does (when that end is known).
    fn within(&self, step: &ChaosStep, end: Option<Duration>) -> Result<()> {
        let Some(end) = end.filter(|&e| step.end() > e) else {
            return Ok(());
        };
        let s = self.s;
        let at =
            s.at.as_ref()
                .map(Spanned::span)
                .or(s.window.as_ref().map(Spanned::span));
        Err(self.src.error(
            at.unwrap_or_else(|| self.span.clone()),
            self.k(if s.window.is_some() { "window" } else { "at" }),
            format!(
                "the step ({} to {} after traffic starts) ends after the traffic ({})",
                show(step.at),
                show(step.end()),
                show(end)
            ),
        ))
    }
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
    cx: &Context<'_>,
) -> Result<ProcRef> {
    if let Some(m) = &s.monitor {
        if s.pid.is_some() || s.process.is_some() {
            return Err(src.at(m, k("monitor"), "give one of `pid`, `process`, `monitor`"));
        }
        return monitored(src, &k("monitor"), m, cx.monitor);
    }
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
            Ok(ProcRef::Pid(pid, origin(src.at(p, k("pid"), ""))))
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
            if name.starts_with("msgstorm") {
                return Err(src.at(
                    n,
                    k("process"),
                    "msgstorm's own processes (the generator, its shards) go by that name: \
                     give a `msgstorm serve` by its `pid`",
                ));
            }
            Ok(ProcRef::Name(
                name.to_owned(),
                origin(src.at(n, k("process"), "")),
            ))
        }
        (Some(p), Some(_)) => Err(src.at(p, k("pid"), "give `pid` or `process`, not both")),
        (None, None) => match &cx.target_addr {
            Some(addr) => Ok(ProcRef::Listening(
                addr.clone(),
                origin(src.error(span, k("action"), "")),
            )),
            None => Err(src.error(
                span,
                k("process"),
                "needs the process: `pid = N` or `process = \"NAME\"` (without them, the \
                 process listening on the target's address; this target has no URL)",
            )),
        },
    }
}

/// `monitor = "NAME"` or `monitor = PID`: one of the `[monitor]` entries.
fn monitored(
    src: &Source<'_>,
    key: &str,
    m: &Spanned<toml::Value>,
    monitor: &super::plan::MonitorOpts,
) -> Result<ProcRef> {
    let at = origin(src.at(m, key, ""));
    match m.get_ref() {
        toml::Value::String(n) if monitor.names.iter().any(|x| x == n) => {
            Ok(ProcRef::Name(n.clone(), at))
        }
        toml::Value::Integer(p) if u32::try_from(*p).is_ok_and(|p| monitor.pids.contains(&p)) => {
            Ok(ProcRef::Pid(*p as u32, at))
        }
        other => Err(src.at(
            m,
            key,
            format!(
                "{other} is none of `[monitor]`'s entries (names {:?}, pids {:?})",
                monitor.names, monitor.pids
            ),
        )),
    }
}

/// Where a key is, for an error found at run time: (file, line, key).
fn origin(e: crate::Error) -> Origin {
    match e {
        crate::Error::Scenario {
            file, line, key, ..
        } => Origin { file, line, key },
        _ => Origin::default(),
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
