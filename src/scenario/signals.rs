//! `[signals]`: what users send besides messages — read receipts, typing notices and
//! presence — checked against what the driver offers.
//!
//! - `receipts`: the share of received messages a user reads; each read sends a receipt to
//!   the message's sender `read_delay` after the message arrived (push or catch-up).
//! - `typing`: the share of sends (direct and group) preceded by a typing notice `typing_lead` before
//!   the send is due.
//! - `presence`: every login and logout is published to the user's contacts (the
//!   population's contact graph, `[population.contacts]` or its default).
//! - `within`: a recipient is owed a typing notice or a presence change when it was online
//!   when it was sent and stayed online this long after.
//! - `[signals.pattern.NAME]`: `receipts` and `typing` for the messages of one `[[traffic]]`
//!   pattern, in place of the run's (a support channel whose every message is read beside
//!   a chat where a few are).
//!
//! Which messages are read, when, and which sends are typed are pure functions of the
//! seed and the message, so every shard and a re-run agree.

use std::time::Duration;

use toml::Spanned;

use super::dist::{durations, ThinkTimes};
use super::schema::{Opt, PatternSignalsSpec, SignalsSpec};
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
    /// Share of sends (direct and group) preceded by a typing notice (0: none).
    pub typing: f64,
    /// How long before its send a typing notice is due.
    pub typing_lead: Duration,
    /// Logins and logouts are published to contacts.
    pub presence: bool,
    /// How long a recipient must stay online after a typing notice or presence change to
    /// be owed it.
    pub within: Duration,
    /// Shares of the patterns that set their own, in the scenario's order of names.
    pub patterns: Vec<PatternShares>,
}

/// The shares one traffic pattern sets for its messages (`[signals.pattern.NAME]`).
#[derive(Debug, Clone, PartialEq)]
pub struct PatternShares {
    /// The `[[traffic]]` pattern's name.
    pub pattern: String,
    /// Share of its messages read (`None`: the run's).
    pub receipts: Option<f64>,
    /// Share of its sends typed (`None`: the run's).
    pub typing: Option<f64>,
}

impl PatternShares {
    /// The receipts and typing shares of this pattern, the run's `plan` where it sets none.
    pub fn or_run(&self, plan: &SignalsPlan) -> (f64, f64) {
        (
            self.receipts.unwrap_or(plan.receipts),
            self.typing.unwrap_or(plan.typing),
        )
    }
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
                "typing {} before {:.0}% of the sends",
                secs(self.typing_lead),
                self.typing * 100.0
            ));
        }
        if self.presence {
            parts.push("presence at every login and logout to the contacts".to_owned());
        }
        for p in &self.patterns {
            let (read, typed) = p.or_run(self);
            parts.push(format!(
                "pattern `{}`: {:.0}% read, {:.0}% typed",
                p.pattern,
                read * 100.0,
                typed * 100.0
            ));
        }
        format!(
            "signals: {}; owed to recipients online {} after",
            parts.join(", "),
            secs(self.within)
        )
    }

    /// The signals it asks for.
    pub fn asks(&self) -> Signals {
        let any = |share: fn(&PatternShares, &SignalsPlan) -> f64| {
            self.patterns.iter().any(|p| share(p, self) > 0.0)
        };
        Signals {
            receipts: self.receipts > 0.0 || any(|p, s| p.or_run(s).0),
            typing: self.typing > 0.0 || any(|p, s| p.or_run(s).1),
            presence: self.presence,
            ..Signals::default()
        }
    }
}

/// Validates `[signals]` against the driver's `offered` signals and the names of the
/// traffic patterns that send messages; `None` when it asks for none.
pub fn signals(
    src: &Source<'_>,
    spec: Option<&Spanned<SignalsSpec>>,
    driver: &str,
    offered: Signals,
    senders: &[&str],
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
        patterns: s
            .pattern
            .iter()
            .map(|(name, p)| pattern(src, name, p, senders))
            .collect::<Result<_>>()?,
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
            asking(s, &s.receipts, |p| &p.receipts),
        ),
        (
            asks.typing && !offered.typing,
            "typing",
            "typing notices",
            asking(s, &s.typing, |p| &p.typing),
        ),
    ];
    for (i, (missing, key, what, v)) in lacking.into_iter().enumerate() {
        if let (true, Some((path, v))) = (missing, v) {
            return Err(src.at(
                v,
                format!("{path}{key}"),
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

/// The first key of `s` that asks for a signal: the run's `run`, or a pattern's (`of` it),
/// with the path before its last part.
fn asking<'a>(
    s: &'a SignalsSpec,
    run: &'a Opt<f64>,
    of: fn(&PatternSignalsSpec) -> &Opt<f64>,
) -> Option<(String, &'a Spanned<f64>)> {
    let by_pattern = || {
        s.pattern.iter().find_map(|(name, p)| {
            of(p)
                .as_ref()
                .filter(|v| *v.get_ref() > 0.0)
                .map(|v| (format!("signals.pattern.{}.", name.get_ref()), v))
        })
    };
    run.as_ref()
        .filter(|v| *v.get_ref() > 0.0)
        .map(|v| ("signals.".to_owned(), v))
        .or_else(by_pattern)
}

/// `[signals.pattern.NAME]`, checked: `NAME` is one of the patterns that send messages.
fn pattern(
    src: &Source<'_>,
    name: &Spanned<String>,
    p: &PatternSignalsSpec,
    senders: &[&str],
) -> Result<PatternShares> {
    let key = format!("signals.pattern.{}", name.get_ref());
    if !senders.contains(&name.get_ref().as_str()) {
        let known = if senders.is_empty() {
            "none does".to_owned()
        } else {
            senders
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(src.at(
            name,
            key,
            format!("no [[traffic]] pattern of that name sends messages ({known})"),
        ));
    }
    let share = |v: &Opt<f64>, k: &str| {
        v.as_ref()
            .map(|v| src.value(v, format!("{key}.{k}"), unit))
            .transpose()
    };
    Ok(PatternShares {
        pattern: name.get_ref().clone(),
        receipts: share(&p.receipts, "receipts")?,
        typing: share(&p.typing, "typing")?,
    })
}
