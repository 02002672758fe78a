//! `kind = "direct"`: fixed senders × receivers, each sender cycling over the receivers.

use std::time::Duration;

use super::pattern::{sends, Ctx, Load, Lowering, PatternKind};
use crate::scenario::draw::{choose, Pool};
use crate::scenario::plan::{DirectTraffic, Pace, Sizes, StreamId, TrafficShape};
use crate::scenario::schema::Pick;
use crate::Result;

/// Keys besides the common ones.
pub const KEYS: &[&str] = &[
    "pick",
    "senders",
    "receivers",
    "messages",
    "interval",
    "rate",
    "size",
];

/// A checked direct pattern.
#[derive(Debug)]
struct Direct {
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
    size: Sizes,
}

/// Checks a direct pattern.
pub fn check(cx: &Ctx<'_>, duration: &mut Option<Duration>) -> Result<Box<dyn PatternKind>> {
    let t = cx.t;
    let senders = cx.steady_count(&t.senders, "senders", "sending users")?;
    let receivers = cx.required(&t.receivers, "receivers", "receiving users")?;
    if u64::from(senders) + u64::from(receivers) > u64::from(cx.pop.users) {
        return Err(cx.at(
            &t.receivers,
            "receivers",
            format!(
                "senders and receivers are distinct users: {senders} + {receivers} > {} users",
                cx.pop.users
            ),
        ));
    }
    let messages = cx.messages(*duration)?;
    let interval = cx.pace(senders, "senders")?;
    let sends = messages.map(|m| m * u64::from(receivers));
    cx.send_span(sends, interval, *duration, "receivers × ")?;
    Ok(Box::new(Direct {
        senders,
        receivers,
        pick: cx.pick(),
        messages,
        interval,
        size: cx.size()?,
    }))
}

impl PatternKind for Direct {
    fn streams(&self) -> u64 {
        u64::from(self.senders) * u64::from(self.receivers)
    }

    fn load(&self, duration: Option<Duration>, _users: u32) -> Load {
        let count = self.messages.map(|m| m * u64::from(self.receivers));
        Load {
            listed: u64::from(self.senders) + u64::from(self.receivers),
            pairs: self.streams(),
            deliveries: u128::from(self.senders) * sends(count, self.interval, duration),
        }
    }

    fn max_body(&self) -> usize {
        self.size.max()
    }

    fn lower(self: Box<Self>, cx: &mut Lowering<'_>) -> TrafficShape {
        let senders = choose(&mut cx.rng, &cx.steady, self.senders, self.pick);
        let others = Pool {
            n: cx.users,
            excluded: &senders,
        };
        let receivers = choose(&mut cx.rng, &others, self.receivers, self.pick);
        let stream_base = cx.take_streams((senders.len() * receivers.len()) as StreamId);
        TrafficShape::Direct(DirectTraffic {
            senders,
            receivers,
            messages: self.messages,
            pace: Pace::Every(self.interval),
            size: self.size.seeded(cx.seed),
            stream_base,
        })
    }
}
