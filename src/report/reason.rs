//! Why a check failed, in one line with an example: what the report's first line, the JSON
//! and the HTML say of each failed check, so a user sees the cause without reading tables.
//! What the reason quotes of a server's or an adapter's text is shown through
//! [`crate::untrusted`]: the reason stays one line whatever the server said.

use super::checks::{CheckOutcome, Measure};
use super::model::Report;
use super::present::{check, pct, show, thousands};
use crate::artifact::CheckMetric;
use crate::ledger::Problem;
use crate::metrics::{Counter, ErrorKind};
use crate::untrusted::quote;
use crate::vocab::SignalKind;

/// The one-line reason `c` failed.
pub(super) fn of(r: &Report, c: &CheckOutcome) -> String {
    let bound = format!("bound {} {}", c.op.symbol(), show(c.unit, c.bound));
    // A pseudo-check's measured column says it all.
    let Measure::Check(metric) = c.metric else {
        return check(r, c).1;
    };
    let Some(value) = c.value else {
        return format!("{}, {bound}", check(r, c).1);
    };
    let d = &r.delivery;
    let what = match metric {
        CheckMetric::Verified => verified(r),
        CheckMetric::SendErrorRate => format!(
            "{} of sends refused or failed{}",
            show(c.unit, value),
            example(r, &[ErrorKind::SendFailed, ErrorKind::Timeout])
        ),
        CheckMetric::ProtocolErrors => format!(
            "{} frames the driver did not understand{}",
            thousands(value as u64),
            example(r, &[ErrorKind::Protocol])
        ),
        CheckMetric::RepairedRate => repaired(r),
        CheckMetric::Foreign => foreign(r),
        CheckMetric::JoinFailures => format!(
            "{} group joins failed: a setup failure, and the group's messages are not expected \
             of a user that never joined{}",
            thousands(value as u64),
            example(r, &[ErrorKind::JoinFailed])
        ),
        CheckMetric::ScriptErrors => format!(
            "{} failures of the adapter script: the run did not do what the scenario asked{}",
            thousands(value as u64),
            example(r, &[ErrorKind::Script])
        ),
        CheckMetric::Recovery => recovery(r, c, value),
        CheckMetric::Lost if d.unverified > 0 => format!(
            "{} lost + {} unverified (recipients never logged in again)",
            thousands(value as u64),
            thousands(d.unverified)
        ),
        CheckMetric::Lost => format!(
            "{}{}",
            problem(r, "lost", value, Problem::Lost),
            acknowledged(r)
        ),
        CheckMetric::Duplicated => problem(r, "duplicated", value, Problem::Duplicated),
        CheckMetric::Reordered => problem(r, "reordered", value, Problem::Reordered),
        CheckMetric::Corrupted => problem(r, "corrupted", value, Problem::Corrupted),
        CheckMetric::Late => problem(r, "late", value, Problem::Late),
        CheckMetric::E2eP99
        | CheckMetric::AckP99
        | CheckMetric::RequestP99
        | CheckMetric::ReceiptP99
        | CheckMetric::TypingP99
        | CheckMetric::PresenceP99 => {
            format!("p99 {}", show(c.unit, value))
        }
        CheckMetric::ReceiptsLost
        | CheckMetric::ReceiptsDuplicated
        | CheckMetric::TypingMissed
        | CheckMetric::PresenceMissed => signal(r, metric, value),
        CheckMetric::Online => format!(
            "{} of the users the plan puts online were online over the traffic (peak {} \
             users){}",
            show(c.unit, value),
            thousands(r.connections.online_peak),
            example(r, &first_error(r))
        ),
        CheckMetric::SendLag => format!(
            "sends went out late: send lag p99 {}{}",
            show(c.unit, value),
            held_back(r)
        ),
        CheckMetric::Offered => format!(
            "the generator made {} of the sends the schedule made due{}",
            show(c.unit, value),
            held_back(r)
        ),
        CheckMetric::LoginSuccess => format!(
            "{} of logins succeeded{}",
            show(c.unit, value),
            example(r, &first_error(r))
        ),
    };
    format!("{what} ({bound})")
}

/// A signal check's reason: `value` of them, of how many were owed.
fn signal(r: &Report, metric: CheckMetric, value: f64) -> String {
    let (kind, what) = match metric {
        CheckMetric::ReceiptsDuplicated => (SignalKind::Read, "extra copies of read receipts"),
        CheckMetric::TypingMissed => (
            SignalKind::Typing,
            "typing notices a peer online was owed never arrived",
        ),
        CheckMetric::PresenceMissed => (
            SignalKind::Presence,
            "presence changes a contact online was owed never arrived",
        ),
        _ => (
            SignalKind::Read,
            "read receipts never reached their message's sender (lost, or refused by the \
             server)",
        ),
    };
    let owed = r
        .signals
        .iter()
        .find(|s| s.kind == kind)
        .map_or(0, |s| s.delivery.expected);
    format!(
        "{} {what} (of {} owed)",
        thousands(value as u64),
        thousands(owed)
    )
}

/// How long the slowest chaos step took to recover, and which it was.
fn recovery(r: &Report, c: &CheckOutcome, value: f64) -> String {
    let slowest = r
        .chaos
        .iter()
        .max_by(|a, b| {
            let k = |c: &&super::effect::ChaosRow| c.effect.recovery_s.unwrap_or(f64::MAX);
            k(a).total_cmp(&k(b))
        })
        .map_or_else(String::new, |c| match c.effect.recovery_s {
            Some(s) => format!(
                ": {} ({}) took {s:.1} s",
                quote(&c.step.key),
                quote(&c.step.outcome)
            ),
            None => format!(
                ": {} ({}) never recovered",
                quote(&c.step.key),
                quote(&c.step.outcome)
            ),
        });
    format!(
        "latency p99 and delivered rate came back within the band of their baseline {} after \
         a chaos step at the longest{slowest}",
        show(c.unit, value)
    )
}

/// Deliveries only the final verification sync found.
fn repaired(r: &Report) -> String {
    let d = &r.delivery;
    format!(
        "{} of {} deliveries arrived only through the final verification sync: the server \
             stored them but did not push them live, or the driver did not recognise its \
             pushes{}",
        thousands(d.repaired),
        thousands(d.expected),
        example(r, &[ErrorKind::Protocol])
    )
}

/// Bodies not from this run and deliveries to recipients not addressed.
fn foreign(r: &Report) -> String {
    let d = &r.delivery;
    format!(
        "{} bodies not from this run and {} deliveries to recipients that were not \
             addressed: the run measured other traffic than its own{}",
        thousands(r.errors.get(&ErrorKind::Foreign).map_or(0, |e| e.count)),
        thousands(d.unexpected),
        example(r, &[ErrorKind::Foreign])
    )
}

/// Who held the sends back: nothing to add when the generator was the limit
/// (`run.generator` says it); otherwise the target, which did not take the writes.
fn held_back(r: &Report) -> String {
    if r.generator_fell_behind() {
        return String::new();
    }
    let peak = r
        .processes
        .iter()
        .filter(|p| p.generator)
        .map(|p| p.cpu_peak_pct)
        .reduce(f64::max)
        .unwrap_or(0.0);
    let cores = r
        .generators
        .iter()
        .map(|g| g.shard.cores)
        .max()
        .unwrap_or(1);
    format!(
        " while the generator's CPU peaked at {:.0}% of its {cores} cores: its writes waited \
         on the target, which did not take the asked load",
        peak / f64::from(cores.max(1))
    )
}

/// Verified against planned work, with what kept the rest unverified.
fn verified(r: &Report) -> String {
    let d = &r.delivery;
    let requests = r.count(Counter::Requests);
    let (verified, planned) = super::checks::verified_work(d, requests, r.count(Counter::Replies));
    if planned == 0 {
        return format!(
            "nothing verified: {} sends were due but none went out on a tracked stream \
             ({} not sent: their sender was offline){}",
            thousands(r.count(Counter::Sent) + r.count(Counter::Dropped) + requests),
            thousands(r.count(Counter::Dropped)),
            example(r, &[ErrorKind::SendFailed, ErrorKind::Timeout])
        );
    }
    let refused = d.planned.saturating_sub(d.expected + d.unsent);
    let mut why = Vec::new();
    if d.unsent > 0 {
        why.push(format!(
            "{} to sends due but never made (the generator fell behind or was stopped)",
            thousands(d.unsent)
        ));
    }
    if refused > 0 {
        why.push(format!(
            "{} to sends refused or never confirmed",
            thousands(refused)
        ));
    }
    if d.unverified > 0 {
        why.push(format!(
            "{} to recipients never reached",
            thousands(d.unverified)
        ));
    }
    let unanswered = requests.saturating_sub(r.count(Counter::Replies));
    if unanswered > 0 {
        why.push(format!("{} requests unanswered", thousands(unanswered)));
    }
    format!(
        "{} of {} planned deliveries verified ({}): {}{}",
        thousands(verified),
        thousands(planned),
        pct(verified, planned),
        why.join(", "),
        example(
            r,
            &[
                ErrorKind::SendFailed,
                ErrorKind::Timeout,
                ErrorKind::RequestFailed
            ]
        )
    )
}

/// `3 duplicated, e.g. stream 5 → user 2, seq 7: another copy via push`.
fn problem(r: &Report, name: &str, value: f64, kind: Problem) -> String {
    let example = r
        .delivery
        .examples
        .iter()
        .find(|e| e.kind == kind)
        .map_or_else(String::new, |e| {
            format!(
                ", e.g. stream {} → user {}, seq {}: {}",
                e.stream,
                e.recipient,
                e.seq,
                quote(&e.detail)
            )
        });
    format!("{} {name}{example}", thousands(value as u64))
}

/// What the server said of the sends, when it acknowledges them: a lost message the server
/// accepted is one it lost after telling its sender it had it.
fn acknowledged(r: &Report) -> String {
    let (sent, accepted) = (r.count(Counter::Sent), r.count(Counter::Accepted));
    if accepted == 0 {
        return String::new();
    }
    if accepted == sent {
        format!(
            "; the server acknowledged every send ({} of {}): it lost messages it had accepted",
            thousands(accepted),
            thousands(sent)
        )
    } else {
        format!(
            "; the server acknowledged {} of {} sends",
            thousands(accepted),
            thousands(sent)
        )
    }
}

/// The most frequent error kind, if any.
fn first_error(r: &Report) -> Vec<ErrorKind> {
    r.errors
        .iter()
        .max_by_key(|(_, e)| e.count)
        .map(|(k, _)| vec![*k])
        .unwrap_or_default()
}

/// `, e.g. kind: "first example"` of the first of `kinds` that occurred.
fn example(r: &Report, kinds: &[ErrorKind]) -> String {
    kinds
        .iter()
        .find_map(|k| {
            let e = r.errors.get(k)?;
            let ex = e.examples.first()?;
            Some(format!(", e.g. {}: \"{}\"", k.name(), quote(ex)))
        })
        .unwrap_or_default()
}
