//! Read receipts, typing and presence over the loopback hub, on tokio's paused clock.

use super::tests::{plan, run_loopback, DAY};
use crate::artifact::SignalRecord;
use crate::driver::loopback::LoopbackOptions;
use crate::metrics::Hist;
use crate::vocab::SignalKind;

/// [`DAY`] with every signal: half the messages read, half the direct sends typed.
fn day_with_signals() -> String {
    format!(
        "{DAY}\n[target]\ndriver = \"loopback\"\n[signals]\nreceipts = 0.5\nread_delay = {{ exponential = \"500ms\" }}\n\
         typing = 0.5\ntyping_lead = \"300ms\"\npresence = true\nwithin = \"1s\"\n"
    )
}

#[tokio::test(start_paused = true)]
async fn every_receipt_typing_notice_and_presence_owed_arrives_once_over_a_day() {
    let plan = plan(&day_with_signals());
    let (out, d, _) = run_loopback(&plan, LoopbackOptions::default()).await;
    assert_eq!(
        (d.lost, d.duplicated),
        (0, 0),
        "messages still exact: {d:?}"
    );
    let record = SignalRecord::of(&plan, out.signals).expect("signals asked");
    let rows = record.summary();
    let row = |k: SignalKind| rows.iter().find(|r| r.kind == k).expect("asked").delivery;
    let read = row(SignalKind::Read);
    // About half of the deliveries, less those not yet read when the run closed.
    assert!(
        read.sent > d.delivered / 4 && read.sent < d.delivered * 6 / 10,
        "{read:?} of {} delivered",
        d.delivered
    );
    assert_eq!(
        (read.missing, read.duplicated, read.refused),
        (0, 0, 0),
        "{read:?}"
    );
    assert_eq!(read.arrived, read.expected);
    assert!(
        read.via_sync > 10,
        "receipts of senders away come by fetch: {read:?}"
    );
    let typing = row(SignalKind::Typing);
    assert!(typing.expected > 100, "{typing:?}");
    assert_eq!((typing.missing, typing.duplicated), (0, 0), "{typing:?}");
    // Group sends are typed too, each notice owed to the group's other members online.
    assert!(
        record.groups.len() > 5,
        "typing in groups: {}",
        record.groups.len()
    );
    let presence = row(SignalKind::Presence);
    assert!(presence.sent > 400, "every login and logout: {presence:?}");
    assert!(presence.expected > 200, "{presence:?}");
    assert_eq!(
        (presence.missing, presence.duplicated),
        (0, 0),
        "{presence:?}"
    );
    for h in [Hist::Receipt, Hist::Typing, Hist::Presence] {
        assert!(!out.metrics.hist(h).is_empty(), "{h:?} measured");
    }
    // On the paused clock a signal arrives when it is made: a typing notice due before the
    // traffic or before the send ahead of it would count that wait as latency.
    let typing_p99 = out.metrics.hist(Hist::Typing).value_at_quantile(0.99);
    assert!(typing_p99 < 10_000, "typing p99 {typing_p99} µs");
    assert_eq!(out.metrics.errors().count(), 0, "{:?}", out.metrics);
}

#[tokio::test(start_paused = true)]
async fn a_lost_receipt_push_is_found_by_the_senders_fetch_and_a_lost_one_counted() {
    let text = day_with_signals();
    let (out, d, injected) = run_loopback(
        &plan(&text),
        LoopbackOptions {
            drop: 0.05,
            loss: 0.01,
            ..LoopbackOptions::default()
        },
    )
    .await;
    assert!(injected.lost > 0 && injected.dropped > 0, "{injected:?}");
    let record = SignalRecord::of(&plan(&text), out.signals).expect("signals asked");
    let read = record.summary()[0].delivery;
    assert!(read.missing > 0, "receipts the hub lost are lost: {read:?}");
    assert_eq!(read.arrived + read.missing, read.expected);
    assert!(d.lost > 0, "messages too: {d:?}");
}

/// A pattern that sets its own shares: every message of the `support` pattern is read and
/// none of the day's chat, and the support pattern's direct sends are all typed.
#[tokio::test(start_paused = true)]
async fn a_pattern_that_sets_its_own_shares_reads_and_types_its_messages_alone() {
    let text = format!(
        "{DAY}\n[[traffic]]\nname = \"support\"\nkind = \"chat\"\nrate = 2\n\n\
         [target]\ndriver = \"loopback\"\n[signals]\nreceipts = 0.0\nread_delay = \"100ms\"\n\
         [signals.pattern.support]\nreceipts = 1.0\ntyping = 1.0\n"
    );
    let plan = plan(&text);
    let (out, d, _) = run_loopback(&plan, LoopbackOptions::default()).await;
    let record = SignalRecord::of(&plan, out.signals).expect("signals asked");
    let rows = record.summary();
    let row = |k: SignalKind| rows.iter().find(|r| r.kind == k).expect("asked").delivery;
    // About 40 support messages (2/s over 20 s), each read once by its recipient; the
    // day's thousands of chat messages by nobody.
    let read = row(SignalKind::Read);
    assert!(d.delivered > 1000, "{d:?}");
    assert!(
        (20..=70).contains(&read.sent),
        "receipts for the support messages only: {read:?}"
    );
    assert_eq!((read.missing, read.duplicated), (0, 0), "{read:?}");
    // Typing only before support sends, the run's share being 0.
    let typing = row(SignalKind::Typing);
    assert!(
        (20..=70).contains(&typing.sent),
        "typing before the support sends only: {typing:?}"
    );
}
