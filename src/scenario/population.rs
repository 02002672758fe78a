//! `[population]`: how many users, how they arrive, who is late and who churns — checked
//! and resolved to counts ([`Pop`]); users are chosen when the plan is lowered.

use std::time::Duration;

use toml::Spanned;

use super::arrival;
use super::contacts::ContactModel;
use super::groups::{GroupModel, Members};
use super::plan::{ArrivalPhase, ThinkTimes};
use super::schema::{ContactsSpec, GroupsSpec, PhaseSpec, PopulationSpec, SessionsSpec};
use super::sessions::{SessionModel, DAY};
use super::source::Source;
use super::values::{duration, positive, rate, show, unit, MAX_DURATION, MAX_USERS};
use crate::Result;

/// Default `population.login_rate`, logins/s.
const LOGIN_RATE: f64 = 1000.0;

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
    /// Users who come and go over a compressed day, if the scenario says so.
    pub sessions: Option<SessionModel>,
    /// Who talks to whom, if the scenario says so.
    pub contacts: Option<ContactModel>,
    /// Groups with heavy-tailed sizes, if the scenario says so.
    pub groups: Option<GroupModel>,
}

impl Pop {
    /// Users online through the whole traffic: neither late nor churning, and nobody
    /// when users come and go in sessions.
    pub fn steady(&self) -> u32 {
        if self.sessions.is_some() {
            return 0;
        }
        self.users - self.late - self.churn
    }
}

/// Validates `[population]`: the counts, then the arrival, then when the late and
/// churning users come and go.
pub fn population(src: &Source<'_>, spec: &Spanned<PopulationSpec>) -> Result<Pop> {
    let p = spec.get_ref();
    let users = users(src, &p.users)?;
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
    let phases = login_phases(src, p)?;
    let mut pop = Pop {
        users,
        prefix: p
            .prefix
            .as_ref()
            .map_or("u".into(), |s| s.get_ref().clone()),
        first_id,
        arrival: Vec::new(),
        late: 0,
        late_at: Duration::ZERO,
        churn: 0,
        churn_offline_at: Duration::ZERO,
        churn_back_at: Duration::ZERO,
        sessions: None,
        contacts: p.contacts.as_ref().map(|c| contacts(src, c)).transpose()?,
        groups: None,
    };
    if let Some(g) = &p.groups {
        pop.groups = Some(groups(src, g, users)?);
    }
    if let Some(s) = &p.sessions {
        pop.sessions = Some(sessions(src, p, s)?);
    }
    away(src, spec, &mut pop)?;
    pop.arrival = arrival::fit(&phases, users - pop.late);
    let ramp_end = arrival::end(&pop.arrival);
    arrival_ends(src, p, &pop, ramp_end)?;
    away_after_arrival(src, p, &pop, ramp_end)?;
    Ok(pop)
}

/// `population.users`.
fn users(src: &Source<'_>, v: &Spanned<i64>) -> Result<u32> {
    match *v.get_ref() {
        n if n <= 0 => Err(src.at(v, "population.users", format!("must be > 0, got {n}"))),
        n => u32::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_USERS)
            .ok_or_else(|| {
                src.at(
                    v,
                    "population.users",
                    format!("must be at most {MAX_USERS}, got {n}"),
                )
            }),
    }
}

/// The login phases as written: `login_rate`, `arrival` or the default rate.
fn login_phases(src: &Source<'_>, p: &PopulationSpec) -> Result<Vec<ArrivalPhase>> {
    match (&p.login_rate, &p.arrival) {
        (Some(r), None) => {
            let rate = src.value(r, "population.login_rate", rate)?;
            Ok(vec![steady(Duration::from_secs(1), rate)])
        }
        (None, Some(a)) => phases(src, a),
        (None, None) => Ok(vec![steady(Duration::from_secs(1), LOGIN_RATE)]),
        (Some(r), Some(_)) => Err(src.at(
            r,
            "population.login_rate",
            "set either `login_rate` (one steady phase) or `arrival` (a list of phases), not both",
        )),
    }
}

/// The late and churning users: how many and when, disjoint and leaving someone on time.
fn away(src: &Source<'_>, spec: &Spanned<PopulationSpec>, pop: &mut Pop) -> Result<()> {
    let (p, users) = (spec.get_ref(), pop.users);
    if let Some(l) = &p.late {
        let g = l.get_ref();
        pop.late = share(src, &g.fraction, &g.count, users, "population.late", l)?;
        pop.late_at = src.value(&g.at, "population.late.at", duration)?;
    }
    if let Some(c) = &p.churn {
        let g = c.get_ref();
        pop.churn = share(src, &g.fraction, &g.count, users, "population.churn", c)?;
        pop.churn_offline_at = src.value(&g.offline_at, "population.churn.offline_at", duration)?;
        pop.churn_back_at = src.value(&g.back_at, "population.churn.back_at", duration)?;
    }
    let (late, churn) = (pop.late, pop.churn);
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
    Ok(())
}

/// Refuses an arrival of the on-time users that ends past 30 days.
fn arrival_ends(src: &Source<'_>, p: &PopulationSpec, pop: &Pop, ramp_end: Duration) -> Result<()> {
    if ramp_end <= MAX_DURATION {
        return Ok(());
    }
    let (key, span) = match (&p.login_rate, &p.arrival) {
        (Some(r), _) => ("population.login_rate", r.span()),
        (_, Some(a)) => ("population.arrival", a.span()),
        _ => ("population.users", p.users.span()),
    };
    Err(src.error(
        span,
        key,
        format!(
            "logging in {} on-time users at this rate takes {}; the arrival must end \
             within 30 days: raise the rate",
            pop.users - pop.late,
            show(ramp_end)
        ),
    ))
}

/// Refuses late users or churn before the on-time users are in, and a churn that comes
/// back before it leaves.
fn away_after_arrival(
    src: &Source<'_>,
    p: &PopulationSpec,
    pop: &Pop,
    ramp_end: Duration,
) -> Result<()> {
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
    let Some(c) = &p.churn else { return Ok(()) };
    let c = c.get_ref();
    if c.offline_at.get_ref().0 < ramp_end {
        return Err(src.at(
            &c.offline_at,
            "population.churn.offline_at",
            format!(
                "{} is before the on-time users are all logged in ({}); set it ≥ {}",
                show(pop.churn_offline_at),
                show(ramp_end),
                show(ramp_end)
            ),
        ));
    }
    if pop.churn_back_at <= pop.churn_offline_at {
        return Err(src.at(
            &c.back_at,
            "population.churn.back_at",
            format!(
                "must be after `offline_at` ({}), got {}",
                show(pop.churn_offline_at),
                show(pop.churn_back_at)
            ),
        ));
    }
    Ok(())
}

/// One steady phase.
fn steady(duration: Duration, rate: f64) -> ArrivalPhase {
    ArrivalPhase {
        duration,
        rate_from: rate,
        rate_to: rate,
    }
}

/// `population.arrival`.
fn phases(src: &Source<'_>, list: &Spanned<Vec<Spanned<PhaseSpec>>>) -> Result<Vec<ArrivalPhase>> {
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
        let duration = src.value(&p.duration, key("duration"), positive)?;
        let (from, to) =
            match (&p.rate, &p.from, &p.to) {
                (Some(r), None, None) => {
                    let r = src.value(r, key("rate"), rate)?;
                    (r, r)
                }
                (None, Some(f), Some(t)) => (
                    src.value(f, key("from"), rate)?,
                    src.value(t, key("to"), rate)?,
                ),
                _ => return Err(src.at(
                    ph,
                    format!("population.arrival[{i}]"),
                    "a phase is `{ duration, rate }` (steady) or `{ duration, from, to }` (ramp)",
                )),
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
            let v = src.value(f, format!("{key}.fraction"), unit)?;
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

/// Default mean contacts per user.
const CONTACTS: f64 = 10.0;
/// Default exponent of the contact degree distribution: social graphs measured in the
/// literature fall between 2 and 3.
const EXPONENT: f64 = 2.5;

/// `[population.contacts]`.
fn contacts(src: &Source<'_>, spec: &Spanned<ContactsSpec>) -> Result<ContactModel> {
    let c = spec.get_ref();
    let mean = match &c.mean {
        Some(m) => src.value(m, "population.contacts.mean", |x: f64| {
            if (1.0..=10_000.0).contains(&x) {
                Ok(x)
            } else {
                Err(format!("must be in 1..=10000 contacts per user, got {x}"))
            }
        })?,
        None => CONTACTS,
    };
    let exponent = match &c.exponent {
        Some(e) => src.value(e, "population.contacts.exponent", |x: f64| {
            if x > 2.0 && x <= 10.0 {
                Ok(x)
            } else {
                Err(format!(
                    "must be in (2, 10] (P(k) ∝ k^−exponent; at 2 or below one hub would hold \
                     everyone), got {x}"
                ))
            }
        })?,
        None => EXPONENT,
    };
    Ok(ContactModel { mean, exponent })
}

/// The contact model of a population without `[population.contacts]`.
pub fn default_contacts() -> ContactModel {
    ContactModel {
        mean: CONTACTS,
        exponent: EXPONENT,
    }
}

/// `[population.sessions]`, which replaces the arrival, late and churning users.
fn sessions(
    src: &Source<'_>,
    p: &PopulationSpec,
    spec: &Spanned<SessionsSpec>,
) -> Result<SessionModel> {
    let conflicts = [
        ("login_rate", p.login_rate.as_ref().map(Spanned::span)),
        ("arrival", p.arrival.as_ref().map(Spanned::span)),
        ("late", p.late.as_ref().map(Spanned::span)),
        ("churn", p.churn.as_ref().map(Spanned::span)),
    ];
    if let Some((key, Some(span))) = conflicts.into_iter().find(|(_, s)| s.is_some()) {
        return Err(src.error(
            span,
            format!("population.{key}"),
            "`[population.sessions]` says when every user logs in and out; leave out \
             `login_rate`, `arrival`, `late` and `churn`",
        ));
    }
    let s = spec.get_ref();
    let day = src.value(&s.day, "population.sessions.day", positive)?;
    let dist = |v: &Option<Spanned<toml::Value>>, k: &str, default: ThinkTimes| match v {
        Some(v) => super::dist::durations(src, v, &format!("population.sessions.{k}")),
        None => Ok(default),
    };
    // Scaled with the day: sessions of 15 minutes and gaps of 2 hours in a 24-hour day.
    let length = dist(
        &s.length,
        "length",
        ThinkTimes::Lognormal {
            median: day / 96,
            spread: 1.5,
        },
    )?;
    let gap = dist(&s.gap, "gap", ThinkTimes::Exponential(day / 12))?;
    let max_online = match &s.max_online {
        Some(m) => Some(src.value(m, "population.sessions.max_online", |n: i64| {
            u32::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("must be > 0 users, got {n}"))
        })?),
        None => None,
    };
    Ok(SessionModel {
        day,
        curve: curve(src, &s.curve)?,
        length,
        gap,
        max_online,
    })
}

/// `population.sessions.curve`: `"day"` (the default), `"flat"`, or relative rates.
fn curve(src: &Source<'_>, v: &Option<Spanned<toml::Value>>) -> Result<Vec<f64>> {
    let Some(v) = v else { return Ok(DAY.to_vec()) };
    let key = "population.sessions.curve";
    let forms = "`\"day\"` (a daily shape), `\"flat\"`, or at least two relative rates at \
                 evenly spaced points of the day, e.g. [1, 4, 2]";
    match v.get_ref() {
        toml::Value::String(s) if s == "day" => Ok(DAY.to_vec()),
        toml::Value::String(s) if s == "flat" => Ok(vec![1.0, 1.0]),
        toml::Value::Array(points) if points.len() >= 2 => {
            let rates: Option<Vec<f64>> = points
                .iter()
                .map(|p| p.as_float().or_else(|| p.as_integer().map(|i| i as f64)))
                .map(|x| x.filter(|x| x.is_finite() && *x >= 0.0))
                .collect();
            match rates {
                Some(r) if r.iter().any(|&x| x > 0.0) => Ok(r),
                _ => Err(src.at(v, key, format!("rates must be ≥ 0, one > 0: {forms}"))),
            }
        }
        _ => Err(src.at(v, key, format!("is {forms}"))),
    }
}

/// `[population.groups]`.
fn groups(src: &Source<'_>, spec: &Spanned<GroupsSpec>, users: u32) -> Result<GroupModel> {
    let g = spec.get_ref();
    let key = |k: &str| format!("population.groups.{k}");
    let whole = |v: &Option<Spanned<i64>>, k: &str, default: u32, low: u32| match v {
        Some(v) => src.value(v, key(k), |n: i64| {
            u32::try_from(n)
                .ok()
                .filter(|&n| n >= low)
                .ok_or_else(|| format!("must be ≥ {low}, got {n}"))
        }),
        None => Ok(default),
    };
    let count = whole(&Some(g.count.clone()), "count", 0, 1)?;
    let min = whole(&g.min, "min", 3, 2)?;
    let max = whole(&g.max, "max", 1000.max(min).min(users), 2)?;
    if max < min || max > users {
        let span = g.max.as_ref().map_or(spec.span(), Spanned::span);
        return Err(src.error(
            span,
            key("max"),
            format!("must be in {min}..={users} (`min` to the users), got {max}"),
        ));
    }
    let exponent = match &g.exponent {
        Some(e) => src.value(e, key("exponent"), |x: f64| {
            if (0.0..=5.0).contains(&x) {
                Ok(x)
            } else {
                Err(format!(
                    "must be in 0..=5 (P(size) ∝ size^−exponent), got {x}"
                ))
            }
        })?,
        None => 2.0,
    };
    let members = match g.members.as_ref().map(|m| (m, m.get_ref().as_str())) {
        None | Some((_, "contacts")) => Members::Contacts,
        Some((_, "uniform")) => Members::Uniform,
        Some((m, other)) => {
            return Err(src.at(
                m,
                key("members"),
                format!("must be \"contacts\" or \"uniform\", got \"{other}\""),
            ))
        }
    };
    Ok(GroupModel {
        count,
        min,
        max,
        exponent,
        members,
        speakers: whole(&g.speakers, "speakers", 5, 1)?,
    })
}
