//! Signals through the `native` driver: the tokens it sends come back to the recipients'
//! sessions as deliveries, stored receipts are fetched with the missed messages exactly
//! once (across a reconnect, a server restart, a dropped push), and the server's own
//! `offline` is no delivery.

use msgstorm::driver::kit::cursors::Cursors;
use msgstorm::driver::native::{NativeDriver, NativeSession};
use msgstorm::driver::{Dest, Driver, Event, Session, Signal, UserCtx};
use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::{ServeConfig, ServerHandle};

use crate::common::{config, connect, driver, fault_log, start, wait_metric, WAIT};

fn native(server: &ServerHandle) -> NativeDriver {
    driver(server, toml::Table::new())
}

async fn login(driver: &NativeDriver, id: &str, resume: Cursors) -> NativeSession {
    let user = UserCtx {
        ix: 0,
        id: id.to_owned(),
    };
    connect(driver, &user, resume).await
}

/// The next event of `s` that is not a reply to a request, within [`WAIT`].
async fn next(s: &mut NativeSession) -> Event {
    tokio::time::timeout(WAIT, s.next_event())
        .await
        .expect("an event within WAIT")
}

/// Every event of `s` before the reply to a `time` request it sends now: what the server
/// pushed to it before that request was read.
async fn settled(s: &mut NativeSession, tag: u64) -> Vec<Event> {
    s.request(tag, "time").await.expect("request");
    s.flush().await.expect("flush");
    let mut out = Vec::new();
    loop {
        match next(s).await {
            Event::Reply { tag: t } if t == tag => return out,
            ev => out.push(ev),
        }
    }
}

fn delivered(events: Vec<Event>) -> Vec<String> {
    events
        .into_iter()
        .map(|ev| match ev {
            Event::Delivered { body } => String::from(body),
            other => panic!("not a delivery: {other:?}"),
        })
        .collect()
}

/// `bob` reads a message of `alice`'s and sends the receipt `token`; waits for its acceptance.
async fn read_receipt(bob: &mut NativeSession, tag: u64, token: &str) {
    let read = Signal::Read {
        sender: "alice",
        conv: Dest::User("alice"),
        message: "m",
    };
    bob.signal(tag, read, token).await.expect("receipt");
    bob.flush().await.expect("flush");
    match next(bob).await {
        Event::Accepted { tag: t } => assert_eq!(t, tag),
        other => panic!("expected the receipt's acceptance, got {other:?}"),
    }
}

#[tokio::test]
async fn the_driver_offers_every_signal() {
    let server = start(config()).await;
    let s = native(&server).signals();
    assert!(s.receipts && s.typing && s.presence, "{s:?}");
}

#[tokio::test]
async fn stored_receipts_are_fetched_once_after_a_reconnect_and_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = ServeConfig {
        data: Some(dir.path().to_owned()),
        ..config()
    };
    let server = start(data.clone()).await;
    let d = native(&server);
    let mut alice = login(&d, "alice", Cursors::default()).await;
    let mut bob = login(&d, "bob", Cursors::default()).await;
    read_receipt(&mut bob, 1, "R1").await;
    match next(&mut alice).await {
        Event::Delivered { body } => assert_eq!(String::from(body), "R1", "pushed"),
        other => panic!("expected the receipt, got {other:?}"),
    }
    let resume = alice.close().await;
    read_receipt(&mut bob, 2, "R2").await;
    bob.close().await;
    server.shutdown().await.expect("clean shutdown");

    let server = start(data).await;
    let d = native(&server);
    let mut bob = login(&d, "bob", Cursors::default()).await;
    read_receipt(&mut bob, 3, "R3").await;
    let mut alice = login(&d, "alice", resume).await;
    let mut out = Vec::new();
    alice.fetch_missed(&mut out).await.expect("fetch");
    assert_eq!(out, ["R2", "R3"], "R1 came by push before");
    read_receipt(&mut bob, 4, "R4").await;
    let mut again = Vec::new();
    alice.fetch_missed(&mut again).await.expect("fetch");
    assert_eq!(again, ["R4"]);
    assert!(
        delivered(settled(&mut alice, 5).await).is_empty(),
        "R4's push, overlapped by the fetch, is not handed out again"
    );
}

#[tokio::test]
async fn a_dropped_receipt_push_is_repaired_by_fetch_missed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("faults.jsonl");
    let server = start(ServeConfig {
        faults: FaultSpec::parse("drop=1.0").expect("spec"),
        fault_users: vec!["alice".to_owned()],
        fault_seed: Some(3),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    let d = native(&server);
    let mut alice = login(&d, "alice", Cursors::default()).await;
    let mut bob = login(&d, "bob", Cursors::default()).await;
    read_receipt(&mut bob, 1, "R1").await;
    assert!(
        delivered(settled(&mut alice, 2).await).is_empty(),
        "dropped"
    );
    let mut out = Vec::new();
    alice.fetch_missed(&mut out).await.expect("fetch");
    assert_eq!(out, ["R1"]);
    let lines = fault_log(&log);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (&lines[0]["signal"], &lines[0]["kind"]),
        (&"receipt".into(), &"drop".into())
    );
}

#[tokio::test]
async fn presence_and_typing_tokens_come_back_and_the_server_offline_is_no_delivery() {
    let server = start(config()).await;
    let d = native(&server);
    let mut alice = login(&d, "alice", Cursors::default()).await;
    let mut bob = login(&d, "bob", Cursors::default()).await;
    let mut carol = login(&d, "carol", Cursors::default()).await;
    // More ids than one frame holds: bob comes in the second chunk.
    let many: Vec<String> = (0..1500).map(|i| format!("u{i}")).collect();
    let mut ids: Vec<&str> = many.iter().map(String::as_str).collect();
    ids.push("bob");
    alice.contacts(&ids).await.expect("contacts");
    alice
        .signal(0, Signal::Presence { online: true }, "P1")
        .await
        .expect("presence");
    let typing = Signal::Typing {
        conv: Dest::User("bob"),
        active: true,
    };
    alice.signal(0, typing, "T1").await.expect("typing");
    alice.flush().await.expect("flush");
    let mut got = Vec::new();
    while got.len() < 2 {
        match next(&mut bob).await {
            Event::Delivered { body } => got.push(String::from(body)),
            other => panic!("expected deliveries, got {other:?}"),
        }
    }
    assert_eq!(got, ["P1", "T1"]);
    assert!(
        delivered(settled(&mut carol, 1).await).is_empty(),
        "no contact"
    );
    alice.close().await;
    let offline = "serve_signals_pushed_total{kind=\"presence\"}";
    wait_metric(&server, offline, 2.0).await;
    assert!(
        delivered(settled(&mut bob, 2).await).is_empty(),
        "the server's offline for alice came and is not handed out"
    );
}
