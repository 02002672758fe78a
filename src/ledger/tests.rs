//! Tests of the ledger: each problem kind, sampling, merge and serialization.

use super::*;
use proptest::prelude::*;
use std::time::Duration;

fn opts(sample: f64) -> LedgerOpts {
    LedgerOpts {
        sample,
        late_after: Duration::from_millis(100),
        examples: 3,
        verify_sync: true,
        bounds_us: Vec::new(),
        wave_us: Vec::new(),
    }
}

/// A ledger with one stream of `n` sent messages expected by recipient 7.
fn one_track(n: u64) -> Ledger {
    let mut l = Ledger::new(&opts(1.0));
    l.expect(1, 7);
    for seq in 0..n {
        l.sent(1, seq);
    }
    l
}

fn push(l: &mut Ledger, seq: u64) {
    l.received(7, 1, seq, 1_000, Via::Push, false);
}

fn problems(d: &Delivery) -> [u64; 6] {
    [
        d.lost,
        d.duplicated,
        d.reordered,
        d.corrupted,
        d.late,
        d.unexpected,
    ]
}

#[test]
fn in_order_delivery_has_no_problems() {
    let mut l = one_track(100);
    for seq in 0..100 {
        push(&mut l, seq);
    }
    let d = l.summary();
    assert_eq!(problems(&d), [0; 6]);
    assert_eq!((d.streams, d.tracks, d.sent, d.expected), (1, 1, 100, 100));
    assert_eq!((d.delivered, d.via_push), (100, 100));
    assert!(d.examples.is_empty());
    let t = &l.tracks[&(1, 7)];
    assert_eq!((t.next, t.above.capacity()), (100, 0));
}

#[test]
fn lost_messages_are_counted_by_the_part_of_their_stream() {
    let mut l = one_track(10);
    l.expect(2, 7);
    l.expect(3, 7);
    for seq in 0..5 {
        l.sent(2, seq);
        l.sent(3, seq);
    }
    for seq in (0..10).filter(|&s| s != 4) {
        push(&mut l, seq);
    }
    l.received(7, 2, 0, 1_000, Via::Push, false);
    // Stream 1 in part 0, stream 2 in part 1, stream 3 in none.
    let lost = l.lost_by(2, |s| (s < 3).then_some(s as usize - 1));
    assert_eq!(lost, vec![1, 4]);
    assert_eq!(l.summary().lost, 1 + 4 + 5);
}

#[test]
fn one_drop_is_one_lost() {
    let mut l = one_track(10);
    for seq in (0..10).filter(|&s| s != 4) {
        push(&mut l, seq);
    }
    let d = l.summary();
    assert_eq!(problems(&d), [1, 0, 0, 0, 0, 0]);
    assert_eq!(d.delivered, 9);
    assert_eq!(
        d.examples,
        vec![Example {
            kind: Problem::Lost,
            stream: 1,
            recipient: 7,
            seq: 4,
            detail: "never received".into()
        }]
    );
    // A permanent hole costs one range, not one entry per later message.
    assert_eq!(l.tracks[&(1, 7)].above, vec![(5, 10)]);
}

#[test]
fn one_duplicate_is_one_duplicated() {
    let mut l = one_track(5);
    for seq in [0, 1, 2, 2, 3, 4] {
        push(&mut l, seq);
    }
    let d = l.summary();
    assert_eq!(problems(&d), [0, 1, 0, 0, 0, 0]);
    assert_eq!(d.delivered, 5);
    assert_eq!(d.examples[0].detail, "another copy via push");
}

#[test]
fn a_swap_is_one_reordered() {
    let mut l = one_track(5);
    for seq in [0, 2, 1, 3, 4] {
        push(&mut l, seq);
    }
    let d = l.summary();
    assert_eq!(problems(&d), [0, 0, 1, 0, 0, 0]);
    assert_eq!(d.delivered, 5);
    assert_eq!(
        (d.examples[0].seq, &*d.examples[0].detail),
        (1, "arrived after seq 2")
    );
}

#[test]
fn corrupt_is_corrupted_not_lost() {
    let mut l = one_track(3);
    push(&mut l, 0);
    l.received(7, 1, 1, 1_000, Via::Push, true);
    push(&mut l, 2);
    let d = l.summary();
    assert_eq!(problems(&d), [0, 0, 0, 1, 0, 0]);
    assert_eq!(d.delivered, 2);
}

#[test]
fn repair_is_repaired_not_lost() {
    let mut l = one_track(3);
    push(&mut l, 0);
    push(&mut l, 2);
    l.received(7, 1, 1, 5_000_000, Via::Repair, false);
    // The final sync also returns what was pushed: not a duplicate.
    l.received(7, 1, 2, 5_000_000, Via::Repair, false);
    let d = l.summary();
    assert_eq!(problems(&d), [0; 6]);
    assert_eq!((d.delivered, d.via_push, d.repaired), (3, 2, 1));
}

#[test]
fn sync_catch_up_is_normal_delivery() {
    let mut l = one_track(3);
    // A late user: a live push arrives before the catch-up of older messages (the driver
    // leaves the pushed one out of the catch-up).
    push(&mut l, 2);
    l.received(7, 1, 0, 60_000_000, Via::Sync, false);
    l.received(7, 1, 1, 60_000_000, Via::Sync, false);
    let d = l.summary();
    assert_eq!(problems(&d), [0; 6]);
    assert_eq!((d.delivered, d.via_sync), (3, 2));
}

#[test]
fn sends_not_made_while_the_sender_was_offline_are_not_planned() {
    // `planned` is what the traffic asked to deliver; a send due while its
    // sender was offline was never made, so it is neither expected nor planned, while a
    // refused one was planned and not verified.
    let mut l = one_track(0);
    l.sent(1, 0);
    l.refused(1, 1);
    l.dropped(1, 2);
    l.sent(1, 3);
    let d = l.summary();
    assert_eq!((d.planned, d.expected, d.refused), (3, 2, 2), "{d:?}");
    let json = serde_json::to_string(&l).expect("encode");
    let back: Ledger = serde_json::from_str(&json).expect("decode");
    assert_eq!(back, l);
    let mut merged = one_track(0);
    merged.merge(&l);
    assert_eq!(merged.summary().planned, 3);
}

#[test]
fn a_second_copy_in_a_catch_up_is_duplicated() {
    // A server that stored a message twice replays both copies to a user that
    // was offline; the catch-up hands out each stored copy once, so the second counts.
    let mut l = one_track(2);
    l.received(7, 1, 0, 60_000_000, Via::Sync, false);
    l.received(7, 1, 0, 60_000_000, Via::Sync, false);
    l.received(7, 1, 1, 60_000_000, Via::Sync, false);
    push(&mut l, 1);
    let d = l.summary();
    assert_eq!((d.delivered, d.via_sync, d.duplicated), (2, 2, 2));
}

#[test]
fn late_push_is_late_and_delivered() {
    let mut l = one_track(2);
    push(&mut l, 0);
    l.received(7, 1, 1, 250_000, Via::Push, false);
    let d = l.summary();
    assert_eq!(problems(&d), [0, 0, 0, 0, 1, 0]);
    assert_eq!(d.delivered, 2);
    assert_eq!(d.examples[0].detail, "delivered 250.0 ms after due");
}

#[test]
fn refused_is_expected_nowhere() {
    let mut l = one_track(3);
    l.refused(1, 3);
    push(&mut l, 0);
    push(&mut l, 1);
    push(&mut l, 2);
    let d = l.summary();
    assert_eq!((d.sent, d.refused, d.expected, d.lost), (4, 1, 3, 0));
}

#[test]
fn unregistered_recipient_is_unexpected() {
    let mut l = one_track(1);
    push(&mut l, 0);
    l.received(8, 1, 0, 0, Via::Push, false);
    l.received(8, 1, 0, 0, Via::Push, false);
    let d = l.summary();
    assert_eq!(problems(&d), [0, 0, 0, 0, 0, 1]);
    assert_eq!((d.tracks, d.delivered), (1, 1));
}

#[test]
fn damaged_is_counted() {
    let mut l = Ledger::new(&opts(0.0));
    assert!(l.is_empty());
    l.damaged();
    assert!(!l.is_empty());
    assert_eq!(l.summary().damaged, 1);
}

#[test]
fn examples_are_capped_to_the_smallest() {
    let mut l = one_track(10);
    for seq in (0..10).rev() {
        push(&mut l, seq);
    }
    let d = l.summary();
    assert_eq!(d.reordered, 9);
    let seqs: Vec<u64> = d.examples.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 1, 2]);
}

#[test]
fn sampling_is_deterministic_and_near_the_rate() {
    let a = Ledger::new(&opts(0.1));
    let b = Ledger::new(&opts(0.1));
    let picked: Vec<u32> = (0..100_000).filter(|&s| a.sampled(s)).collect();
    assert!(picked.iter().all(|&s| b.sampled(s)));
    assert!((9_000..11_000).contains(&picked.len()), "{}", picked.len());
    // Fixed forever: results of different versions must agree.
    assert_eq!(&picked[..5], [10, 18, 21, 41, 48]);
    let none = Ledger::new(&opts(0.0));
    let all = Ledger::new(&opts(1.0));
    assert!((0..1000).all(|s| !none.sampled(s) && all.sampled(s)));
}

#[test]
fn unsampled_streams_are_ignored() {
    let mut l = Ledger::new(&opts(0.1));
    let s = (0..)
        .find(|&s| !l.sampled(s))
        .expect("some stream is not sampled");
    l.expect(s, 1);
    l.sent(s, 0);
    l.received(1, s, 0, 0, Via::Push, false);
    assert!(l.is_empty());
}

#[test]
fn bad_serialized_ranges_are_rejected() {
    let mut l = one_track(3);
    push(&mut l, 2);
    let mut v = serde_json::to_value(&l).expect("serializes");
    v["tracks"][0][4] = serde_json::json!([[1, 1]]);
    assert!(serde_json::from_value::<Ledger>(v).is_err());
}

/// One ledger event.
#[derive(Debug, Clone)]
enum Ev {
    Expect(StreamId, UserIx),
    Sent(StreamId, u64),
    Refused(StreamId, u64),
    Received(UserIx, StreamId, u64, u64, Via, bool),
    Damaged(UserIx),
}

impl Ev {
    fn apply(&self, l: &mut Ledger) {
        match *self {
            Ev::Expect(s, u) => l.expect(s, u),
            Ev::Sent(s, q) => l.sent(s, q),
            Ev::Refused(s, q) => l.refused(s, q),
            Ev::Received(u, s, q, lat, via, c) => {
                l.received(u, s, q, lat, via, c);
            }
            Ev::Damaged(_) => l.damaged(),
        }
    }

    /// Which ledger gets this event in a split: receiver-side events by recipient (as
    /// shards own recipients), sender-side events freely.
    fn side(&self, free: bool, users_in_a: u32) -> bool {
        match *self {
            Ev::Expect(_, u) | Ev::Received(u, ..) | Ev::Damaged(u) => u < users_in_a,
            _ => free,
        }
    }
}

fn event() -> impl Strategy<Value = Ev> {
    let via = prop_oneof![Just(Via::Push), Just(Via::Sync), Just(Via::Repair)];
    prop_oneof![
        (0u32..6, 0u32..4).prop_map(|(s, u)| Ev::Expect(s, u)),
        (0u32..6, 0u64..12).prop_map(|(s, q)| Ev::Sent(s, q)),
        (0u32..6, 0u64..12).prop_map(|(s, q)| Ev::Refused(s, q)),
        (
            0u32..4,
            0u32..6,
            0u64..12,
            0u64..200_000,
            via,
            prop::bool::weighted(0.1)
        )
            .prop_map(|(u, s, q, lat, via, c)| Ev::Received(u, s, q, lat, via, c)),
        (0u32..4).prop_map(Ev::Damaged),
    ]
}

fn roundtrip(l: &Ledger) -> Ledger {
    serde_json::from_str(&serde_json::to_string(l).expect("serializes")).expect("parses")
}

proptest! {
    #[test]
    fn merge_equals_one_ledger(
        mut events in prop::collection::vec(event(), 0..200),
        split in prop::collection::vec(any::<bool>(), 200),
        users_in_a in 0u32..5,
        sample in prop_oneof![Just(1.0), Just(0.5)],
    ) {
        // Registration comes first, as in a run.
        events.sort_by_key(|e| !matches!(e, Ev::Expect(..)));
        let o = opts(sample);
        let (mut one, mut a, mut b) = (Ledger::new(&o), Ledger::new(&o), Ledger::new(&o));
        for (e, free) in events.iter().zip(&split) {
            e.apply(&mut one);
            e.apply(if e.side(*free, users_in_a) { &mut a } else { &mut b });
        }
        a.merge(&b);
        prop_assert_eq!(a.summary(), one.summary());
        prop_assert_eq!(&a, &one);
        prop_assert_eq!(
            serde_json::to_string(&a).expect("serializes"),
            serde_json::to_string(&one).expect("serializes")
        );
        prop_assert_eq!(&roundtrip(&one), &one);
        // Merging an empty ledger changes nothing.
        let mut c = one.clone();
        c.merge(&Ledger::new(&o));
        prop_assert_eq!(&c, &one);
    }
}

#[test]
fn arrival_tells_first_copies_from_repeats() {
    let mut l = Ledger::new(&opts(1.0));
    l.expect(1, 7);
    l.sent(1, 0);
    assert_eq!(l.received(7, 1, 0, 10, Via::Push, false), Arrival::First);
    assert_eq!(l.received(7, 1, 0, 10, Via::Push, false), Arrival::Again);
    assert_eq!(l.received(7, 1, 0, 10, Via::Repair, false), Arrival::Again);
    assert_eq!(
        l.received(8, 1, 0, 10, Via::Push, false),
        Arrival::Again,
        "not expected"
    );
}

/// Found by the `ledger` fuzz target: a received seq of `u64::MAX` made an empty range
/// `(MAX, MAX)`, counted every copy as a first one, and the ledger's own serialization
/// was refused on reading back.
#[test]
fn seq_u64_max_is_damaged_not_delivered() {
    let mut l = one_track(2);
    for _ in 0..2 {
        let got = l.received(7, 1, u64::MAX, 1_000, Via::Push, false);
        assert_eq!(got, Arrival::Again);
    }
    let d = l.summary();
    assert_eq!((d.delivered, d.duplicated, d.damaged, d.lost), (0, 0, 2, 2));
    let text = serde_json::to_string(&l).expect("encodes");
    let back: Ledger = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, l);
}

#[test]
fn an_unreached_recipient_is_unverified_in_the_merge_and_after_a_round_trip() {
    let opts = LedgerOpts {
        sample: 1.0,
        late_after: Duration::from_secs(1),
        examples: 3,
        verify_sync: true,
        bounds_us: Vec::new(),
        wave_us: Vec::new(),
    };
    let mut sender = Ledger::new(&opts);
    let mut receivers = Ledger::new(&opts);
    for seq in 0..4 {
        sender.sent(1, seq);
    }
    receivers.expect(1, 10);
    receivers.expect(1, 11);
    receivers.received(10, 1, 0, 5, Via::Push, false);
    receivers.received(11, 1, 0, 5, Via::Push, false);
    receivers.unreached(11);
    let mut l = sender.clone();
    l.merge(&receivers);
    let d = l.summary();
    assert_eq!(
        (d.expected, d.delivered, d.lost, d.unverified),
        (8, 2, 3, 3),
        "{d:?}"
    );
    let kinds: Vec<_> = d.examples.iter().map(|e| (e.kind, e.recipient)).collect();
    assert!(kinds.contains(&(Problem::Unverified, 11)), "{kinds:?}");
    assert!(kinds.contains(&(Problem::Lost, 10)), "{kinds:?}");
    let json = serde_json::to_string(&l).unwrap();
    let back: Ledger = serde_json::from_str(&json).unwrap();
    assert_eq!(back, l);
    assert_eq!(back.summary(), d);
    // A file without the field (written before it existed) still reads.
    let old = json.replace(",\"unreached\":[11]", "");
    assert_ne!(old, json);
    let back: Ledger = serde_json::from_str(&old).unwrap();
    assert_eq!(back.summary().unverified, 0);
}

/// A recipient that could not join a group expects nothing of the group's
/// streams (a setup failure, not loss); its other streams are judged as before.
#[test]
fn an_unjoined_recipient_expects_nothing_of_those_streams() {
    let mut l = Ledger::new(&opts(1.0));
    for stream in [1, 2] {
        l.expect(stream, 7);
        for seq in 0..3 {
            l.sent(stream, seq);
        }
    }
    l.received(7, 2, 0, 5, Via::Push, false);
    l.unjoined(7, &[1, 9]);
    let d = l.summary();
    assert_eq!((d.tracks, d.expected, d.lost), (1, 3, 2), "{d:?}");
    assert!(d.examples.iter().all(|e| e.stream == 2), "{d:?}");
}

/// With chaos bounds, every delivery and every loss is also counted in the span its
/// message was due in — lost ones placed by the stream's cuts, sent in one process and
/// received in another — and the spans add up to the totals, also through a merge and
/// through serialization.
#[test]
fn spans_between_chaos_bounds_add_up_to_the_totals() {
    let o = LedgerOpts {
        bounds_us: vec![2_000_000, 4_000_000],
        ..opts(1.0)
    };
    // Seqs 0..10 due every 0.5 s: spans 0 (0..4), 1 (4..8), 2 (8..10).
    let span = |seq: u64| Ledger::span_of(&o.bounds_us, seq * 500_000);
    let mut sender = Ledger::new(&o);
    for seq in 0..10 {
        sender.sent_in(
            1,
            seq,
            When {
                span: span(seq),
                wave: 0,
            },
        );
    }
    let mut receiver = Ledger::new(&o);
    receiver.expect(1, 7);
    for seq in [0, 1, 2, 3, 4, 7, 8, 9, 9] {
        receiver.received_in(7, 1, seq, 1_000, Via::Push, false, span(seq));
    }
    let mut l = sender.clone();
    l.merge(&receiver);
    let spans = l.spans(&[2_000_000]);
    let lost: Vec<u64> = spans.iter().map(|s| s.lost).collect();
    let dup: Vec<u64> = spans.iter().map(|s| s.duplicated).collect();
    let delivered: Vec<u64> = spans.iter().map(|s| s.delivered).collect();
    assert_eq!(lost, vec![0, 2, 0], "seqs 5 and 6, due in the middle span");
    assert_eq!(dup, vec![0, 0, 1]);
    assert_eq!(delivered, vec![4, 2, 2]);
    let d = l.summary();
    assert_eq!((d.lost, d.duplicated, d.delivered), (2, 1, 8));
    let back: Ledger = serde_json::from_str(&serde_json::to_string(&l).expect("ser")).expect("de");
    assert_eq!(back, l);
    assert_eq!(back.spans(&[2_000_000]), spans);
}

/// A lost message still on its way when a step began — its recipient received nothing
/// later of its stream due before the step — is charged to the step's span, not to the
/// span it was due in; one skipped while later ones arrived stays where it was due.
#[test]
fn a_loss_still_on_its_way_when_a_step_began_is_charged_to_the_step() {
    let o = LedgerOpts {
        bounds_us: vec![2_000_000],
        ..opts(1.0)
    };
    // Seqs 0..10 due every 0.5 s: span 0 (0..4) before an instant step at 2 s, span 1 after.
    let span = |seq: u64| Ledger::span_of(&o.bounds_us, seq * 500_000);
    let mut l = Ledger::new(&o);
    l.expect(1, 7);
    for seq in 0..10 {
        l.sent_in(
            1,
            seq,
            When {
                span: span(seq),
                wave: 0,
            },
        );
    }
    for seq in [0, 2, 6, 7, 8, 9] {
        l.received_in(7, 1, seq, 1_000, Via::Push, false, span(seq));
    }
    let lost = |starts: &[u64]| -> Vec<u64> { l.spans(starts).iter().map(|s| s.lost).collect() };
    assert_eq!(
        lost(&[2_000_000]),
        vec![1, 3],
        "seq 1 was skipped before the step (2 came); 3 was on its way when it began"
    );
    assert_eq!(
        lost(&[]),
        vec![2, 2],
        "by due time when the bound starts no step"
    );
    assert_eq!(l.summary().lost, 4);
}

/// With a login wave, every lost message is told by whether it was due in the wave —
/// placed by its stream's wave cuts, sent from two processes and received in a third —
/// and the two add up to the total, also through serialization.
#[test]
fn lost_messages_are_told_by_whether_they_were_due_in_the_login_wave() {
    let o = LedgerOpts {
        wave_us: vec![0, 1_000_000, 3_000_000, 4_000_000],
        ..opts(1.0)
    };
    // Seqs 0..10 due every 0.5 s: 0, 1 (0–1 s) and 6, 7 (3–4 s) in the wave.
    let when = |seq: u64| When {
        span: 0,
        wave: Ledger::span_of(&o.wave_us, seq * 500_000),
    };
    let (mut l, mut second) = (Ledger::new(&o), Ledger::new(&o));
    for seq in 0..10 {
        if seq < 5 { &mut l } else { &mut second }.sent_in(1, seq, when(seq));
    }
    let mut receiver = Ledger::new(&o);
    receiver.expect(1, 7);
    for seq in [0, 2, 4, 5, 8] {
        receiver.received(7, 1, seq, 1_000, Via::Push, false);
    }
    l.merge(&second);
    l.merge(&receiver);
    assert_eq!(l.summary().lost, 5);
    assert_eq!(
        l.lost_by_wave(),
        Some([3, 2]),
        "1, 6, 7 in the wave; 3, 9 not"
    );
    let back: Ledger = serde_json::from_str(&serde_json::to_string(&l).expect("ser")).expect("de");
    assert_eq!(back.lost_by_wave(), Some([3, 2]));
    assert_eq!(Ledger::new(&opts(1.0)).lost_by_wave(), None);
}

#[test]
fn sends_due_but_never_made_are_planned_and_unsent_never_lost() {
    let mut l = one_track(6);
    l.due(1, 10);
    for seq in 0..6 {
        push(&mut l, seq);
    }
    let d = l.summary();
    assert_eq!((d.planned, d.expected, d.unsent, d.lost), (10, 6, 4, 0));
    // The due count survives a round trip and a merge (the largest of both).
    let back: Ledger =
        serde_json::from_str(&serde_json::to_string(&l).expect("json")).expect("read back");
    assert_eq!(back.summary().planned, 10);
    let mut other = Ledger::new(&opts(1.0));
    other.due(1, 12);
    l.merge(&other);
    assert_eq!(l.summary().unsent, 6);
}

#[test]
fn a_recipient_cut_off_before_its_final_check_is_unverified_not_lost() {
    let mut l = one_track(10);
    for seq in 0..7 {
        push(&mut l, seq);
    }
    l.unreached(7);
    let d = l.summary();
    assert_eq!((d.lost, d.unverified), (0, 3));
}
