//! A consumer that does not read its pushes is disconnected with `slow_consumer`; the
//! server's queues stay within `--queue` and its memory stays bounded.

use msgstorm::wire::{direct_conv, ClientFrame, Dest};

use crate::common::{http_get, metric, ChildServer, Client, SECRET};

#[tokio::test]
async fn a_slow_consumer_is_disconnected_and_memory_stays_bounded() {
    const QUEUE: usize = 64;
    let server = ChildServer::start(&["--queue", "64"]);
    let url = server.ws_url();
    let mut sender = Client::login(&url, "sender", SECRET).await;
    let mut sleeper = Client::login(&url, "sleeper", SECRET).await;
    let rss_before = server.rss_kib();

    let body = "z".repeat(8 * 1024);
    let mut sent = 0usize;
    let mut disconnected = false;
    while sent < 4000 && !disconnected {
        for _ in 0..32 {
            let r = sender.next_ref();
            sender
                .send(&ClientFrame::Send {
                    r#ref: r,
                    to: Dest::User("sleeper".into()),
                    body: body.clone(),
                })
                .await;
        }
        for _ in 0..32 {
            sender
                .wait_for(|f| matches!(f, msgstorm::wire::ServerFrame::Ack { .. }).then_some(()))
                .await;
        }
        sent += 32;
        let text = http_get(server.addr, "/metrics").await;
        disconnected = metric(&text, "serve_slow_consumer_disconnects_total") == Some(1.0);
    }
    assert!(
        disconnected,
        "no slow-consumer disconnect after {sent} messages of 8 KiB"
    );
    let text = http_get(server.addr, "/metrics").await;
    let max_depth = metric(&text, "serve_outbound_queue_depth_max").expect("depth series");
    assert!(
        max_depth <= QUEUE as f64,
        "a queue held {max_depth} > {QUEUE} frames"
    );
    assert_eq!(
        metric(&text, "serve_errors_total{code=\"slow_consumer\"}"),
        Some(1.0)
    );
    let rss_after = server.rss_kib();
    // Everything sent was stored (~{sent} x 8 KiB), but the server held at most one queue.
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );

    // The sleeper finds its connection closed; its messages wait in storage.
    sleeper.expect_closed().await;
    let mut again = Client::login(&url, "sleeper", SECRET).await;
    let stored = again.sync_all(&direct_conv("sender", "sleeper"), 0).await;
    assert_eq!(stored.len(), sent);
}
