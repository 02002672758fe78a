//! `kind = "group"`: group chat, some members of each group sending.

use std::time::Duration;

use fastrand::Rng;

use super::pattern::{sends, Ctx, GroupSends, Load, Lowering, PatternKind};
use crate::scenario::draw::{choose, floyd, Pool};
use crate::scenario::plan::{GroupSpec, GroupTraffic, Pace, Sizes, TrafficShape};
use crate::scenario::schema::Pick;
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &[
    "groups",
    "group_size",
    "senders_per_group",
    "messages",
    "interval",
    "rate",
    "size",
];

/// A checked group pattern.
#[derive(Debug)]
struct Group {
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
    size: Sizes,
}

/// Checks a group pattern.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    let t = cx.t;
    let groups = cx.required(&t.groups, "groups", "number of groups")?;
    let group_size = cx.required(&t.group_size, "group_size", "members per group")?;
    if group_size > cx.pop.users {
        return Err(cx.at(
            &t.group_size,
            "group_size",
            format!(
                "groups of {group_size} need that many users; there are {}",
                cx.pop.users
            ),
        ));
    }
    let spg = match &t.senders_per_group {
        Some(_) => cx.steady_count(&t.senders_per_group, "senders_per_group", "")?,
        None => 1,
    };
    if spg > group_size {
        return Err(cx.at(
            &t.senders_per_group,
            "senders_per_group",
            format!("{spg} senders in groups of {group_size}: senders are members"),
        ));
    }
    let messages = cx.messages(*duration)?;
    let interval = cx.pace(groups.saturating_mul(spg), "groups × senders_per_group")?;
    cx.send_span(messages, interval, *duration, "")?;
    Ok(Box::new(Group {
        groups,
        group_size,
        senders_per_group: spg,
        messages,
        interval,
        size: cx.size()?,
    }))
}

impl PatternKind for Group {
    fn streams(&self) -> u64 {
        u64::from(self.groups) * u64::from(self.senders_per_group)
    }

    fn load(&self, duration: Option<Duration>, _users: u32) -> Load {
        let others = u64::from(self.group_size) - 1;
        Load {
            listed: u64::from(self.groups) * u64::from(self.group_size),
            pairs: self.streams() * others,
            deliveries: u128::from(self.streams() * others)
                * sends(self.messages, self.interval, duration),
        }
    }

    fn max_body(&self) -> usize {
        self.size.max()
    }

    fn group_sends(&self) -> Option<GroupSends> {
        Some(GroupSends {
            senders_per_group: self.senders_per_group,
            messages: self.messages,
            interval: self.interval,
        })
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        let groups = draw_groups(cx, self.groups, self.group_size, self.senders_per_group);
        TrafficShape::Group(GroupTraffic {
            groups,
            messages: self.messages,
            pace: Pace::Every(self.interval),
            size: self.size.seeded(cx.seed),
            stream_base: cx.take_streams(self.groups * self.senders_per_group),
            senders_per_group: self.senders_per_group,
        })
    }
}

/// `count` groups of `size` members with `senders` each, named in plan order.
pub fn draw_groups(cx: &mut Lowering<'_>, count: u32, size: u32, senders: u32) -> Vec<GroupSpec> {
    (0..count)
        .map(|_| {
            let name = cx.next_group_name();
            group(&mut cx.rng, name, &cx.steady, cx.users, size, senders)
        })
        .collect()
}

/// One group: `senders` steady users, then the rest of the members from all other users.
fn group(
    rng: &mut Rng,
    name: String,
    steady: &Pool<'_>,
    users: u32,
    size: u32,
    senders: u32,
) -> GroupSpec {
    let senders = choose(rng, steady, senders, Pick::Random);
    let others = Pool {
        n: users,
        excluded: &senders,
    };
    let drawn = floyd(rng, others.len(), size - senders.len() as u32);
    let mut members = others.at(drawn);
    members.extend_from_slice(&senders);
    members.sort_unstable();
    GroupSpec {
        name,
        members,
        senders,
    }
}
