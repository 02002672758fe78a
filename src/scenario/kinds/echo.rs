//! `kind = "echo"`: round trips through an echo endpoint at a fixed rate per connection.

use std::time::Duration;

use super::pattern::{sends, Ctx, Load, Lowering, PatternKind};
use crate::scenario::draw::choose;
use crate::scenario::plan::{EchoTraffic, Sizes, StreamId, TrafficShape};
use crate::scenario::schema::Pick;
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &["pick", "connections", "interval", "rate", "size"];

/// A checked echo pattern.
#[derive(Debug)]
struct Echo {
    /// Connections that send.
    connections: u32,
    /// How they are chosen.
    pick: Pick,
    /// Between two sends on one connection.
    interval: Duration,
    /// Frame bytes.
    size: Sizes,
}

/// Checks an echo pattern.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    cx.needs_duration(*duration)?;
    let connections =
        cx.steady_count(&cx.t.connections, "connections", "connections that send")?;
    Ok(Box::new(Echo {
        connections,
        pick: cx.pick(),
        interval: cx.pace(connections, "connections")?,
        size: cx.size()?,
    }))
}

impl PatternKind for Echo {
    fn streams(&self) -> u64 {
        u64::from(self.connections)
    }

    fn load(&self, duration: Option<Duration>, _users: u32) -> Load {
        Load {
            listed: u64::from(self.connections),
            pairs: u64::from(self.connections),
            deliveries: u128::from(self.connections) * sends(None, self.interval, duration),
        }
    }

    fn max_body(&self) -> usize {
        self.size.max()
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        let users = choose(&mut cx.rng, &cx.steady, self.connections, self.pick);
        let stream_base = cx.take_streams(users.len() as StreamId);
        TrafficShape::Echo(EchoTraffic {
            users,
            interval: self.interval,
            size: self.size.seeded(cx.seed),
            stream_base,
        })
    }
}
