//! Durability with the real binary: acked messages survive SIGKILL, and SIGTERM exits 0
//! with everything acked intact.

use msgstorm::wire::{direct_conv, Dest, ErrorCode};

use crate::common::{bodies, ChildServer, Client, SECRET};

#[tokio::test]
async fn acked_messages_survive_sigkill() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_str().expect("utf-8 path");
    let server = ChildServer::start(&["--data", data, "--durability", "full"]);
    let mut a = Client::login(&server.ws_url(), "a", SECRET).await;
    let sent = bodies("k", 300);
    let seqs = a.send_many(&Dest::User("b".into()), &sent, 50).await;
    assert_eq!(seqs.len(), 300);
    server.signal("KILL");
    drop(server);

    let server = ChildServer::start(&["--data", data]);
    let mut b = Client::login(&server.ws_url(), "b", SECRET).await;
    let stored = b.sync_all(&direct_conv("a", "b"), 0).await;
    assert_eq!(stored.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
    assert_eq!(
        stored.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
        sent
    );
    let (_, next) = b.send_to("a", "after restart").await;
    assert_eq!(next, 301, "seqs continue without a gap");
}

#[tokio::test]
async fn sigterm_closes_connections_and_exits_zero() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_str().expect("utf-8 path");
    let mut server = ChildServer::start(&["--data", data]);
    let mut a = Client::login(&server.ws_url(), "a", SECRET).await;
    let seqs = a
        .send_many(&Dest::User("b".into()), &bodies("t", 100), 20)
        .await;
    server.signal("TERM");
    assert_eq!(a.expect_fatal().await, ErrorCode::ShuttingDown);
    let status = server.wait_exit();
    assert_eq!(
        status.code(),
        Some(0),
        "{:?}",
        server.log.lock().expect("log")
    );

    let server = ChildServer::start(&["--data", data]);
    let mut b = Client::login(&server.ws_url(), "b", SECRET).await;
    let stored = b.sync_all(&direct_conv("a", "b"), 0).await;
    assert_eq!(stored.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
}
