//! Request/response (`time`, `kv_get` through the worker pool) and `/metrics`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use msgstorm::serve::ServeConfig;
use msgstorm::wire::{ClientFrame, ErrorCode, ServerFrame};

use crate::common::{config, http_get, metric, start, Client, SECRET};

#[tokio::test]
async fn time_and_kv_get_are_answered() {
    let server = start(config()).await;
    let mut c = Client::login(&server.ws_url(), "alice", SECRET).await;
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros();
    match c.request(|r| ClientFrame::Time { r#ref: r }).await {
        ServerFrame::TimeReply { ts_us, .. } => {
            assert!(
                u128::from(ts_us).abs_diff(now_us) < 5_000_000,
                "{ts_us} vs {now_us}"
            );
        }
        other => panic!("{other:?}"),
    }
    let get = |key: &str| {
        let key = key.to_owned();
        move |r| ClientFrame::KvGet { r#ref: r, key }
    };
    let a = c.request(get("k1")).await;
    let b = c.request(get("k1")).await;
    match (a, b) {
        (ServerFrame::KvValue { key, value: v1, .. }, ServerFrame::KvValue { value: v2, .. }) => {
            assert_eq!(key, "k1");
            assert_eq!(v1, v2, "the backend is deterministic");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_full_worker_pool_answers_overloaded() {
    let server = start(ServeConfig {
        workers: 1,
        kv_queue: 2,
        backend_latency: Duration::from_millis(200),
        ..config()
    })
    .await;
    let mut c = Client::login(&server.ws_url(), "alice", SECRET).await;
    for r in 1..=6 {
        c.send(&ClientFrame::KvGet {
            r#ref: r,
            key: format!("k{r}"),
        })
        .await;
    }
    let (mut values, mut overloaded) = (0, 0);
    for _ in 1..=6 {
        match c.recv().await {
            ServerFrame::KvValue { .. } => values += 1,
            ServerFrame::Error {
                code: ErrorCode::Overloaded,
                ..
            } => overloaded += 1,
            other => panic!("{other:?}"),
        }
    }
    assert!(
        overloaded >= 1,
        "one worker and two queue slots cannot take six"
    );
    assert!(values >= 2);
    assert_eq!(values + overloaded, 6);
}

#[tokio::test]
async fn metrics_expose_the_key_series() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    a.send_to("b", "one").await;
    b.next_msg().await;
    b.sync_all(&msgstorm::wire::direct_conv("a", "b"), 0).await;
    let text = http_get(server.addr(), "/metrics").await;
    for series in [
        "serve_connections 2",
        "serve_online_users 2",
        "serve_logins_total{result=\"ok\"} 2",
        "serve_messages_accepted_total 1",
        "serve_messages_pushed_total 1",
        "serve_messages_synced_total 1",
        "serve_slow_consumer_disconnects_total 0",
        "serve_outbound_queue_depth_max",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(series)),
            "missing {series} in\n{text}"
        );
    }
    assert!(text.contains("serve_commit_batch_size_bucket"));
    assert!(text.contains("serve_commit_latency_seconds_bucket"));
    assert_eq!(metric(&text, "serve_commit_batch_size_count"), Some(1.0));
}
