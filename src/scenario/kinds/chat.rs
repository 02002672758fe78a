//! `kind = "chat"`: the population talks to its contacts. Every user sends 1:1 messages to
//! contacts drawn uniformly from its own, as a Poisson process at its own rate, only while
//! it is online (`[population.sessions]`); the users' rates follow a Zipf law of exponent
//! `activity` around the pattern's total `rate`, so a few users send most messages.

use std::sync::Arc;
use std::time::Duration;

use super::pattern::{Ctx, Load, Lowering, PatternKind};
use crate::scenario::plan::{ChatTraffic, Sizes, StreamId, TrafficShape};
use crate::vocab::TrafficKind;
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &["rate", "size", "activity", "group_rate"];

/// Default Zipf exponent of the users' message rates: the k-th most active user sends
/// in proportion to 1/k.
const ACTIVITY: f64 = 1.0;

/// A checked chat pattern.
#[derive(Debug)]
struct Chat {
    /// Messages/s the population sends in all, on average over the pattern.
    rate: f64,
    /// Zipf exponent of the users' rates.
    activity: f64,
    /// Body bytes.
    size: Sizes,
    /// Mean contacts per user, for the estimate of the streams.
    mean_contacts: f64,
    /// Messages/s into the population's groups, in all.
    group_rate: f64,
    /// The population's groups, to draw when lowered.
    groups: Option<crate::scenario::groups::GroupModel>,
}

/// Checks a chat pattern; without `duration` it lasts the population's day.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    if duration.is_none() {
        *duration = cx.pop.sessions.as_ref().map(|s| s.day);
    }
    cx.needs_duration(*duration)?;
    let t = cx.t;
    let Some(r) = &t.rate else {
        return Err(cx.at(
            &t.rate,
            "rate",
            "a `chat` pattern needs `rate` (messages/s the population sends in all, e.g. 200)",
        ));
    };
    let rate = cx
        .src
        .value(r, cx.key("rate"), crate::scenario::values::rate)?;
    let activity = match &t.activity {
        Some(a) => cx.src.value(a, cx.key("activity"), |x: f64| {
            if (0.0..=3.0).contains(&x) {
                Ok(x)
            } else {
                Err(format!(
                    "is the Zipf exponent of the users' message rates, in 0..=3 (0: all send \
                     alike, 1: the k-th most active sends 1/k), got {x}"
                ))
            }
        })?,
        None => ACTIVITY,
    };
    let mean_contacts = cx
        .pop
        .contacts
        .unwrap_or_else(crate::scenario::population::default_contacts)
        .mean;
    let group_rate = match (&t.group_rate, &cx.pop.groups) {
        (Some(r), Some(_)) => cx
            .src
            .value(r, cx.key("group_rate"), crate::scenario::values::rate)?,
        (Some(r), None) => {
            return Err(cx.src.at(
                r,
                cx.key("group_rate"),
                "sends into the population's groups: add `[population.groups]` (docs/population.md)",
            ))
        }
        (None, _) => 0.0,
    };
    if group_rate > 0.0 && !cx.driver.kinds.contains(&TrafficKind::Group) {
        return Err(cx.at(
            &t.group_rate,
            "group_rate",
            format!("driver `{}` does not run group traffic", cx.driver.name),
        ));
    }
    Ok(Box::new(Chat {
        rate,
        activity,
        size: cx.size()?,
        mean_contacts,
        group_rate,
        groups: cx.pop.groups,
    }))
}

impl PatternKind for Chat {
    fn streams(&self) -> u64 {
        0
    }

    fn load(&self, duration: Option<Duration>, users: u32) -> Load {
        let secs = duration.map_or(0.0, |d| d.as_secs_f64());
        // Groups are drawn when lowered: their expected size bounds members and pairs.
        let (members, fanout) = self.groups.map_or((0, 0.0), |g| {
            let mean = g.mean_size();
            ((f64::from(g.count) * mean) as u64, mean)
        });
        Load {
            listed: members,
            pairs: (f64::from(users) * self.mean_contacts) as u64 + members * 5,
            deliveries: (self.rate * secs + self.group_rate * secs * fanout).ceil() as u128,
        }
    }

    fn max_body(&self) -> usize {
        self.size.max()
    }

    fn needs_contacts(&self) -> bool {
        true
    }

    fn sends_as(&self) -> Option<TrafficKind> {
        Some(TrafficKind::Direct)
    }

    fn also_sends(&self) -> Option<TrafficKind> {
        (self.group_rate > 0.0).then_some(TrafficKind::Group)
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        let contacts = cx
            .contacts
            .clone()
            .expect("the plan draws contacts for a pattern that needs them");
        let stream_base = cx.take_streams(contacts.slots() as StreamId);
        let weights = activity(&mut cx.rng, cx.users, self.activity);
        let mut groups = match &self.groups {
            Some(model) => crate::scenario::groups::resolve(model, cx.users, Some(&contacts), cx.seed, ""),
            None => Vec::new(),
        };
        for g in &mut groups {
            g.name = cx.next_group_name();
        }
        let group_weights = activity(&mut cx.rng, groups.len() as u32, self.activity);
        let speakers: usize = groups.iter().map(|g| g.senders.len()).sum();
        let group_stream_base = cx.take_streams(speakers as StreamId);
        TrafficShape::Chat(ChatTraffic {
            rate: self.rate,
            weights: Arc::from(weights),
            group_rate: self.group_rate,
            groups,
            group_weights: Arc::from(group_weights),
            group_stream_base,
            contacts,
            size: self.size.seeded(cx.seed),
            stream_base,
            seed: cx.rng.u64(..),
        })
    }
}

/// Each user's share of the sends before sessions and contacts are accounted: Zipf by a
/// seeded random rank (so activity does not follow the user's index), summing to 1.
fn activity(rng: &mut fastrand::Rng, users: u32, exponent: f64) -> Vec<f32> {
    let mut rank: Vec<u32> = (0..users).collect();
    rng.shuffle(&mut rank);
    let w: Vec<f64> = rank
        .iter()
        .map(|&r| f64::from(r + 1).powf(-exponent))
        .collect();
    let total: f64 = w.iter().sum();
    w.into_iter().map(|x| (x / total) as f32).collect()
}
