//! Warnings: scenarios that are valid but cannot verify what they claim, because the
//! driver's way of fetching what a user missed (its [`Caps`]) needs something the plan does
//! not give it. Each is one line, `warning: FILE:LINE: KEY: what will happen and the fix`;
//! `msgstorm validate` and `msgstorm run` print them to stderr and go on (exit 0).
//!
//! - A driver whose fetch resumes from something the user received (Socket.IO's offset)
//!   with late or churning users: one the server sent nothing before it went offline
//!   fetches nothing, and what it missed looks lost.
//! - A driver that gives a member coming back only the last `n` messages of a group (XMPP
//!   room history) with group traffic that sends more than `n` to a group while a late or
//!   churning member is away: the older ones look lost.
//!
//! [`Caps`]: crate::driver::Caps

use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::arrival;
use super::kinds::GroupSends;
use super::plan::Target;
use super::population::Pop;
use super::schema::PopulationSpec;
use super::source::Source;
use super::traffic::Pattern;
use super::values::show;

/// The warnings about a validated scenario, in the order of their keys.
pub fn warnings(
    src: &Source<'_>,
    spec: &Spanned<PopulationSpec>,
    pop: &Pop,
    traffic: &[Pattern],
    target: &Target,
) -> Vec<String> {
    let caps = target.caps;
    let driver = target.driver.name;
    if !caps.fetch_missed {
        // Late and churning users are refused outright (`validate::missed_messages`).
        return Vec::new();
    }
    let p = spec.get_ref();
    // Who is away, from when to when (from the run's start), and where the scenario says so.
    let mut away: Vec<(&str, Range<usize>, Duration, Duration)> = Vec::new();
    if let (Some(l), true) = (&p.late, pop.late > 0) {
        away.push(("population.late", l.span(), Duration::ZERO, pop.late_at));
    }
    if let (Some(c), true) = (&p.churn, pop.churn > 0) {
        let window = (pop.churn_offline_at, pop.churn_back_at);
        away.push(("population.churn", c.span(), window.0, window.1));
    }
    let warn = |span: Range<usize>, key: &str, msg: String| {
        format!("warning: {}", src.error(span, key, msg))
    };
    let mut out = Vec::new();
    if let (true, Some((key, span, _, _))) = (caps.fetch_needs_receipt, away.first()) {
        out.push(warn(
            span.clone(),
            key,
            format!(
                "driver `{driver}` fetches what a user missed only from a point the user \
                 received before it went offline (Socket.IO: the offset of a packet); a late \
                 or churning user the server has sent nothing by then reconnects without one, \
                 and everything it missed is reported as lost (counted as \
                 `resumes_without_offset`). Make the server send each user a first message \
                 when it connects, and name it in the driver's options (Socket.IO: \
                 `target.socketio.welcome_event`) so a user going offline waits for it \
                 (docs/drivers/{driver}.md)"
            ),
        ));
    }
    let Some(kept) = caps.group_history else {
        return out;
    };
    let traffic_start = arrival::end(&pop.arrival);
    for (key, span, from, to) in &away {
        let most = traffic
            .iter()
            .filter_map(|t| Some((t, per_group(t, traffic_start, *from, *to)?)))
            .max_by_key(|(_, n)| *n);
        let Some((t, n)) = most.filter(|(_, n)| *n > u64::from(kept)) else {
            continue;
        };
        let who = if *key == "population.late" {
            format!("late users are away (until {})", show(*to))
        } else {
            format!("churning users are away ({} to {})", show(*from), show(*to))
        };
        out.push(warn(
            span.clone(),
            key,
            format!(
                "traffic `{}` sends about {n} messages to a group while {who}, and driver \
                 `{driver}` gives a member that comes back only the last {kept} of a group's \
                 messages (its room history): the older ones would be reported as lost. \
                 Raise the history (docs/drivers/{driver}.md) or send less to groups \
                 meanwhile",
                t.name
            ),
        ));
    }
    out
}

/// Messages pattern `t` sends to one group between `from` and `to` (from the run's start),
/// when it is group traffic; its sends start at `traffic_start` + its own start.
fn per_group(t: &Pattern, traffic_start: Duration, from: Duration, to: Duration) -> Option<u64> {
    let GroupSends {
        senders_per_group,
        messages,
        interval,
    } = t.numbers.group_sends()?;
    let first = traffic_start + t.start;
    let end = t.duration.map_or(to, |d| to.min(first + d));
    // Sends k = 0, 1, … go out at `first + k · interval`; those in [from, end) count.
    let before = |at: Duration| -> u64 {
        let since = at.saturating_sub(first).as_nanos();
        let step = interval.as_nanos().max(1);
        u64::try_from(since.div_ceil(step)).unwrap_or(u64::MAX)
    };
    let cap = messages.unwrap_or(u64::MAX);
    let sent = before(end).min(cap).saturating_sub(before(from).min(cap));
    Some(sent.saturating_mul(u64::from(senders_per_group)))
}
