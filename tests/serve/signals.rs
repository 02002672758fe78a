//! Signals spoken frame by frame: contacts (mutual, stored), presence to the contacts
//! online (and the server's own `offline` at an abrupt close), typing to the other members
//! online, read receipts stored per recipient and pushed after the commit, their faults,
//! and the errors of bad signal frames.
//!
//! A user's frames are served in order, so what a `time` request's reply comes after is
//! everything pushed to that user before it was asked ([`settled`]): absence is shown
//! without waiting for a timeout.

use msgstorm::serve::{ServeConfig, ServerHandle};
use msgstorm::wire::signal::MAX_CONTACTS;
use msgstorm::wire::{
    direct_conv, group_conv, ClientFrame, ContactsAdd, Dest, ErrorCode, Presence, PresencePush,
    Receipt, ReceiptPage, ReceiptsQuery, ServerFrame, Status, Typing, TypingPush, TypingState,
};

use crate::common::{
    config, expect_error, fault_log, http_get, metric, start, wait_metric, Client, SECRET,
};

/// Logged-in connections: a close is handled once it drops.
const ONLINE: &str = "serve_online_users";

/// Every frame pushed to `c` before the reply to a `time` request it sends now.
async fn settled(c: &mut Client) -> Vec<ServerFrame> {
    let reply = c.request(|r| ClientFrame::Time { r#ref: r }).await;
    assert!(matches!(reply, ServerFrame::TimeReply { .. }), "{reply:?}");
    c.backlog.drain(..).collect()
}

fn presences(frames: &[ServerFrame]) -> Vec<PresencePush> {
    frames
        .iter()
        .filter_map(|f| match f {
            ServerFrame::Presence(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn typings(frames: &[ServerFrame]) -> Vec<TypingPush> {
    frames
        .iter()
        .filter_map(|f| match f {
            ServerFrame::Typing(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

async fn add_contacts(c: &mut Client, ids: &[&str]) {
    let add = ids.iter().map(|s| (*s).to_owned()).collect();
    let reply = c
        .request(|r| ClientFrame::Contacts(ContactsAdd { r#ref: r, add }))
        .await;
    assert!(matches!(reply, ServerFrame::Ok { .. }), "{reply:?}");
}

/// Publishes `status` with a ref and waits for its `ok`: the pushes are queued by then.
async fn publish(c: &mut Client, status: Status, note: &str) {
    let note = note.to_owned();
    let reply = c
        .request(|r| {
            ClientFrame::Presence(Presence {
                r#ref: Some(r),
                status,
                note,
            })
        })
        .await;
    assert!(matches!(reply, ServerFrame::Ok { .. }), "{reply:?}");
}

async fn receipt(c: &mut Client, to: &str, conv: &str, note: &str) -> ServerFrame {
    let (to, conv, note) = (to.to_owned(), conv.to_owned(), note.to_owned());
    c.request(|r| {
        ClientFrame::Receipt(Receipt {
            r#ref: r,
            to,
            conv,
            note,
        })
    })
    .await
}

async fn receipt_page(c: &mut Client, after: u64, limit: u32) -> ReceiptPage {
    match c
        .request(|r| {
            ClientFrame::Receipts(ReceiptsQuery {
                r#ref: r,
                after,
                limit,
            })
        })
        .await
    {
        ServerFrame::ReceiptPage(p) => p,
        other => panic!("expected a receipt page, got {other:?}"),
    }
}

async fn restart(server: ServerHandle, data: &std::path::Path) -> ServerHandle {
    server.shutdown().await.expect("clean shutdown");
    start(ServeConfig {
        data: Some(data.to_owned()),
        ..config()
    })
    .await
}

#[tokio::test]
async fn contacts_are_mutual_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = start(ServeConfig {
        data: Some(dir.path().to_owned()),
        ..config()
    })
    .await;
    let mut alice = Client::login(&server.ws_url(), "alice", SECRET).await;
    add_contacts(&mut alice, &["bob", "carol"]).await;
    add_contacts(&mut alice, &["bob"]).await;
    drop(alice);
    let server = restart(server, dir.path()).await;
    let url = server.ws_url();
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let mut carol = Client::login(&url, "carol", SECRET).await;
    let mut dave = Client::login(&url, "dave", SECRET).await;
    let mut alice = Client::login(&url, "alice", SECRET).await;
    publish(&mut alice, Status::Online, "P1").await;
    for c in [&mut bob, &mut carol] {
        let got = presences(&settled(c).await);
        assert_eq!(got.len(), 1, "{}: {got:?}", c.user);
        assert_eq!(
            (got[0].from.as_str(), got[0].status, got[0].note.as_str()),
            ("alice", Status::Online, "P1")
        );
    }
    assert!(
        presences(&settled(&mut dave).await).is_empty(),
        "no contact"
    );
    publish(&mut bob, Status::Online, "P2").await;
    let got = presences(&settled(&mut alice).await);
    assert_eq!(got.len(), 1, "mutual: {got:?}");
    assert_eq!((got[0].from.as_str(), got[0].note.as_str()), ("bob", "P2"));
    assert!(
        presences(&settled(&mut carol).await).is_empty(),
        "bob and carol are not contacts"
    );
    let text = http_get(server.addr(), "/metrics").await;
    assert_eq!(
        metric(&text, "serve_signals_pushed_total{kind=\"presence\"}"),
        Some(3.0)
    );
}

#[tokio::test]
async fn presence_reaches_only_contacts_online_and_is_not_stored() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    add_contacts(&mut alice, &["bob", "dave"]).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let mut eve = Client::login(&url, "eve", SECRET).await;
    alice
        .send(&ClientFrame::Presence(Presence {
            r#ref: None,
            status: Status::Online,
            note: "P1".into(),
        }))
        .await;
    let got = bob
        .wait_for(|f| match f {
            ServerFrame::Presence(p) => Some(p.clone()),
            _ => None,
        })
        .await;
    assert_eq!((got.from.as_str(), got.note.as_str()), ("alice", "P1"));
    assert!(presences(&settled(&mut eve).await).is_empty());
    let mut dave = Client::login(&url, "dave", SECRET).await;
    assert!(
        presences(&settled(&mut dave).await).is_empty(),
        "presence published while dave was offline is not kept for him"
    );
}

#[tokio::test]
async fn the_server_publishes_offline_when_the_last_connection_closes_without_one() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let alice2 = Client::login(&url, "alice", SECRET).await;
    add_contacts(&mut alice, &["bob"]).await;
    publish(&mut alice, Status::Online, "P1").await;
    drop(alice2);
    wait_metric(&server, ONLINE, 2.0).await;
    let got = presences(&settled(&mut bob).await);
    assert_eq!(got.len(), 1, "alice is still online: {got:?}");
    drop(alice);
    let offline = bob
        .wait_for(|f| match f {
            ServerFrame::Presence(p) => Some(p.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        (offline.from.as_str(), offline.status, offline.note.as_str()),
        ("alice", Status::Offline, ""),
        "after alice's last connection closed"
    );

    let mut carol = Client::login(&url, "carol", SECRET).await;
    add_contacts(&mut carol, &["bob"]).await;
    publish(&mut carol, Status::Online, "P2").await;
    publish(&mut carol, Status::Offline, "P3").await;
    drop(carol);
    wait_metric(&server, ONLINE, 1.0).await;
    let got = presences(&settled(&mut bob).await);
    let notes: Vec<&str> = got.iter().map(|p| p.note.as_str()).collect();
    assert_eq!(notes, ["P2", "P3"], "no server offline after carol's own");
}

#[tokio::test]
async fn typing_reaches_the_other_members_online_of_direct_and_group_conversations() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let mut carol = Client::login(&url, "carol", SECRET).await;
    let mut dave = Client::login(&url, "dave", SECRET).await;
    alice
        .group(|r, group| ClientFrame::GroupCreate { r#ref: r, group }, "g")
        .await;
    for c in [&mut bob, &mut carol] {
        c.group(|r, group| ClientFrame::GroupJoin { r#ref: r, group }, "g")
            .await;
    }
    let typing = |to, state, note: &str| {
        ClientFrame::Typing(Typing {
            to,
            state,
            note: note.to_owned(),
        })
    };
    alice
        .send(&typing(Dest::User("bob".into()), TypingState::Start, "T1"))
        .await;
    alice
        .send(&typing(Dest::Group("g".into()), TypingState::Stop, "T2"))
        .await;
    assert!(
        typings(&settled(&mut alice).await).is_empty(),
        "not to the typist"
    );
    let got = typings(&settled(&mut bob).await);
    let seen: Vec<_> = got
        .iter()
        .map(|t| (t.from.as_str(), t.conv.clone(), t.state, t.note.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (
                "alice",
                direct_conv("alice", "bob"),
                TypingState::Start,
                "T1"
            ),
            ("alice", group_conv("g"), TypingState::Stop, "T2"),
        ]
    );
    let got = typings(&settled(&mut carol).await);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].conv.as_str(), got[0].note.as_str()), ("g:g", "T2"));
    assert!(
        typings(&settled(&mut dave).await).is_empty(),
        "not a member"
    );
}

#[tokio::test]
async fn receipts_are_acknowledged_after_the_commit_pushed_and_kept_numbered_across_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = start(ServeConfig {
        data: Some(dir.path().to_owned()),
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let conv = direct_conv("alice", "bob");
    let reply = receipt(&mut bob, "alice", &conv, "R1").await;
    assert!(matches!(reply, ServerFrame::Ok { .. }), "{reply:?}");
    let pushed = alice
        .wait_for(|f| match f {
            ServerFrame::Receipt(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        (
            pushed.from.as_str(),
            pushed.conv.as_str(),
            pushed.note.as_str(),
            pushed.rseq
        ),
        ("bob", conv.as_str(), "R1", 1)
    );
    drop(alice);
    for note in ["R2", "R3"] {
        let reply = receipt(&mut bob, "alice", &conv, note).await;
        assert!(matches!(reply, ServerFrame::Ok { .. }), "{reply:?}");
    }
    drop(bob);
    let server = restart(server, dir.path()).await;
    let url = server.ws_url();
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let reply = receipt(&mut bob, "alice", &conv, "R4").await;
    assert!(matches!(reply, ServerFrame::Ok { .. }), "{reply:?}");
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let first = receipt_page(&mut alice, 1, 2).await;
    let notes: Vec<(u64, &str)> = first
        .receipts
        .iter()
        .map(|r| (r.rseq, r.note.as_str()))
        .collect();
    assert_eq!(notes, [(2, "R2"), (3, "R3")]);
    assert!(first.more);
    assert_eq!(first.last_rseq, 4, "numbers continue after the restart");
    let rest = receipt_page(&mut alice, 3, 0).await;
    assert_eq!(rest.receipts.len(), 1);
    assert_eq!((rest.receipts[0].rseq, rest.more), (4, false));
    assert!(
        receipt_page(&mut bob, 0, 0).await.receipts.is_empty(),
        "bob's inbox"
    );
}

#[tokio::test]
async fn bad_signal_frames_get_the_documented_errors() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    alice
        .group(|r, group| ClientFrame::GroupCreate { r#ref: r, group }, "g")
        .await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let d = direct_conv("alice", "bob");
    let cases = [
        ("bob", d.as_str(), "a b", ErrorCode::Malformed),
        ("bob", d.as_str(), &*"x".repeat(129), ErrorCode::Malformed),
        ("b:b", d.as_str(), "R", ErrorCode::BadRecipient),
        ("carol", "d:bob:carol", "R", ErrorCode::NotMember),
        ("bob", "g:g", "R", ErrorCode::NotMember),
        ("bob", "g:nope", "R", ErrorCode::NoSuchGroup),
        ("bob", "x:y", "R", ErrorCode::Malformed),
    ];
    for (to, conv, note, code) in cases {
        let reply = receipt(&mut alice, to, conv, note).await;
        expect_error(&reply, code);
    }
    let too_many = (0..=MAX_CONTACTS).map(|i| format!("u{i}")).collect();
    let reply = alice
        .request(|r| {
            ClientFrame::Contacts(ContactsAdd {
                r#ref: r,
                add: too_many,
            })
        })
        .await;
    expect_error(&reply, ErrorCode::Malformed);
    let reply = alice
        .request(|r| {
            ClientFrame::Contacts(ContactsAdd {
                r#ref: r,
                add: vec!["ok".into(), "not ok".into()],
            })
        })
        .await;
    expect_error(&reply, ErrorCode::BadRecipient);
    bob.send(&ClientFrame::Typing(Typing {
        to: Dest::Group("g".into()),
        state: TypingState::Start,
        note: "T".into(),
    }))
    .await;
    let err = bob
        .wait_for(|f| matches!(f, ServerFrame::Error { .. }).then(|| f.clone()))
        .await;
    expect_error(&err, ErrorCode::NotMember);
    let reply = alice
        .request(|r| {
            ClientFrame::Presence(Presence {
                r#ref: Some(r),
                status: Status::Online,
                note: "é".into(),
            })
        })
        .await;
    expect_error(&reply, ErrorCode::Malformed);
    let text = http_get(server.addr(), "/metrics").await;
    assert_eq!(metric(&text, "serve_receipts_stored_total"), Some(0.0));
}

/// Signal pushes get the faults of message pushes, keyed apart from every conversation; a
/// dropped receipt stays stored, and the fault log names each signal.
#[tokio::test]
async fn signal_pushes_get_faults_that_the_log_names_and_stored_receipts_repair() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("faults.jsonl");
    let server = start(ServeConfig {
        faults: msgstorm::serve::faults::FaultSpec::parse("drop=1.0").expect("spec"),
        fault_users: vec!["alice".to_owned()],
        fault_seed: Some(7),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    add_contacts(&mut bob, &["alice"]).await;
    let conv = direct_conv("alice", "bob");
    let reply = receipt(&mut bob, "alice", &conv, "R1").await;
    assert!(matches!(reply, ServerFrame::Ok { .. }), "{reply:?}");
    publish(&mut bob, Status::Online, "P1").await;
    bob.send(&ClientFrame::Typing(Typing {
        to: Dest::User("alice".into()),
        state: TypingState::Start,
        note: "T1".into(),
    }))
    .await;
    settled(&mut bob).await;
    assert!(
        settled(&mut alice).await.is_empty(),
        "every push to alice dropped"
    );
    let page = receipt_page(&mut alice, 0, 0).await;
    assert_eq!(page.receipts.len(), 1);
    assert_eq!(page.receipts[0].note, "R1", "the dropped receipt is stored");
    let lines = fault_log(&log);
    let faults: Vec<(&str, &str, &str, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().unwrap_or_default(),
                l["signal"].as_str().unwrap_or_default(),
                l["conv"].as_str().unwrap_or_default(),
                l["seq"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        faults,
        [
            ("drop", "receipt", "r:alice", 1),
            ("drop", "presence", "p:bob", 1),
            ("drop", "typing", "t:bob", 1),
        ]
    );
    let text = http_get(server.addr(), "/metrics").await;
    let series = "serve_signal_faults_injected_total{signal=\"receipt\",kind=\"drop\"}";
    assert_eq!(metric(&text, series), Some(1.0));
}

#[tokio::test]
async fn a_corrupted_signal_push_changes_the_last_character_of_its_note() {
    let server = start(ServeConfig {
        faults: msgstorm::serve::faults::FaultSpec::parse("corrupt=1.0").expect("spec"),
        fault_seed: Some(1),
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    bob.send(&ClientFrame::Typing(Typing {
        to: Dest::User("alice".into()),
        state: TypingState::Start,
        note: "T1".into(),
    }))
    .await;
    let got = alice
        .wait_for(|f| match f {
            ServerFrame::Typing(t) => Some(t.note.clone()),
            _ => None,
        })
        .await;
    assert_eq!(got, "Ta");
}
