//! The reference server under hostile or unlucky clients: the login race,
//! replies that would pin memory, slowloris upgrades, idle unauthenticated connections.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use msgstorm::serve::ServeConfig;
use msgstorm::wire::{direct_conv, ClientFrame, Dest, ErrorCode, ServerFrame, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{bodies, config, http_get, metric, start, Client, SECRET};

/// A push could reach a client before `welcome`. Logins are hammered while a
/// sender pushes to the same users; the first frame of every login must be `welcome`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn welcome_is_always_the_first_frame() {
    const USERS: usize = 8;
    const LOGINS_EACH: usize = 60;
    let server = start(config()).await;
    let url = server.ws_url();
    let stop = Arc::new(AtomicBool::new(false));
    let mut sender = Client::login(&url, "sender", SECRET).await;
    let pushing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let batch = bodies("p", 16);
            // Bounded: at most this many batches, and it stops when the logins are done.
            for round in 0..2_000 {
                if stop.load(Ordering::Relaxed) {
                    return round;
                }
                let to = Dest::User(format!("u{}", round % USERS));
                sender.send_many(&to, &batch, 16).await;
            }
            2_000
        })
    };
    let logins = (0..USERS).map(|i| {
        let url = url.clone();
        tokio::spawn(async move {
            for _ in 0..LOGINS_EACH {
                let mut c = Client::connect(&url).await;
                let user = format!("u{i}");
                c.send(&ClientFrame::Login {
                    v: PROTOCOL_VERSION,
                    token: msgstorm::serve::token(&user, SECRET),
                    user,
                })
                .await;
                match c.recv().await {
                    ServerFrame::Welcome { .. } => {}
                    other => panic!("u{i}: first frame after login is {other:?}"),
                }
            }
        })
    });
    let all = futures_util::future::join_all(logins);
    let done = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("logins finish within 60 s");
    for r in done {
        r.expect("a login task panicked");
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = tokio::time::timeout(Duration::from_secs(10), pushing)
        .await
        .expect("sender stops")
        .expect("sender task");
    assert!(rounds > 0, "pushes flowed while logging in");
}

/// A sync page of large bodies must not be one frame far above `--max-frame`. Pages are
/// bounded by bytes too: each is at most the frame limit, and `more` leads to the rest.
#[tokio::test]
async fn sync_pages_fit_the_frame_limit() {
    const MAX_FRAME: usize = 16 * 1024;
    let server = start(ServeConfig {
        max_frame: MAX_FRAME,
        max_body: 4 * 1024,
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    // Quotes double in JSON, so the page must count serialized bytes, not body bytes.
    let big: Vec<String> = (0..60)
        .map(|i| format!("{i}-{}{}", "\"".repeat(1000), "x".repeat(2000)))
        .collect();
    a.send_many(&Dest::User("b".into()), &big, 16).await;
    let mut b = Client::login(&url, "b", SECRET).await;
    let conv = direct_conv("a", "b");
    let mut after = 0;
    let mut pages = 0;
    let mut got = Vec::new();
    while pages < 100 {
        let c = conv.clone();
        let page = b
            .request(|r| ClientFrame::Sync {
                r#ref: r,
                conv: c,
                after,
                limit: 0,
            })
            .await;
        let size = serde_json::to_string(&page)
            .expect("frames serialize")
            .len();
        assert!(size <= MAX_FRAME, "a page of {size} bytes > {MAX_FRAME}");
        pages += 1;
        let ServerFrame::SyncPage { msgs, more, .. } = page else {
            panic!("expected a sync page, got {page:?}");
        };
        assert!(!msgs.is_empty(), "every page makes progress");
        after = msgs.last().map_or(after, |m| m.seq);
        got.extend(msgs.into_iter().map(|m| m.body));
        if !more {
            break;
        }
    }
    assert!(pages > 1, "60 bodies of ~4 KiB of JSON need several pages");
    assert_eq!(got, big, "every message once, in order");
}

/// A client that requests large replies and never reads must not pin them past the
/// idle timeout (as when the idle timer is not polled while a write blocks). A write that waits
/// on the peer longer than `--write-timeout` closes the connection.
#[tokio::test]
async fn a_client_that_never_reads_is_closed_within_the_write_timeout() {
    let server = start(ServeConfig {
        write_timeout: Duration::from_millis(300),
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut a = Client::login(&url, "a", SECRET).await;
    let big: Vec<String> = (0..40)
        .map(|i| format!("{i}{}", "y".repeat(30_000)))
        .collect();
    a.send_many(&Dest::User("b".into()), &big, 8).await;
    drop(a);
    let mut b = Client::login(&url, "b", SECRET).await;
    // ~600 pages of ~60 KiB: far more than the socket buffers of loopback hold.
    for _ in 0..600 {
        let r = b.next_ref();
        b.send(&ClientFrame::Sync {
            r#ref: r,
            conv: direct_conv("a", "b"),
            after: 0,
            limit: 0,
        })
        .await;
    }
    let started = std::time::Instant::now();
    let mut closed = false;
    // The bound only tells a hang from a close: 600 sync pages take a debug build on a
    // loaded machine several seconds to write.
    while !closed && started.elapsed() < Duration::from_secs(30) {
        let text = http_get(server.addr(), "/metrics").await;
        closed = metric(&text, "serve_connections") == Some(0.0)
            && metric(&text, "serve_slow_consumer_disconnects_total") == Some(1.0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        closed,
        "the non-reading client is still connected after 30 s"
    );
    drop(b);
}

/// A TCP client that starts an upgrade request and never finishes it.
async fn half_upgrade(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let head = format!("GET /ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n");
    s.write_all(head.as_bytes())
        .await
        .expect("write half a request");
    s
}

/// True when the server closes `s` within `wait` (end of stream or a reset).
async fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Slowloris: an unfinished upgrade request is closed after the handshake
/// timeout, and never holds the connection longer.
#[tokio::test]
async fn an_unfinished_upgrade_is_closed() {
    let server = start(ServeConfig {
        handshake_timeout: Duration::from_millis(300),
        ..config()
    })
    .await;
    let mut s = half_upgrade(server.addr()).await;
    let started = std::time::Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "not before the timeout"
    );
    // A real client is unaffected.
    Client::login(&server.ws_url(), "a", SECRET).await;
}

/// A WebSocket that only pings and never logs in is closed with
/// `login_timeout`; pings (answered with `not_logged_in`) do not extend it.
#[tokio::test]
async fn a_connection_that_only_pings_is_closed() {
    let server = start(ServeConfig {
        login_timeout: Duration::from_millis(500),
        ..config()
    })
    .await;
    let mut c = Client::connect(&server.ws_url()).await;
    let mut answered = 0;
    let mut code = None;
    for ts in 0..50 {
        c.send_raw(tokio_tungstenite::tungstenite::Message::text(format!(
            r#"{{"type":"ping","ts":{ts}}}"#
        )))
        .await;
        match c.recv_within(Duration::from_millis(100)).await {
            Ok(Some(ServerFrame::Error {
                code: ErrorCode::NotLoggedIn,
                fatal: false,
                ..
            })) => answered += 1,
            Ok(Some(ServerFrame::Error { code: e, fatal, .. })) => {
                assert!(fatal);
                code = Some(e);
                break;
            }
            Ok(Some(other)) => panic!("unexpected {other:?}"),
            Ok(None) | Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(code, Some(ErrorCode::LoginTimeout));
    assert!(
        answered >= 2,
        "pings were answered until the timeout ({answered})"
    );
    c.expect_closed().await;
}

/// Idle unauthenticated connections (half upgrades and upgraded sockets that
/// never log in) fill `--max-unauthenticated`; a real client still gets in, because once
/// the oldest of them has been pending longer than the handshake timeout a new connection
/// evicts it, and `/metrics` is still served.
#[tokio::test]
async fn real_clients_get_in_while_idle_ones_fill_the_cap() {
    const CAP: usize = 4;
    let server = start(ServeConfig {
        max_unauthenticated: Some(CAP),
        handshake_timeout: Duration::from_millis(500),
        ..config()
    })
    .await;
    let mut half = Vec::new();
    for _ in 0..CAP {
        half.push(half_upgrade(server.addr()).await);
    }
    let mut idle = Vec::new();
    for _ in 0..CAP {
        idle.push(Client::connect(&server.ws_url()).await);
    }
    let mut a = Client::login(&server.ws_url(), "a", SECRET).await;
    let mut b = Client::login(&server.ws_url(), "b", SECRET).await;
    a.send_to("b", "in").await;
    assert_eq!(b.next_msg().await.body, "in");
    let text = http_get(server.addr(), "/metrics").await;
    let evicted = metric(&text, "serve_unauthenticated_evicted_total").expect("series");
    // The half upgrades timed out and the idle sockets took their places; `a` evicted the
    // oldest idle socket (`b` got the place `a` left when it logged in).
    assert!(evicted >= 1.0, "evicted {evicted}");
    let pending = metric(&text, "serve_unauthenticated_connections").expect("series");
    assert!(pending <= CAP as f64, "{pending} unauthenticated > {CAP}");
    for s in &mut half {
        assert!(closed_within(s, Duration::from_secs(5)).await, "evicted");
    }
}

/// A storm of real clients far beyond `--max-unauthenticated`, all at once and
/// each logging in well within the handshake timeout, is admitted as fast as they log in:
/// the server holds the rest in its listen backlog rather than evicting clients that are
/// still logging in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_storm_past_the_cap_waits_and_nobody_is_evicted() {
    const CAP: usize = 4;
    const CLIENTS: usize = 200;
    let server = start(ServeConfig {
        max_unauthenticated: Some(CAP),
        ..config()
    })
    .await;
    let url = server.ws_url();
    let storm: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move { Client::login(&url, &format!("s{i}"), SECRET).await })
        })
        .collect();
    let mut clients = Vec::new();
    for c in storm {
        clients.push(c.await.expect("every client logs in"));
    }
    let text = http_get(server.addr(), "/metrics").await;
    let evicted = metric(&text, "serve_unauthenticated_evicted_total").expect("series");
    assert_eq!(evicted, 0.0, "clients still logging in were evicted");
    assert_eq!(clients.len(), CLIENTS);
}
