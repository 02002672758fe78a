//! Users online varied in one run: a *ladder* of user counts, climbed without logging
//! anyone out.
//!
//! The first rung's users log in as the scenario says and traffic starts; each later rung's
//! new users log in (at the scenario's login rate) while everyone before them stays
//! connected, then the run holds that count for the step's duration. Each rung is a step
//! whose numbers cover its steady window: from `warmup` after its last login to the next
//! rung's first login. The new users are the plan's *late* users, logging in along
//! zero-rate hold phases (`Population::late_arrival`), so the engine needs nothing else.
//!
//! Why one run and not one run per step that keeps the earlier users: a run's users live
//! in its engine, and handing live sessions from one run to the next would need a second
//! lifetime for users in the engine; one run with a stepped login ramp measures the same
//! thing (users already connected stay connected, only the new ones log in).

use std::time::Duration;

use super::step::Span;
use crate::artifact::Artifact;
use crate::metrics::Counter;
use crate::scenario::{ArrivalPhase, Plan, TrafficShape, UserIx};

/// The user counts of one run and how they are reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Ladder {
    /// Users online at each rung, ascending; the first rung logs in before traffic.
    pub users: Vec<u32>,
    /// Logins per second of the later rungs' new users.
    pub rate: f64,
    /// How long each rung holds its count (after its logins).
    pub hold: Duration,
}

impl Ladder {
    /// The arrival of the late users (every rung after the first): each rung's new users
    /// at `rate`, then a hold; the last rung has no hold (the traffic's end is its end).
    pub fn late_arrival(&self) -> Vec<ArrivalPhase> {
        let mut phases = Vec::new();
        for (i, w) in self.users.windows(2).enumerate() {
            if i > 0 {
                phases.push(ArrivalPhase {
                    duration: self.hold,
                    rate_from: 0.0,
                    rate_to: 0.0,
                });
            }
            phases.push(ArrivalPhase {
                duration: self.logins(w[1] - w[0]),
                rate_from: self.rate,
                rate_to: self.rate,
            });
        }
        phases
    }

    /// How long `n` new users take to log in.
    fn logins(&self, n: u32) -> Duration {
        Duration::from_secs_f64(f64::from(n) / self.rate)
    }

    /// When each later rung starts and its logins end, seconds after the late users'
    /// start (`late_at`).
    fn rungs(&self) -> Vec<(f64, f64)> {
        let mut at = 0.0;
        let mut out = Vec::new();
        for (i, w) in self.users.windows(2).enumerate() {
            if i > 0 {
                at += self.hold.as_secs_f64();
            }
            let end = at + self.logins(w[1] - w[0]).as_secs_f64();
            out.push((at, end));
            at = end;
        }
        out
    }

    /// How long the traffic must last: the first rung's hold, then every later rung's
    /// logins and hold.
    pub fn traffic(&self) -> Duration {
        let last = self.rungs().last().map_or(0.0, |r| r.1);
        Duration::from_secs_f64(last) + self.hold * 2
    }

    /// The part of the run each rung covers, given the run's artifact `a`, when the late
    /// users started (`late_at`, seconds of the run) and the warm-up. A rung's window
    /// starts `warmup` after its logins ended (as planned, or later if connections were
    /// still being attempted) and ends where the next rung's logins start; the last one
    /// ends at the last second with a send.
    pub fn spans(&self, a: &Artifact, late_at: f64, warmup: f64) -> Vec<Span> {
        let attempts: Vec<(u32, u64)> = a
            .metrics
            .seconds()
            .map(|s| (s.sec, s.count(Counter::ConnectAttempts)))
            .collect();
        let last_send = a
            .metrics
            .seconds()
            .filter(|s| s.count(Counter::Sent) + s.count(Counter::Requests) > 0)
            .map(|s| s.sec)
            .max()
            .unwrap_or(0);
        let start = a.traffic_started_s.unwrap_or(0.0);
        let mut bounds = vec![(0.0, start)];
        bounds.extend(
            self.rungs()
                .into_iter()
                .map(|(s, e)| (late_at + s, late_at + e)),
        );
        let mut spans = Vec::new();
        for (i, &(from, planned_end)) in bounds.iter().enumerate() {
            let next = bounds.get(i + 1).map_or(f64::from(last_send), |b| b.0);
            let from_sec = from.floor() as u32;
            let next_sec = next.floor() as u32;
            let tried_until = attempts
                .iter()
                .filter(|(s, n)| *n > 0 && (from_sec..next_sec).contains(s))
                .map(|(s, _)| f64::from(*s + 1))
                .fold(planned_end, f64::max);
            let lo = (tried_until + warmup).ceil() as u32;
            let hi = next_sec.max(lo + 1);
            spans.push(Span {
                from: from_sec,
                window: (lo, hi),
                whole_run: false,
            });
        }
        spans
    }
}

/// The climbing rungs: `from`, doubling, up to `to` (included), at most `max`.
pub fn climb(from: f64, to: f64, whole: bool, max: usize) -> Vec<f64> {
    let mut out = vec![from];
    while out.len() < max {
        let last = out[out.len() - 1];
        let mut next = (last * super::search::CLIMB).min(to);
        if whole {
            next = next.floor();
        }
        if next <= last {
            break;
        }
        out.push(next);
    }
    out
}

/// The refining rungs strictly between a passing `pass` and a failing `fail`: evenly
/// spaced at least `gap` apart, at most `max` of them.
pub fn refine(pass: f64, fail: f64, gap: f64, whole: bool, max: usize) -> Vec<f64> {
    if max == 0 {
        return Vec::new();
    }
    let step = ((fail - pass) / (max as f64 + 1.0)).max(gap);
    let mut out = Vec::new();
    let mut v = pass + step;
    while v < fail && out.len() < max {
        let r = if whole { v.floor() } else { v };
        if r > pass && r < fail && out.last().is_none_or(|&l| r > l) {
            out.push(r);
        }
        v += step;
    }
    out
}

/// Moves the traffic of `plan` onto the users online from the first rung: every late user
/// (a later rung's) that receives a pattern's messages or is a group member is replaced by
/// an on-time user the pattern (or group) does not have yet, lowest first. Stream ids stay
/// (they count positions), members stay sorted. So a rung's achieved rate and latency are
/// those of live deliveries, not of messages stored for users who are not online yet.
///
/// Without enough on-time users for a pattern, it keeps its late users.
pub fn keep_traffic_online(plan: &mut Plan) {
    let late = plan.population.late.clone();
    if late.is_empty() {
        return;
    }
    let is_late = |u: UserIx| late.binary_search(&u).is_ok();
    let users = plan.population.users;
    // `list` with its late users replaced by on-time users outside `taken` and itself.
    let online = |list: &mut Vec<UserIx>, taken: &[UserIx]| {
        let mut free =
            (0..users).filter(|&u| !is_late(u) && !taken.contains(&u) && !list.contains(&u));
        let spare: Vec<UserIx> = free
            .by_ref()
            .take(list.iter().filter(|&&u| is_late(u)).count())
            .collect();
        if spare.len() < list.iter().filter(|&&u| is_late(u)).count() {
            return;
        }
        let mut spare = spare.into_iter();
        for u in list.iter_mut().filter(|u| is_late(**u)) {
            if let Some(s) = spare.next() {
                *u = s;
            }
        }
    };
    for t in &mut plan.traffic {
        match &mut t.kind {
            TrafficShape::Direct(d) => online(&mut d.receivers, &d.senders),
            TrafficShape::Group(g) => {
                for group in &mut g.groups {
                    online(&mut group.members, &[]);
                    group.members.sort_unstable();
                }
            }
            TrafficShape::Idle { .. }
            | TrafficShape::Request(_)
            | TrafficShape::Echo(_)
            | TrafficShape::Chat(_)
            | TrafficShape::Trace(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::arrival::arrival_offset;

    fn ladder() -> Ladder {
        Ladder {
            users: vec![100, 200, 400],
            rate: 100.0,
            hold: Duration::from_secs(5),
        }
    }

    #[test]
    fn late_users_arrive_rung_by_rung_with_holds() {
        let l = ladder();
        let phases = l.late_arrival();
        // 100 new users in 1 s, a 5 s hold, 200 more in 2 s.
        assert_eq!(phases.len(), 3);
        assert_eq!(arrival_offset(&phases, 99), Duration::from_millis(990));
        assert_eq!(arrival_offset(&phases, 100), Duration::from_secs(6));
        assert_eq!(arrival_offset(&phases, 299), Duration::from_millis(7990));
        assert_eq!(l.rungs(), vec![(0.0, 1.0), (6.0, 8.0)]);
        assert_eq!(l.traffic(), Duration::from_secs(18));
    }

    #[test]
    fn a_later_rungs_users_receive_nothing_until_they_are_online() {
        let text = "[population]\nusers = 100\nlogin_rate = 1000\n\
                    late = { count = 80, at = \"5s\" }\n\
                    [[traffic]]\nkind = \"direct\"\nsenders = 5\nreceivers = 10\nrate = 10\nduration = \"1s\"\n\
                    [[traffic]]\nkind = \"group\"\ngroups = 3\ngroup_size = 6\nrate = 10\nduration = \"1s\"\n";
        let mut plan = crate::scenario::parse(
            text,
            std::path::Path::new("t.toml"),
            &[],
            crate::scenario::Shard::WHOLE,
        )
        .unwrap();
        keep_traffic_online(&mut plan);
        let late = |u: &UserIx| plan.population.late.binary_search(u).is_ok();
        let TrafficShape::Direct(d) = &plan.traffic[0].kind else {
            panic!("direct first")
        };
        assert_eq!(d.receivers.len(), 10);
        assert!(!d.receivers.iter().any(late), "{:?}", d.receivers);
        assert!(!d.receivers.iter().any(|r| d.senders.contains(r)));
        let mut distinct = d.receivers.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 10);
        let TrafficShape::Group(g) = &plan.traffic[1].kind else {
            panic!("group second")
        };
        for group in &g.groups {
            assert_eq!(group.members.len(), 6);
            assert!(!group.members.iter().any(late), "{:?}", group.members);
            assert!(group.members.windows(2).all(|w| w[0] < w[1]));
            assert!(group.senders.iter().all(|s| group.members.contains(s)));
        }
    }

    #[test]
    fn the_rungs_climb_by_doubling_then_refine_between_pass_and_fail() {
        assert_eq!(
            climb(100.0, 1000.0, true, 12),
            [100.0, 200.0, 400.0, 800.0, 1000.0]
        );
        assert_eq!(climb(100.0, 1000.0, true, 2), [100.0, 200.0]);
        assert_eq!(refine(400.0, 800.0, 20.0, true, 3), [500.0, 600.0, 700.0]);
        assert_eq!(refine(400.0, 440.0, 20.0, true, 5), [420.0]);
        assert!(refine(400.0, 401.0, 1.0, true, 5).is_empty());
    }
}
