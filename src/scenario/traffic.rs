//! Validation of `[[traffic]]` patterns: each kind's keys, counts that the population can
//! supply, pacing (`interval` or `rate`) and stop conditions (`messages` and/or
//! `duration`).

use std::collections::HashMap;
use std::ops::Range;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::plan::RequestTraffic;
use super::schema::{Kind, Opt, Pick, TrafficSpec};
use super::source::Source;
use super::validate::{
    at_least, count, duration as dur, positive_dur, rate, show, Pop, MAX_DELIVERIES, MAX_DURATION,
    MAX_LISTED, MAX_PAIRS, MIN_INTERVAL,
};
use crate::driver::Spec;
use crate::Result;

/// Default body size, bytes.
const SIZE: usize = 100;
/// Largest body size, bytes.
const MAX_SIZE: usize = 64 << 20;
/// Keys every kind takes.
const COMMON: [&str; 4] = ["name", "kind", "start", "duration"];

/// A validated pattern: counts are checked, users are not chosen yet.
#[derive(Debug)]
pub struct Pattern {
    /// Name (unique in the plan).
    pub name: String,
    /// Start after all on-time users are in.
    pub start: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The kind with its numbers.
    pub kind: PatternKind,
}

/// Per-kind numbers of a [`Pattern`].
#[derive(Debug)]
pub enum PatternKind {
    /// 1:1 traffic.
    Direct {
        /// Sending users.
        senders: u32,
        /// Receiving users.
        receivers: u32,
        /// How both are chosen.
        pick: Pick,
        /// Messages per pair.
        messages: Option<u64>,
        /// Between two sends of one sender.
        interval: Duration,
        /// Body bytes.
        size: usize,
    },
    /// Group traffic.
    Group {
        /// Number of groups.
        groups: u32,
        /// Members per group.
        group_size: u32,
        /// Senders per group.
        senders_per_group: u32,
        /// Messages per sender.
        messages: Option<u64>,
        /// Between two sends of one sender.
        interval: Duration,
        /// Body bytes.
        size: usize,
    },
    /// Heartbeats only.
    Idle {
        /// Users that idle.
        users: u32,
        /// How they are chosen.
        pick: Pick,
    },
    /// Request/response, fully resolved.
    Request(RequestTraffic),
    /// Echo round trips.
    Echo {
        /// Connections that send.
        connections: u32,
        /// How they are chosen.
        pick: Pick,
        /// Between two sends on one connection.
        interval: Duration,
        /// Frame bytes.
        size: usize,
    },
}

/// Keys of `kind` besides [`COMMON`].
fn keys_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Direct => &[
            "pick",
            "senders",
            "receivers",
            "messages",
            "interval",
            "rate",
            "size",
        ],
        Kind::Group => &[
            "groups",
            "group_size",
            "senders_per_group",
            "messages",
            "interval",
            "rate",
            "size",
        ],
        Kind::Idle => &["pick", "users"],
        Kind::Request => &["request", "concurrency", "sweep", "step_duration"],
        Kind::Echo => &["pick", "connections", "interval", "rate", "size"],
    }
}

/// The keys a `[[traffic]]` entry at `path` (`traffic[i]`) may hold, given the `kind`
/// written in `root`; `None` when the kind is not known.
pub fn keys_at(root: &DeTable<'_>, path: &str) -> Option<Vec<&'static str>> {
    if path == "target" {
        return Some(super::target::target_keys());
    }
    let i: usize = path
        .strip_prefix("traffic[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    let DeValue::Array(list) = root.get("traffic")?.get_ref() else {
        return None;
    };
    let DeValue::Table(entry) = list.get(i)?.get_ref() else {
        return None;
    };
    let kind = entry.get("kind")?.get_ref().as_str()?;
    let kind = [
        Kind::Direct,
        Kind::Group,
        Kind::Idle,
        Kind::Request,
        Kind::Echo,
    ]
    .into_iter()
    .find(|k| k.as_str() == kind)?;
    let mut keys = COMMON.to_vec();
    keys.extend(keys_of(kind));
    Some(keys)
}

/// The optional keys present in `t`, with their spans.
fn present(t: &TrafficSpec) -> Vec<(&'static str, Range<usize>)> {
    fn add<T>(v: &mut Vec<(&'static str, Range<usize>)>, name: &'static str, o: &Opt<T>) {
        if let Some(x) = o {
            v.push((name, x.span()));
        }
    }
    let mut v = Vec::new();
    add(&mut v, "pick", &t.pick);
    add(&mut v, "senders", &t.senders);
    add(&mut v, "receivers", &t.receivers);
    add(&mut v, "messages", &t.messages);
    add(&mut v, "interval", &t.interval);
    add(&mut v, "rate", &t.rate);
    add(&mut v, "size", &t.size);
    add(&mut v, "groups", &t.groups);
    add(&mut v, "group_size", &t.group_size);
    add(&mut v, "senders_per_group", &t.senders_per_group);
    add(&mut v, "users", &t.users);
    add(&mut v, "request", &t.request);
    add(&mut v, "concurrency", &t.concurrency);
    add(&mut v, "sweep", &t.sweep);
    add(&mut v, "step_duration", &t.step_duration);
    add(&mut v, "connections", &t.connections);
    v
}

/// Validates every pattern against the population and the driver.
pub fn traffic(
    src: &Source<'_>,
    list: &[Spanned<TrafficSpec>],
    pop: &Pop,
    driver: &'static Spec,
) -> Result<Vec<Pattern>> {
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut streams: u64 = 0;
    let mut total = Load {
        listed: u64::from(pop.late) + u64::from(pop.churn),
        pairs: 0,
        deliveries: 0,
    };
    let mut out = Vec::new();
    for (i, spanned) in list.iter().enumerate() {
        let t = spanned.get_ref();
        let ctx = Ctx {
            src,
            i,
            t,
            spanned,
            pop,
        };
        let kind = *t.kind.get_ref();
        if !driver.kinds.contains(&kind.as_str()) {
            return Err(src.at(
                &t.kind,
                ctx.key("kind"),
                format!(
                    "kind `{}` is not supported by driver `{}`; it runs: {}",
                    kind.as_str(),
                    driver.name,
                    driver.kinds.join(", ")
                ),
            ));
        }
        for (k, span) in present(t) {
            if !keys_of(kind).contains(&k) {
                let mut allowed: Vec<&str> = COMMON.to_vec();
                allowed.extend(keys_of(kind));
                return Err(src.error(
                    span,
                    ctx.key(k),
                    format!(
                        "`{k}` does not apply to kind `{}`; its keys: {}",
                        kind.as_str(),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let name = t
            .name
            .as_ref()
            .map_or(format!("traffic[{i}]"), |n| n.get_ref().clone());
        if let Some(first) = names.insert(name.clone(), i) {
            let n = t.name.as_ref().map_or(spanned.span(), Spanned::span);
            return Err(src.error(
                n,
                ctx.key("name"),
                format!("`{name}` is already the name of traffic[{first}]"),
            ));
        }
        let start = match &t.start {
            Some(s) => dur(src, s, &ctx.key("start"))?,
            None => Duration::ZERO,
        };
        let mut duration = match &t.duration {
            Some(d) => Some(positive_dur(src, d, &ctx.key("duration"))?),
            None => None,
        };
        let kind = match kind {
            Kind::Direct => {
                let senders = ctx.steady_count(&t.senders, "senders", "sending users")?;
                let receivers = ctx.required(&t.receivers, "receivers", "receiving users")?;
                if u64::from(senders) + u64::from(receivers) > u64::from(pop.users) {
                    return Err(ctx.at(
                        &t.receivers,
                        "receivers",
                        format!(
                            "senders and receivers are distinct users: {senders} + {receivers} > {} users",
                            pop.users
                        ),
                    ));
                }
                streams += u64::from(senders) * u64::from(receivers);
                let messages = ctx.messages(duration)?;
                let interval = ctx.pace(senders, "senders")?;
                let sends = messages.map(|m| m * u64::from(receivers));
                ctx.send_span(sends, interval, duration, "receivers × ")?;
                PatternKind::Direct {
                    senders,
                    receivers,
                    pick: ctx.pick(),
                    messages,
                    interval,
                    size: ctx.size()?,
                }
            }
            Kind::Group => {
                let groups = ctx.required(&t.groups, "groups", "number of groups")?;
                let group_size = ctx.required(&t.group_size, "group_size", "members per group")?;
                if group_size > pop.users {
                    return Err(ctx.at(
                        &t.group_size,
                        "group_size",
                        format!(
                            "groups of {group_size} need that many users; there are {}",
                            pop.users
                        ),
                    ));
                }
                let spg = match &t.senders_per_group {
                    Some(_) => ctx.steady_count(&t.senders_per_group, "senders_per_group", "")?,
                    None => 1,
                };
                if spg > group_size {
                    return Err(ctx.at(
                        &t.senders_per_group,
                        "senders_per_group",
                        format!("{spg} senders in groups of {group_size}: senders are members"),
                    ));
                }
                streams += u64::from(groups) * u64::from(spg);
                let messages = ctx.messages(duration)?;
                let interval =
                    ctx.pace(groups.saturating_mul(spg), "groups × senders_per_group")?;
                ctx.send_span(messages, interval, duration, "")?;
                PatternKind::Group {
                    groups,
                    group_size,
                    senders_per_group: spg,
                    messages,
                    interval,
                    size: ctx.size()?,
                }
            }
            Kind::Idle => {
                ctx.needs_duration(duration)?;
                let users = match &t.users {
                    Some(u) => ctx.at_most(u, "users", pop.users, "users")?,
                    None => pop.users,
                };
                PatternKind::Idle {
                    users,
                    pick: ctx.pick(),
                }
            }
            Kind::Request => {
                let (request, steps) = ctx.request(&mut duration, driver)?;
                PatternKind::Request(RequestTraffic {
                    request,
                    steps,
                    step_duration: duration.unwrap_or_default(),
                })
            }
            Kind::Echo => {
                ctx.needs_duration(duration)?;
                let connections =
                    ctx.steady_count(&t.connections, "connections", "connections that send")?;
                streams += u64::from(connections);
                PatternKind::Echo {
                    connections,
                    pick: ctx.pick(),
                    interval: ctx.pace(connections, "connections")?,
                    size: ctx.size()?,
                }
            }
        };
        if let PatternKind::Request(r) = &kind {
            let steps = u32::try_from(r.steps.len()).unwrap_or(u32::MAX);
            let all = r.step_duration.checked_mul(steps).unwrap_or(Duration::MAX);
            if all > MAX_DURATION {
                return Err(ctx.at(
                    &t.sweep,
                    "sweep",
                    format!(
                        "{} steps of {} take {}; a pattern must end within 30 days",
                        r.steps.len(),
                        show(r.step_duration),
                        show(all)
                    ),
                ));
            }
            duration = Some(all);
        }
        if streams > u64::from(u32::MAX) {
            return Err(src.at(
                spanned,
                format!("traffic[{i}]"),
                format!(
                    "the plan would have {streams} streams; at most {} fit",
                    u32::MAX
                ),
            ));
        }
        let load = Load::of(&kind, duration, pop.users);
        total.listed += load.listed;
        total.pairs += load.pairs;
        total.deliveries += load.deliveries;
        let whole = format!("traffic[{i}]");
        if total.listed > MAX_LISTED {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would list {} users (late, churning, senders, receivers, group \
                     members, chosen idle users, connections); at most {MAX_LISTED} fit",
                    total.listed
                ),
            ));
        }
        if total.pairs > MAX_PAIRS {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would track {} stream × recipient pairs; at most {MAX_PAIRS} fit",
                    total.pairs
                ),
            ));
        }
        if total.deliveries > u128::from(MAX_DELIVERIES) {
            return Err(src.at(
                spanned,
                whole,
                format!(
                    "the plan would schedule {} deliveries; at most {MAX_DELIVERIES}: lower \
                     `messages`, `duration` or the rate",
                    total.deliveries
                ),
            ));
        }
        out.push(Pattern {
            name,
            start,
            duration,
            kind,
        });
    }
    Ok(out)
}

/// What patterns add to a plan: the user slots it lists, the stream × recipient pairs the
/// ledger tracks and the deliveries it schedules at most.
struct Load {
    listed: u64,
    pairs: u64,
    deliveries: u128,
}

impl Load {
    /// The load of one pattern that stops after `duration`, if set, among `users`.
    fn of(kind: &PatternKind, duration: Option<Duration>, users: u32) -> Load {
        // Sends of one sender: bounded by count, by time, or both (validation saw to it).
        let sends = |count: Option<u64>, interval: Duration| -> u128 {
            let by_time = duration.map(|d| d.as_nanos().div_ceil(interval.as_nanos().max(1)));
            match (count.map(u128::from), by_time) {
                (Some(c), Some(t)) => c.min(t),
                (Some(c), None) => c,
                (None, Some(t)) => t,
                (None, None) => 0,
            }
        };
        match kind {
            PatternKind::Direct {
                senders,
                receivers,
                messages,
                interval,
                ..
            } => Load {
                listed: u64::from(*senders) + u64::from(*receivers),
                pairs: u64::from(*senders) * u64::from(*receivers),
                deliveries: u128::from(*senders)
                    * sends(messages.map(|m| m * u64::from(*receivers)), *interval),
            },
            PatternKind::Group {
                groups,
                group_size,
                senders_per_group,
                messages,
                interval,
                ..
            } => {
                let streams = u64::from(*groups) * u64::from(*senders_per_group);
                let others = u64::from(*group_size) - 1;
                Load {
                    listed: u64::from(*groups) * u64::from(*group_size),
                    pairs: streams * others,
                    deliveries: u128::from(streams * others) * sends(*messages, *interval),
                }
            }
            PatternKind::Idle { users: n, .. } => Load {
                listed: if *n == users { 0 } else { u64::from(*n) },
                pairs: 0,
                deliveries: 0,
            },
            PatternKind::Request(_) => Load {
                listed: 0,
                pairs: 0,
                deliveries: 0,
            },
            PatternKind::Echo {
                connections,
                interval,
                ..
            } => Load {
                listed: u64::from(*connections),
                pairs: u64::from(*connections),
                deliveries: u128::from(*connections) * sends(None, *interval),
            },
        }
    }
}

/// One pattern being validated.
struct Ctx<'a> {
    src: &'a Source<'a>,
    i: usize,
    t: &'a TrafficSpec,
    spanned: &'a Spanned<TrafficSpec>,
    pop: &'a Pop,
}

impl Ctx<'_> {
    fn key(&self, k: &str) -> String {
        format!("traffic[{}].{k}", self.i)
    }

    /// An error at key `k` (or at the pattern's header when `k` is absent).
    fn at<T>(&self, v: &Opt<T>, k: &str, msg: impl Into<String>) -> crate::Error {
        let span = v.as_ref().map_or(self.spanned.span(), Spanned::span);
        self.src.error(span, self.key(k), msg)
    }

    fn required(&self, v: &Opt<i64>, k: &str, what: &str) -> Result<u32> {
        match v {
            Some(v) => count(self.src, v, &self.key(k)),
            None => Err(self.at(
                v,
                k,
                format!(
                    "a `{}` pattern needs `{k}` ({what})",
                    self.t.kind.get_ref().as_str()
                ),
            )),
        }
    }

    fn at_most(&self, v: &Spanned<i64>, k: &str, max: u32, pool: &str) -> Result<u32> {
        let n = count(self.src, v, &self.key(k))?;
        if n > max {
            return Err(self.src.at(v, self.key(k), format!("{n} > {max} {pool}")));
        }
        Ok(n)
    }

    /// A count drawn from the users online throughout (neither late nor churning).
    fn steady_count(&self, v: &Opt<i64>, k: &str, what: &str) -> Result<u32> {
        let n = self.required(v, k, what)?;
        let steady = self.pop.steady();
        if n > steady {
            return Err(self.at(
                v,
                k,
                format!(
                    "{n} > {steady} users online throughout (users {} − late {} − churning {}); \
                     senders are drawn from those",
                    self.pop.users, self.pop.late, self.pop.churn
                ),
            ));
        }
        Ok(n)
    }

    fn pick(&self) -> Pick {
        self.t
            .pick
            .as_ref()
            .map_or(Pick::default(), |p| *p.get_ref())
    }

    fn needs_duration(&self, duration: Option<Duration>) -> Result<()> {
        match duration {
            Some(_) => Ok(()),
            None => Err(self.at(
                &self.t.duration,
                "duration",
                format!(
                    "a `{}` pattern needs `duration`, e.g. \"20s\"",
                    self.t.kind.get_ref().as_str()
                ),
            )),
        }
    }

    /// `messages`, which may be absent only when `duration` is set.
    fn messages(&self, duration: Option<Duration>) -> Result<Option<u64>> {
        match (&self.t.messages, duration) {
            (Some(m), _) => Ok(Some(u64::from(count(self.src, m, &self.key("messages"))?))),
            (None, Some(_)) => Ok(None),
            (None, None) => Err(self.at(
                &self.t.messages,
                "messages",
                "set `messages` (how many to send), `duration` (how long), or both (whichever ends first)",
            )),
        }
    }

    /// Refuses `count` sends per sender one every `interval` that would not end within
    /// [`MAX_DURATION`] when no `duration` stops them (`per` names what multiplies
    /// `messages` into `count`).
    fn send_span(
        &self,
        count: Option<u64>,
        interval: Duration,
        duration: Option<Duration>,
        per: &str,
    ) -> Result<()> {
        let (Some(n), None) = (count, duration) else {
            return Ok(());
        };
        let span = interval.as_nanos() * u128::from(n.saturating_sub(1));
        if span <= MAX_DURATION.as_nanos() {
            return Ok(());
        }
        let secs = span as f64 / 1e9;
        Err(self.at(
            &self.t.messages,
            "messages",
            format!(
                "{n} sends ({per}messages) per sender, one every {}, take {secs:.0}s; a \
                 pattern's sends must end within 30 days: lower `messages`, raise the rate or \
                 set `duration`",
                show(interval)
            ),
        ))
    }

    /// The per-sender interval from `interval`, or from `rate` split over `senders`.
    fn pace(&self, senders: u32, who: &str) -> Result<Duration> {
        match (&self.t.interval, &self.t.rate) {
            (Some(i), None) => at_least(self.src, i, &self.key("interval"), MIN_INTERVAL),
            (None, Some(r)) => {
                let rate = rate(self.src, r, &self.key("rate"))?;
                let secs = f64::from(senders) / rate;
                if secs < 1e-6 {
                    return Err(self.src.at(
                        r,
                        self.key("rate"),
                        format!(
                            "{rate}/s over {senders} {who} needs sends less than 1µs apart; \
                             at most {}/s fit (1µs interval)",
                            u64::from(senders) * 1_000_000
                        ),
                    ));
                }
                if secs > MAX_DURATION.as_secs_f64() {
                    return Err(self.src.at(
                        r,
                        self.key("rate"),
                        format!(
                            "{rate}/s over {senders} {who} is one send per sender every {secs:.0}s; \
                             at most 30 days apart: raise the rate"
                        ),
                    ));
                }
                Ok(Duration::from_secs_f64(secs))
            }
            (Some(_), Some(r)) => Err(self.src.at(
                r,
                self.key("rate"),
                "set either `interval` (per sender) or `rate` (total msgs/s), not both",
            )),
            (None, None) => Err(self.at(
                &None::<Spanned<()>>,
                "rate",
                "set `rate` (total msgs/s, e.g. 500) or `interval` (per sender, e.g. \"10ms\")",
            )),
        }
    }

    fn size(&self) -> Result<usize> {
        let Some(s) = &self.t.size else {
            return Ok(SIZE);
        };
        let n = *s.get_ref();
        if n <= 0 {
            return Err(self
                .src
                .at(s, self.key("size"), format!("must be > 0 bytes, got {n}")));
        }
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_SIZE)
            .ok_or_else(|| {
                self.src.at(
                    s,
                    self.key("size"),
                    format!("must be at most {MAX_SIZE} bytes (64 MiB), got {n}"),
                )
            })
    }

    /// The request kind and concurrency steps; sets `duration` to one step's length.
    fn request(
        &self,
        duration: &mut Option<Duration>,
        driver: &'static Spec,
    ) -> Result<(&'static str, Vec<u32>)> {
        let t = self.t;
        let known = driver.requests.join("\", \"");
        let kind = match &t.request {
            Some(r) => driver
                .requests
                .iter()
                .copied()
                .find(|k| *k == r.get_ref())
                .ok_or_else(|| {
                    self.src.at(
                        r,
                        self.key("request"),
                        format!(
                            "driver `{}` has no request `{}`{}; it sends: {}",
                            driver.name,
                            r.get_ref(),
                            super::source::did_you_mean(r.get_ref(), driver.requests)
                                .map_or(String::new(), |m| format!(" (did you mean `{m}`?)")),
                            driver.requests.join(", ")
                        ),
                    )
                })?,
            None => {
                return Err(self.at(
                    &t.request,
                    "request",
                    format!("a `request` pattern needs `request` (\"{known}\")"),
                ))
            }
        };
        let users = self.pop.users;
        match (&t.concurrency, &t.sweep) {
            (Some(c), None) => {
                if let Some(s) = &t.step_duration {
                    return Err(self.src.at(s, self.key("step_duration"), "goes with `sweep`; with `concurrency` set `duration`"));
                }
                self.needs_duration(*duration)?;
                Ok((kind, vec![self.at_most(c, "concurrency", users, "users (user i works when i < concurrency)")?]))
            }
            (None, Some(sweep)) => {
                if let Some(d) = &t.duration {
                    return Err(self.src.at(d, self.key("duration"), "with `sweep`, set `step_duration` (each step's length) instead"));
                }
                let Some(step) = &t.step_duration else {
                    return Err(self.at(&t.step_duration, "step_duration", "a `sweep` needs `step_duration`, e.g. \"10s\""));
                };
                *duration = Some(positive_dur(self.src, step, &self.key("step_duration"))?);
                if sweep.get_ref().is_empty() {
                    return Err(self.src.at(sweep, self.key("sweep"), "needs at least one concurrency, e.g. [100, 500, 1000]"));
                }
                let mut steps = Vec::new();
                for (j, c) in sweep.get_ref().iter().enumerate() {
                    steps.push(self.at_most(c, &format!("sweep[{j}]"), users, "users")?);
                }
                Ok((kind, steps))
            }
            (Some(c), Some(_)) => Err(self.src.at(c, self.key("concurrency"), "set either `concurrency` or `sweep`, not both")),
            (None, None) => Err(self.at(&t.concurrency, "concurrency", "a `request` pattern needs `concurrency` (e.g. 2000) or `sweep` (e.g. [100, 500, 1000])")),
        }
    }
}
