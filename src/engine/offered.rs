//! The load a plan offers, in numbers a user reads before anything connects (`validate`)
//! and that the report sets beside what was measured: users online over the day, the
//! sessions, the contacts, and how the planned sends split over the senders.

use std::time::Duration;

use super::schedule::{self, Sends};
use crate::scenario::Plan;

/// Points of the day at which the users online are given.
pub const POINTS: u32 = 12;

/// What a plan offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    /// Users online at `POINTS + 1` evenly spaced moments of the day (its start and end
    /// included), with the day's length; `None` without `[population.sessions]`.
    pub online: Option<(Duration, Vec<u64>)>,
    /// Sessions in all, and their lengths' median and 90th percentile.
    pub sessions: Option<(usize, Duration, Duration)>,
    /// Contacts per user: mean and most.
    pub contacts: Option<(f64, usize)>,
    /// Messages sent to contacts, planned (count- or time-bound sends of `chat` patterns).
    pub chat_sends: u64,
    /// The share of those sends made by the top 1% and top 10% of users.
    pub top_senders: (f64, f64),
    /// Groups of `chat` patterns: how many, the largest, messages into them planned and
    /// the deliveries those make (each to every other member).
    pub groups: (usize, usize, u64, u64),
}

impl Offered {
    /// The numbers of `plan` (all shards).
    pub fn of(plan: &Plan) -> Offered {
        let pop = &plan.population;
        let online = pop.sessions.as_ref().map(|s| {
            let day = s.day.as_millis() as u64;
            let at = (0..=POINTS)
                .map(|k| {
                    s.online_at(
                        (day * u64::from(k) / u64::from(POINTS)).min(day.saturating_sub(1)) as u32,
                    )
                })
                .collect();
            (s.day, at)
        });
        let sessions = pop.sessions.as_ref().map(|s| {
            let mut l: Vec<u32> = s.lengths().collect();
            l.sort_unstable();
            let q = |p: f64| {
                let i = ((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1));
                Duration::from_millis(l.get(i).copied().unwrap_or(0).into())
            };
            (s.count(), q(0.5), q(0.9))
        });
        let contacts = pop.contacts.as_ref().map(|c| {
            let max = (0..c.users()).map(|u| c.of(u).len()).max().unwrap_or(0);
            (c.slots() as f64 / f64::from(c.users().max(1)), max)
        });
        let mut per_user: Vec<u64> = schedule::build(plan, 0..pop.users)
            .vus
            .iter()
            .map(|v| {
                v.programs
                    .iter()
                    .filter(|p| matches!(p.sends, Sends::Contacts { .. }))
                    .map(schedule::Program::planned)
                    .sum()
            })
            .collect();
        let groups = group_load(plan);
        per_user.sort_unstable_by(|a, b| b.cmp(a));
        let chat_sends: u64 = per_user.iter().sum();
        let share = |fraction: f64| {
            let n = ((per_user.len() as f64 * fraction).ceil() as usize).max(1);
            let top: u64 = per_user.iter().take(n).sum();
            top as f64 / chat_sends.max(1) as f64
        };
        Offered {
            online,
            sessions,
            contacts,
            chat_sends,
            top_senders: (share(0.01), share(0.1)),
            groups,
        }
    }
}

/// The groups of the plan's `chat` patterns: how many, the largest, messages planned into
/// them and their deliveries.
fn group_load(plan: &Plan) -> (usize, usize, u64, u64) {
    let sched = schedule::build(plan, 0..plan.population.users);
    let mut recipients: foldhash::HashMap<_, u64> = foldhash::HashMap::default();
    for (stream, _) in &sched.expect.tracks {
        *recipients.entry(*stream).or_default() += 1;
    }
    let (mut sends, mut deliveries) = (0, 0);
    for v in &sched.vus {
        for p in &v.programs {
            if let Sends::Group { stream, .. } = &p.sends {
                let n = p.planned();
                sends += n;
                deliveries += n * recipients.get(stream).copied().unwrap_or(0);
            }
        }
    }
    let chat = plan.traffic.iter().filter_map(|t| match &t.kind {
        crate::scenario::TrafficShape::Chat(c) => Some(c),
        _ => None,
    });
    let (mut count, mut largest) = (0, 0);
    for c in chat {
        count += c.groups.len();
        largest = c
            .groups
            .iter()
            .map(|g| g.members.len())
            .max()
            .unwrap_or(0)
            .max(largest);
    }
    (count, largest, sends, deliveries)
}
