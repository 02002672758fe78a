//! Limits and bad input: each gets an error frame (closing where it must), never a panic,
//! and the other clients keep being served.

use std::time::{Duration, Instant};

use msgstorm::serve::ServeConfig;
use msgstorm::wire::{ClientFrame, ErrorCode, ServerFrame};
use tokio_tungstenite::tungstenite::Message;

use crate::common::{config, expect_error, http_get, metric, start, Client, SECRET, WAIT};

async fn assert_still_served(a: &mut Client, b: &mut Client, body: &str) {
    a.send_to(&b.user.clone(), body).await;
    assert_eq!(b.next_msg().await.body, body);
}

#[tokio::test]
async fn oversized_frame_closes_only_that_connection() {
    let server = start(ServeConfig {
        max_frame: 4096,
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let mut big = Client::login(&url, "big", SECRET).await;
    big.send_raw(Message::text("x".repeat(10_000))).await;
    assert_eq!(big.expect_fatal().await, ErrorCode::FrameTooLarge);
    assert_still_served(&mut alice, &mut bob, "after big").await;
}

#[tokio::test]
async fn garbage_unknown_types_and_binary_get_errors_and_the_connection_stays() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    let cases = [
        (Message::text("{not json"), ErrorCode::Malformed),
        (
            Message::text(r#"{"type":"send","ref":3}"#),
            ErrorCode::Malformed,
        ),
        (Message::text(r#"[1,2,3]"#), ErrorCode::Malformed),
        (
            Message::text(r#"{"type":"teleport","ref":4}"#),
            ErrorCode::UnknownType,
        ),
        (Message::binary(vec![0u8, 1, 2]), ErrorCode::BinaryFrame),
    ];
    for (msg, expected) in cases {
        alice.send_raw(msg).await;
        match alice.recv().await {
            ServerFrame::Error { code, fatal, .. } => {
                assert_eq!(code, expected);
                assert!(!fatal);
            }
            other => panic!("expected {expected:?}, got {other:?}"),
        }
    }
    let reply = alice
        .request(|r| ClientFrame::Send {
            r#ref: r,
            to: msgstorm::wire::Dest::User("bob".into()),
            body: "b".repeat(40 * 1024),
        })
        .await;
    expect_error(&reply, ErrorCode::BodyTooLarge);
    assert_still_served(&mut alice, &mut bob, "still here").await;
    assert_still_served(&mut bob, &mut alice, "me too").await;
}

#[tokio::test]
async fn connections_past_the_limit_are_refused() {
    let server = start(ServeConfig {
        max_connections: 2,
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    let mut c = Client::connect(&url).await;
    assert_eq!(c.expect_fatal().await, ErrorCode::TooManyConnections);
    assert_still_served(&mut a, &mut b, "two fit").await;
    drop(a);
    // A place is free once the server has seen the close (not after a fixed
    // 100 ms, which a busy machine can outlast).
    let deadline = Instant::now() + WAIT;
    loop {
        let text = http_get(server.addr(), "/metrics").await;
        if metric(&text, "serve_connections") == Some(1.0) {
            break;
        }
        assert!(Instant::now() < deadline, "a's close unseen: {text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Client::login(&url, "a", SECRET).await;
}

/// The idle client times out while the busy one, pinging all along (every 50 ms, a
/// twentieth of the timeout), stays (the test waits for the timeout itself, not
/// for a fixed number of pings, so a busy machine's slow wake-ups cannot end the pings
/// before the timeout or stretch them past it).
#[tokio::test]
async fn idle_connections_time_out_and_pings_keep_them() {
    let server = start(ServeConfig {
        idle_timeout: Duration::from_secs(1),
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut idle = Client::login(&url, "idle", SECRET).await;
    let mut busy = Client::login(&url, "busy", SECRET).await;
    let pings = async {
        for ts in 0.. {
            busy.send(&ClientFrame::Ping { ts }).await;
            assert_eq!(busy.recv().await, ServerFrame::Pong { ts });
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        code = idle.expect_fatal() => assert_eq!(code, ErrorCode::IdleTimeout),
        () = pings => unreachable!("the pings go on until the idle client times out"),
    }
    let (_, seq) = busy.send_to("idle", "still alive").await;
    assert_eq!(seq, 1);
}
