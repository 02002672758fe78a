//! `kind = "idle"`: users online with heartbeats only.

use std::time::Duration;

use super::pattern::{Ctx, Load, Lowering, PatternKind};
use crate::scenario::draw::choose;
use crate::scenario::plan::{IdleUsers, TrafficShape};
use crate::scenario::schema::Pick;
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &["pick", "users"];

/// A checked idle pattern.
#[derive(Debug)]
struct Idle {
    /// Users that idle.
    users: u32,
    /// How they are chosen.
    pick: Pick,
}

/// Checks an idle pattern.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    cx.needs_duration(*duration)?;
    let users = match &cx.t.users {
        Some(u) => cx.at_most(u, "users", cx.pop.users, "users")?,
        None => cx.pop.users,
    };
    Ok(Box::new(Idle {
        users,
        pick: cx.pick(),
    }))
}

impl PatternKind for Idle {
    fn streams(&self) -> u64 {
        0
    }

    fn load(&self, _duration: Option<Duration>, users: u32) -> Load {
        Load {
            listed: if self.users == users {
                0
            } else {
                u64::from(self.users)
            },
            ..Load::default()
        }
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        let users = if self.users == cx.users {
            IdleUsers::All
        } else {
            let all = cx.all();
            IdleUsers::Chosen(choose(&mut cx.rng, &all, self.users, self.pick))
        };
        TrafficShape::Idle { users }
    }
}
