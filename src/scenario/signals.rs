//! `[signals]`: what users send besides messages — read receipts, typing notices and
//! presence — checked against what the driver offers.
//!
//! - `receipts`: the share of received messages a user reads; each read sends a receipt to
//!   the message's sender `read_delay` after the message arrived (push or catch-up).
//! - `typing`: the share of direct sends preceded by a typing notice `typing_lead` before
//!   the send is due.
//! - `presence`: every login and logout is published to the user's contacts (the
//!   population's contact graph, `[population.contacts]` or its default).
//! - `within`: a recipient is owed a typing notice or a presence change when it was online
//!   when it was sent and stayed online this long after.
//!
//! Which messages are read, when, and which sends are typed are pure functions of the
//! seed and the message, so every shard and a re-run agree.

use std::time::Duration;

use toml::Spanned;

use super::dist::{durations, ThinkTimes};
use super::schema::SignalsSpec;
use super::source::Source;
use super::values::{duration, positive, unit};
use crate::driver::Signals;
use crate::Result;

/// Default `signals.read_delay`: half of the reads within 2 s, a few after a minute.
pub const READ_DELAY: ThinkTimes = ThinkTimes::Lognormal {
    median: Duration::from_secs(2),
    spread: 1.0,
};
/// Default `signals.typing_lead`.
pub const TYPING_LEAD: Duration = Duration::from_secs(1);
/// Default `signals.within`.
pub const WITHIN: Duration = Duration::from_secs(5);

/// `[signals]`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalsPlan {
    /// Share of received messages read and receipted (0: no receipts).
    pub receipts: f64,
    /// How long after its arrival a message is read.
    pub read_delay: ThinkTimes,
    /// Share of direct sends preceded by a typing notice (0: none).
    pub typing: f64,
    /// How long before its send a typing notice is due.
    pub typing_lead: Duration,
    /// Logins and logouts are published to contacts.
    pub presence: bool,
    /// How long a recipient must stay online after a typing notice or presence change to
    /// be owed it.
    pub within: Duration,
}

impl SignalsPlan {
    /// What the users will signal, in words (`msgstorm validate` prints it).
    pub fn describe(&self) -> String {
        let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
        let mut parts = Vec::new();
        if self.receipts > 0.0 {
            parts.push(format!(
                "read receipts for {:.0}% of the messages received, read a mean {} after they arrive",
                self.receipts * 100.0,
                secs(self.read_delay.mean())
            ));
        }
        if self.typing > 0.0 {
            parts.push(format!(
                "typing {} before {:.0}% of the direct sends",
                secs(self.typing_lead),
                self.typing * 100.0
            ));
        }
        if self.presence {
            parts.push("presence at every login and logout to the contacts".to_owned());
        }
        format!(
            "signals: {}; owed to recipients online {} after",
            parts.join(", "),
            secs(self.within)
        )
    }

    /// The signals it asks for.
    pub fn asks(&self) -> Signals {
        Signals {
            receipts: self.receipts > 0.0,
            typing: self.typing > 0.0,
            presence: self.presence,
            ..Signals::default()
        }
    }
}

/// Validates `[signals]` against the driver's `offered` signals; `None` when it asks for
/// none.
pub fn signals(
    src: &Source<'_>,
    spec: Option<&Spanned<SignalsSpec>>,
    driver: &str,
    offered: Signals,
) -> Result<Option<SignalsPlan>> {
    let Some(spec) = spec else { return Ok(None) };
    let s = spec.get_ref();
    let share = |v: &Option<Spanned<f64>>, key: &str| match v {
        Some(v) => src.value(v, key, unit),
        None => Ok(0.0),
    };
    let plan = SignalsPlan {
        receipts: share(&s.receipts, "signals.receipts")?,
        read_delay: match &s.read_delay {
            Some(v) => durations(src, v, "signals.read_delay")?,
            None => READ_DELAY,
        },
        typing: share(&s.typing, "signals.typing")?,
        typing_lead: match &s.typing_lead {
            Some(v) => src.value(v, "signals.typing_lead", duration)?,
            None => TYPING_LEAD,
        },
        presence: s.presence.as_ref().is_some_and(|p| *p.get_ref()),
        within: match &s.within {
            Some(v) => src.value(v, "signals.within", positive)?,
            None => WITHIN,
        },
    };
    let asks = plan.asks();
    // What turns a signal on in the driver's options, when an option does.
    let hint = |i: usize| match offered.keys[i] {
        "" => String::new(),
        key => format!(" (`{key}` is not set)"),
    };
    let lacking = [
        (
            asks.receipts && !offered.receipts,
            "receipts",
            "read receipts",
            &s.receipts,
        ),
        (
            asks.typing && !offered.typing,
            "typing",
            "typing notices",
            &s.typing,
        ),
    ];
    for (i, (missing, key, what, v)) in lacking.into_iter().enumerate() {
        if let (true, Some(v)) = (missing, v) {
            return Err(src.at(
                v,
                format!("signals.{key}"),
                format!("driver `{driver}` sends no {what}{}", hint(i)),
            ));
        }
    }
    if let (true, Some(v)) = (asks.presence && !offered.presence, &s.presence) {
        return Err(src.at(
            v,
            "signals.presence",
            format!("driver `{driver}` publishes no presence{}", hint(2)),
        ));
    }
    Ok((asks != Signals::default()).then_some(plan))
}
