//! Login: good and bad tokens, versions, and nothing before login.

use msgstorm::wire::{ClientFrame, ErrorCode, ServerFrame, PROTOCOL_VERSION};

use crate::common::{config, expect_error, start, Client, SECRET};

#[tokio::test]
async fn good_token_is_welcomed() {
    let server = start(config()).await;
    let c = Client::login(&server.ws_url(), "alice", SECRET).await;
    assert_eq!(c.user, "alice");
    server.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn bad_token_gets_an_error_and_a_close() {
    let server = start(config()).await;
    let mut c = Client::connect(&server.ws_url()).await;
    c.send(&ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: "alice".into(),
        token: msgstorm::serve::token("alice", "wrong-secret"),
    })
    .await;
    assert_eq!(c.expect_fatal().await, ErrorCode::BadToken);

    let mut c = Client::connect(&server.ws_url()).await;
    c.send(&ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: "bob".into(),
        token: msgstorm::serve::token("alice", SECRET),
    })
    .await;
    assert_eq!(c.expect_fatal().await, ErrorCode::BadToken);
}

#[tokio::test]
async fn unknown_version_is_refused() {
    let server = start(config()).await;
    let mut c = Client::connect(&server.ws_url()).await;
    c.send(&ClientFrame::Login {
        v: PROTOCOL_VERSION + 1,
        user: "alice".into(),
        token: server.token("alice"),
    })
    .await;
    assert_eq!(c.expect_fatal().await, ErrorCode::BadVersion);
}

#[tokio::test]
async fn actions_before_login_are_refused() {
    let server = start(config()).await;
    let mut c = Client::connect(&server.ws_url()).await;
    let reply = c.request(|r| ClientFrame::Time { r#ref: r }).await;
    assert!(!expect_error(&reply, ErrorCode::NotLoggedIn), "not fatal");
    let reply = c
        .request(|r| ClientFrame::Send {
            r#ref: r,
            to: msgstorm::wire::Dest::User("bob".into()),
            body: "x".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::NotLoggedIn);
    c.send(&ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: "alice".into(),
        token: server.token("alice"),
    })
    .await;
    assert!(matches!(c.recv().await, ServerFrame::Welcome { .. }));
    c.send(&ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: "alice".into(),
        token: server.token("alice"),
    })
    .await;
    let again = c.recv().await;
    expect_error(&again, ErrorCode::AlreadyLoggedIn);
}

#[test]
fn token_command_prints_the_servers_token() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_msgstorm"))
        .args(["token", "alice", "--secret", SECRET])
        .output()
        .expect("run msgstorm token");
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(printed.trim(), msgstorm::serve::token("alice", SECRET));
}
