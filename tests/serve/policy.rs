//! Token lifetime and group policy: expiring tokens are refused once expired;
//! with `--groups invite` only a group's creator adds members.

use msgstorm::serve::{GroupPolicy, ServeConfig};
use msgstorm::wire::{group_conv, ClientFrame, Dest, ErrorCode, ServerFrame, PROTOCOL_VERSION};

use crate::common::{config, expect_error, start, Client, SECRET};

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

async fn login_with(url: &str, user: &str, token: String) -> Client {
    let mut c = Client::connect(url).await;
    c.send(&ClientFrame::Login {
        v: PROTOCOL_VERSION,
        user: user.to_owned(),
        token,
    })
    .await;
    c
}

#[tokio::test]
async fn expired_tokens_are_refused_and_unexpired_ones_welcomed() {
    let server = start(config()).await;
    let url = server.ws_url();
    let past = msgstorm::wire::token_until("alice", SECRET, now_secs() - 1);
    let mut c = login_with(&url, "alice", past).await;
    assert_eq!(c.expect_fatal().await, ErrorCode::BadToken);

    let future = msgstorm::wire::token_until("alice", SECRET, now_secs() + 3600);
    let mut c = login_with(&url, "alice", future.clone()).await;
    assert!(matches!(c.recv().await, ServerFrame::Welcome { .. }));
    // The expiry is signed: moving it is a bad token.
    let (mac, _) = future.split_once('.').expect("mac.expiry");
    let forged = format!("{mac}.{}", now_secs() + 7200);
    let mut c = login_with(&url, "alice", forged).await;
    assert_eq!(c.expect_fatal().await, ErrorCode::BadToken);
}

#[tokio::test]
async fn token_command_with_ttl_prints_an_expiring_token_the_server_accepts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_msgstorm"))
        .args(["token", "bob", "--secret", SECRET, "--ttl", "1h"])
        .output()
        .expect("run msgstorm token");
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    let (_, exp) = token.split_once('.').expect("an expiring token");
    let exp: u64 = exp.parse().expect("Unix seconds");
    assert!(exp > now_secs() + 3500 && exp <= now_secs() + 3600);
    let server = start(config()).await;
    let mut c = login_with(&server.ws_url(), "bob", token).await;
    assert!(matches!(c.recv().await, ServerFrame::Welcome { .. }));
}

#[tokio::test]
async fn invite_only_groups_refuse_strangers() {
    let server = start(ServeConfig {
        groups: GroupPolicy::Invite,
        ..config()
    })
    .await;
    let url = server.ws_url();
    let mut owner = Client::login(&url, "owner", SECRET).await;
    let mut friend = Client::login(&url, "friend", SECRET).await;
    let mut stranger = Client::login(&url, "stranger", SECRET).await;
    owner
        .group(
            |r, group| ClientFrame::GroupCreate { r#ref: r, group },
            "team",
        )
        .await;
    let join = |r, group| ClientFrame::GroupJoin { r#ref: r, group };
    let add = |who: &str| {
        let who = who.to_owned();
        move |r, group| ClientFrame::GroupAdd {
            r#ref: r,
            group,
            user: who,
        }
    };

    let reply = stranger.request(|r| join(r, "team".to_owned())).await;
    assert!(!expect_error(&reply, ErrorCode::Forbidden), "not fatal");
    let reply = stranger
        .request(|r| add("stranger")(r, "team".to_owned()))
        .await;
    expect_error(&reply, ErrorCode::Forbidden);

    owner.group(add("friend"), "team").await;
    friend.group(join, "team").await;
    let (conv, _) = owner
        .send_msg(Dest::Group("team".into()), "members only")
        .await;
    assert_eq!(friend.next_msg().await.body, "members only");
    assert_eq!(friend.sync_all(&conv, 0).await.len(), 1);

    let reply = stranger
        .request(|r| ClientFrame::Sync {
            r#ref: r,
            conv: group_conv("team"),
            after: 0,
            limit: 0,
        })
        .await;
    expect_error(&reply, ErrorCode::NotMember);
    let reply = stranger
        .request(|r| ClientFrame::Send {
            r#ref: r,
            to: Dest::Group("team".into()),
            body: "let me in".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::NotMember);
}

#[tokio::test]
async fn open_groups_stay_open_by_default() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut owner = Client::login(&url, "owner", SECRET).await;
    let mut other = Client::login(&url, "other", SECRET).await;
    owner
        .group(
            |r, group| ClientFrame::GroupCreate { r#ref: r, group },
            "pub",
        )
        .await;
    other
        .group(|r, group| ClientFrame::GroupJoin { r#ref: r, group }, "pub")
        .await;
    let reply = other
        .request(|r| ClientFrame::GroupAdd {
            r#ref: r,
            group: "pub".into(),
            user: "third".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::Forbidden);
}
