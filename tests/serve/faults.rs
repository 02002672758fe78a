//! Fault injection into pushes: each kind has its effect on the targeted recipient only,
//! storage stays complete, and the fault log names every injected fault.

use std::path::PathBuf;
use std::time::Duration;

use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::{ServeConfig, ServerHandle};
use msgstorm::wire::{direct_conv, group_conv, ClientFrame, Dest};

use crate::common::{bodies, config, fault_log, start, Client, SECRET};

async fn faulty(spec: &str, users: &[&str]) -> (ServerHandle, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("faults.jsonl");
    let server = start(ServeConfig {
        faults: FaultSpec::parse(spec).expect("valid fault spec"),
        fault_users: users.iter().map(|u| (*u).to_owned()).collect(),
        fault_seed: Some(42),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    (server, dir, log)
}

#[tokio::test]
async fn drop_for_one_recipient_pushes_nothing_to_it_and_sync_returns_all() {
    let (server, _dir, log) = faulty("drop=1.0", &["u7"]).await;
    let url = server.ws_url();
    let mut u3 = Client::login(&url, "u3", SECRET).await;
    u3.group(|r, group| ClientFrame::GroupCreate { r#ref: r, group }, "g")
        .await;
    let mut u7 = Client::login(&url, "u7", SECRET).await;
    let mut u9 = Client::login(&url, "u9", SECRET).await;
    for c in [&mut u7, &mut u9] {
        c.group(|r, group| ClientFrame::GroupJoin { r#ref: r, group }, "g")
            .await;
    }
    let seqs = u3
        .send_many(&Dest::Group("g".into()), &bodies("m", 20), 10)
        .await;
    let direct = u3
        .send_many(&Dest::User("u7".into()), &bodies("d", 5), 5)
        .await;

    assert_eq!(direct, vec![1, 2, 3, 4, 5]);
    let got = u9.msgs_within(Duration::from_millis(300)).await;
    assert_eq!(
        got.iter().map(|m| m.seq).collect::<Vec<_>>(),
        seqs,
        "u9 is not targeted"
    );
    assert!(u7.msgs_within(Duration::from_millis(300)).await.is_empty());
    assert_eq!(u7.sync_all(&group_conv("g"), 0).await.len(), 20);
    assert_eq!(u7.sync_all(&direct_conv("u3", "u7"), 0).await.len(), 5);

    let lines = fault_log(&log);
    assert_eq!(lines.len(), 25, "{lines:?}");
    assert!(lines
        .iter()
        .all(|l| l["kind"] == "drop" && l["recipient"] == "u7" && l["from"] == "u3"));
    let group_drops: Vec<u64> = lines
        .iter()
        .filter(|l| l["conv"] == "g:g")
        .map(|l| l["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(group_drops, seqs);
    assert!(lines
        .iter()
        .any(|l| l["conv"] == "d:u3:u7" && l["seq"] == 5));
}

#[tokio::test]
async fn dup_pushes_twice_and_is_logged() {
    let (server, _dir, log) = faulty("dup=1.0", &["b"]).await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    a.send_many(&Dest::User("b".into()), &bodies("x", 3), 3)
        .await;
    let got: Vec<u64> = b
        .msgs_within(Duration::from_millis(300))
        .await
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(got, vec![1, 1, 2, 2, 3, 3]);
    let lines = fault_log(&log);
    assert_eq!(lines.len(), 3);
    assert!(lines
        .iter()
        .all(|l| l["kind"] == "dup" && l["recipient"] == "b"));
}

#[tokio::test]
async fn reorder_sends_a_push_after_the_next_one() {
    let (server, _dir, log) = faulty("reorder=1.0", &["b"]).await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    a.send_many(&Dest::User("b".into()), &bodies("x", 5), 1)
        .await;
    let got: Vec<u64> = b
        .msgs_within(Duration::from_millis(400))
        .await
        .iter()
        .map(|m| m.seq)
        .collect();
    // 1 is held until 2 passes it, 3 until 4; 5 has no successor and goes out on timeout.
    assert_eq!(got, vec![2, 1, 4, 3, 5]);
    let lines = fault_log(&log);
    let kinds: Vec<(&str, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().expect("kind"),
                l["seq"].as_u64().expect("seq"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![("reorder", 1), ("reorder", 3), ("reorder_timeout", 5)]
    );
    assert_eq!(lines[0]["after_seq"], 2);
}

#[tokio::test]
async fn corrupt_changes_the_end_of_the_body_only_in_the_push() {
    let (server, _dir, log) = faulty("corrupt=1.0", &["b"]).await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    let body = "{\"sum\":1234}padding-zzzz";
    a.send_to("b", body).await;
    let pushed = b.next_msg().await;
    assert_ne!(pushed.body, body);
    assert_eq!(pushed.body.len(), body.len());
    assert_eq!(pushed.body[..body.len() - 1], body[..body.len() - 1]);
    let stored = b.sync_all(&direct_conv("a", "b"), 0).await;
    assert_eq!(stored[0].body, body, "storage is never corrupted");
    let lines = fault_log(&log);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["kind"], "corrupt");
    assert_eq!(lines[0]["seq"], 1);
}

#[tokio::test]
async fn delay_sends_late_and_is_logged() {
    let (server, _dir, log) = faulty("delay=150ms@1.0", &["b"]).await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    a.send_to("b", "slow").await;
    assert!(b.msgs_within(Duration::from_millis(50)).await.is_empty());
    assert_eq!(b.next_msg().await.body, "slow");
    let lines = fault_log(&log);
    assert_eq!(lines[0]["kind"], "delay");
    assert_eq!(lines[0]["delay_ms"], 150);
}
