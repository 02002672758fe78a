use super::*;

const S: u64 = 1_000_000;

#[test]
fn every_receipt_not_refused_is_owed_once_at_its_sender() {
    let mut b = SignalBook::default();
    for seq in 0..4 {
        b.receipt_sent(7, 3, seq);
    }
    b.receipt_refused(7, 3, 3);
    assert_eq!(
        b.arrived(SignalKind::Read, 7, 3, 0, Via::Push, false),
        SignalArrival::First
    );
    assert_eq!(
        b.arrived(SignalKind::Read, 7, 3, 0, Via::Push, false),
        SignalArrival::Again
    );
    b.arrived(SignalKind::Read, 7, 3, 2, Via::Sync, false);
    let [read, ..] = b.summary(5 * S, &|_| Vec::new(), &|_| Vec::new());
    assert_eq!(
        read,
        SignalDelivery {
            sent: 4,
            refused: 1,
            expected: 3,
            arrived: 2,
            via_sync: 1,
            missing: 1,
            duplicated: 1,
            ..SignalDelivery::default()
        }
    );
}

#[test]
fn presence_is_owed_to_contacts_online_through_the_window_and_extra_elsewhere() {
    let mut b = SignalBook::default();
    let at = 100 * S;
    b.published(SignalKind::Presence, 0, 0, at, Audience::Contacts);
    // 1 and 2 online throughout; 3 leaves a second after; 4 is no contact.
    b.online(1, 10 * S, 200 * S);
    b.online(2, 10 * S, 200 * S);
    b.online(3, 10 * S, at + S);
    b.online(4, 10 * S, 200 * S);
    b.arrived(SignalKind::Presence, 0, 1, 0, Via::Push, false);
    b.arrived(SignalKind::Presence, 0, 3, 0, Via::Push, false);
    let contacts = |u: UserIx| if u == 0 { vec![1, 2, 3] } else { Vec::new() };
    let [_, typing, presence] = b.summary(5 * S, &contacts, &|_| Vec::new());
    assert_eq!(typing, SignalDelivery::default());
    assert_eq!(
        presence,
        SignalDelivery {
            sent: 1,
            expected: 2,
            arrived: 1,
            missing: 1,
            extra: 1,
            ..SignalDelivery::default()
        }
    );
}

#[test]
fn a_typing_notice_is_owed_to_its_peer_alone_and_a_corrupt_one_is_not_arrived() {
    let mut b = SignalBook::default();
    b.published(SignalKind::Typing, 5, 0, 50 * S, Audience::Peer(6));
    b.published(SignalKind::Typing, 5, 1, 60 * S, Audience::Peer(6));
    b.online(6, 0, 100 * S);
    b.arrived(SignalKind::Typing, 5, 6, 0, Via::Push, false);
    b.arrived(SignalKind::Typing, 5, 6, 1, Via::Push, true);
    let [_, typing, _] = b.summary(S, &|_| vec![99], &|_| vec![98]);
    assert_eq!((typing.expected, typing.arrived, typing.missing), (2, 1, 1));
    assert_eq!(typing.corrupted, 1);
}

#[test]
fn a_typing_notice_in_a_group_is_owed_to_its_other_members_online() {
    let mut b = SignalBook::default();
    b.published(SignalKind::Typing, 1, 0, 50 * S, Audience::Group(4));
    // Members 1 (the typist), 2 and 3 online throughout; 5 is away.
    for u in [1, 2, 3] {
        b.online(u, 0, 100 * S);
    }
    b.arrived(SignalKind::Typing, 1, 2, 0, Via::Push, false);
    let members = |g: u32| if g == 4 { vec![1, 2, 3, 5] } else { Vec::new() };
    let [_, typing, _] = b.summary(S, &|_| Vec::new(), &members);
    assert_eq!(
        (typing.sent, typing.expected, typing.arrived, typing.missing),
        (1, 2, 1, 1)
    );
    assert_eq!(b.groups_typed(), vec![4]);
    let back: SignalBook =
        serde_json::from_str(&serde_json::to_string(&b).expect("ser")).expect("de");
    assert_eq!(back.summary(S, &|_| Vec::new(), &members)[1], typing);
}

#[test]
fn books_of_shards_merge_to_the_book_of_one_process_and_survive_json() {
    let mut whole = SignalBook::default();
    let mut a = SignalBook::default();
    let mut b = SignalBook::default();
    let events: [&dyn Fn(&mut SignalBook); 5] = [
        &|x| x.receipt_sent(1, 2, 0),
        &|x| x.receipt_sent(1, 2, 1),
        &|x| x.published(SignalKind::Presence, 2, 0, 10 * S, Audience::Contacts),
        &|x| x.online(1, 0, 20 * S),
        &|x| {
            x.arrived(SignalKind::Read, 1, 2, 1, Via::Push, false);
        },
    ];
    for (i, e) in events.iter().enumerate() {
        e(&mut whole);
        e(if i % 2 == 0 { &mut a } else { &mut b });
    }
    b.arrived(SignalKind::Presence, 2, 1, 0, Via::Push, false);
    whole.arrived(SignalKind::Presence, 2, 1, 0, Via::Push, false);
    a.merge(&b);
    let contacts = |_| vec![1];
    assert_eq!(
        a.summary(S, &contacts, &|_| Vec::new()),
        whole.summary(S, &contacts, &|_| Vec::new())
    );
    let json = serde_json::to_string(&a).unwrap();
    let back: SignalBook = serde_json::from_str(&json).unwrap();
    let none = |_| Vec::new();
    assert_eq!(
        back.summary(S, &contacts, &none),
        whole.summary(S, &contacts, &none)
    );
    assert_eq!(whole.summary(S, &contacts, &none)[0].missing, 1);
}

#[test]
fn a_result_file_with_overlapping_ranges_is_refused_not_read_seq_by_seq() {
    let mut b = SignalBook::default();
    b.arrived(SignalKind::Typing, 1, 2, 0, Via::Push, false);
    let mut json: serde_json::Value = serde_json::to_value(&b).expect("JSON");
    json["arrived"][0][4] = serde_json::json!([[5, u64::MAX], [4, 9]]);
    let err = serde_json::from_value::<SignalBook>(json).expect_err("refused");
    assert!(err.to_string().contains("bad received ranges"), "{err}");
}
