//! `kind = "flow"`: Artillery's scenario flow. Each user (online already) thinks, then
//! loops `loops` times over {send, think}: one message to each of its receivers
//! (`to = "direct"`) or into its group (`to = "group"`). Think times are fixed, uniform or
//! exponential, drawn per user from the scenario seed; sends stay open loop — the schedule
//! stamps each one's due time and latency counts from it.

use std::time::Duration;

use super::group::draw_groups;
use super::pattern::{Ctx, GroupSends, Load, Lowering, PatternKind};
use crate::scenario::draw::{choose, Pool};
use crate::vocab::TrafficKind;
use crate::scenario::plan::{
    DirectTraffic, GroupTraffic, Pace, Sizes, StreamId, Think, ThinkTimes, TrafficShape,
};
use crate::scenario::schema::{Opt, Pick};
use toml::Spanned;
use crate::scenario::values::{show, MAX_DURATION};
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &[
    "pick",
    "users",
    "to",
    "receivers",
    "groups",
    "group_size",
    "loops",
    "think",
    "size",
];

/// Where a flow's messages go.
#[derive(Debug, Clone, Copy)]
enum To {
    /// To each of `receivers` users (not flow users), every loop.
    Direct {
        /// Receiving users.
        receivers: u32,
    },
    /// Into `groups` groups of `group_size`; the flow's users are split evenly over them.
    Group {
        /// Number of groups.
        groups: u32,
        /// Members per group.
        group_size: u32,
    },
}

/// A checked flow.
#[derive(Debug)]
struct Flow {
    /// Users that run the flow.
    users: u32,
    /// How they are chosen (direct flows; group senders are a random sample).
    pick: Pick,
    /// Where their messages go.
    to: To,
    /// Iterations of {send, think}.
    loops: u64,
    /// Think times.
    think: ThinkTimes,
    /// Body bytes.
    size: Sizes,
}

/// Checks a flow.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    let t = cx.t;
    if duration.is_some() {
        return Err(cx.at(
            &t.duration,
            "duration",
            "a `flow` pattern ends after its `loops`; remove `duration`",
        ));
    }
    let users = cx.steady_count(&t.users, "users", "users that run the flow")?;
    let to = to(cx, users)?;
    let loops = u64::from(cx.required(&t.loops, "loops", "iterations of {send, think}")?);
    let think = think(cx)?;
    let span = think.mean().as_nanos() * u128::from(loops);
    if span > MAX_DURATION.as_nanos() {
        let took = Duration::from_nanos(span.min(u128::from(u64::MAX)) as u64);
        return Err(cx.at(
            &t.loops,
            "loops",
            format!(
                "{loops} loops thinking {} on average take {}; a pattern's sends must end \
                 within 30 days: lower `loops` or `think`",
                show(think.mean()),
                show(took)
            ),
        ));
    }
    Ok(Box::new(Flow {
        users,
        pick: cx.pick(),
        to,
        loops,
        think,
        size: cx.size()?,
    }))
}

/// `to` with `receivers`, or with `groups` and `group_size`.
fn to(cx: &Ctx<'_>, users: u32) -> Result<To> {
    let t = cx.t;
    let to = t.to.as_ref().map_or("direct", |s| s.get_ref().as_str());
    let span = |v: &Opt<i64>| v.as_ref().map(Spanned::span);
    let pick = t.pick.as_ref().map(Spanned::span);
    let (wrong, other) = match to {
        "direct" => (
            [("groups", span(&t.groups)), ("group_size", span(&t.group_size))],
            "group",
        ),
        "group" => ([("receivers", span(&t.receivers)), ("pick", pick)], "direct"),
        _ => {
            return Err(cx.at(
                &t.to,
                "to",
                format!("must be \"direct\" or \"group\", got `{to}`"),
            ))
        }
    };
    if let Some((k, Some(at))) = wrong.into_iter().find(|(_, at)| at.is_some()) {
        return Err(cx.src.error(
            at,
            cx.key(k),
            format!("`{k}` goes with `to = \"{other}\"`, not with `to = \"{to}\"`"),
        ));
    }
    if to == "group" && !cx.driver.kinds.contains(&TrafficKind::Group) {
        return Err(cx.at(
            &t.to,
            "to",
            format!("driver `{}` does not run group traffic", cx.driver.name),
        ));
    }
    match to {
        "direct" => direct(cx, users),
        _ => group(cx, users),
    }
}

/// `receivers` (default 1), distinct from the flow's users.
fn direct(cx: &Ctx<'_>, users: u32) -> Result<To> {
    let t = cx.t;
    let receivers = match &t.receivers {
        Some(_) => cx.required(&t.receivers, "receivers", "receiving users")?,
        None => 1,
    };
    if u64::from(users) + u64::from(receivers) > u64::from(cx.pop.users) {
        return Err(cx.at(
            &t.receivers,
            "receivers",
            format!(
                "users and receivers are distinct users: {users} + {receivers} > {} users",
                cx.pop.users
            ),
        ));
    }
    Ok(To::Direct { receivers })
}

/// `groups` (default 1) of `group_size`, each holding its share of the flow's users.
fn group(cx: &Ctx<'_>, users: u32) -> Result<To> {
    let t = cx.t;
    let groups = match &t.groups {
        Some(_) => cx.required(&t.groups, "groups", "number of groups")?,
        None => 1,
    };
    if users % groups != 0 {
        return Err(cx.at(
            &t.groups,
            "groups",
            format!("{users} users do not split evenly into {groups} groups"),
        ));
    }
    let group_size = cx.required(&t.group_size, "group_size", "members per group")?;
    let per_group = users / groups;
    if group_size > cx.pop.users || group_size < per_group {
        return Err(cx.at(
            &t.group_size,
            "group_size",
            format!(
                "must be in {per_group}..={} (each group holds its {per_group} flow users; \
                 there are {} users), got {group_size}",
                cx.pop.users, cx.pop.users
            ),
        ));
    }
    Ok(To::Group { groups, group_size })
}

/// `think`: a duration distribution.
fn think(cx: &Ctx<'_>) -> Result<ThinkTimes> {
    match &cx.t.think {
        Some(v) => crate::scenario::dist::durations(cx.src, v, &cx.key("think")),
        None => Err(cx.at(
            &cx.t.think,
            "think",
            format!("a `flow` pattern needs `think`: {}", crate::scenario::dist::FORMS),
        )),
    }
}

impl Flow {
    /// Streams per user and recipients per stream.
    fn fan(&self) -> (u64, u64) {
        match self.to {
            To::Direct { receivers } => (u64::from(receivers), 1),
            To::Group { group_size, .. } => (1, u64::from(group_size) - 1),
        }
    }

    /// The pace of every user.
    fn pace(&self, cx: &mut Lowering<'_>) -> Pace {
        Pace::Think(Think {
            times: self.think,
            seed: cx.rng.u64(..),
        })
    }
}

impl PatternKind for Flow {
    fn streams(&self) -> u64 {
        u64::from(self.users) * self.fan().0
    }

    fn load(&self, _duration: Option<Duration>, _users: u32) -> Load {
        let (per_user, recipients) = self.fan();
        let listed = match self.to {
            To::Direct { receivers } => u64::from(self.users) + u64::from(receivers),
            To::Group { groups, group_size } => u64::from(groups) * u64::from(group_size),
        };
        let pairs = u64::from(self.users) * per_user * recipients;
        Load {
            listed,
            pairs,
            deliveries: u128::from(pairs) * u128::from(self.loops),
        }
    }

    fn max_body(&self) -> usize {
        self.size.max()
    }

    fn sends_as(&self) -> Option<TrafficKind> {
        Some(match self.to {
            To::Direct { .. } => TrafficKind::Direct,
            To::Group { .. } => TrafficKind::Group,
        })
    }

    fn group_sends(&self) -> Option<GroupSends> {
        let To::Group { groups, .. } = self.to else {
            return None;
        };
        Some(GroupSends {
            senders_per_group: self.users / groups,
            messages: Some(self.loops),
            interval: self.think.mean(),
        })
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        match self.to {
            To::Direct { receivers } => {
                let senders = choose(&mut cx.rng, &cx.steady, self.users, self.pick);
                let others = Pool {
                    n: cx.users,
                    excluded: &senders,
                };
                let receivers = choose(&mut cx.rng, &others, receivers, self.pick);
                let stream_base = cx.take_streams((senders.len() * receivers.len()) as StreamId);
                TrafficShape::Direct(DirectTraffic {
                    senders,
                    receivers,
                    messages: Some(self.loops),
                    pace: self.pace(cx),
                    size: self.size.clone().seeded(cx.seed),
                    stream_base,
                })
            }
            To::Group { groups, group_size } => {
                let per_group = self.users / groups;
                let specs = draw_groups(cx, groups, group_size, per_group);
                TrafficShape::Group(GroupTraffic {
                    groups: specs,
                    messages: Some(self.loops),
                    pace: self.pace(cx),
                    size: self.size.clone().seeded(cx.seed),
                    stream_base: cx.take_streams(groups * per_group),
                    senders_per_group: per_group,
                })
            }
        }
    }
}
