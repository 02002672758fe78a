//! Messaging: 1:1 and group delivery, acks after commit, order, identity, sync.

use std::time::Duration;

use msgstorm::wire::{direct_conv, group_conv, ClientFrame, Dest, ErrorCode, ServerFrame};

use crate::common::{bodies, config, expect_error, start, Client, SECRET};

#[tokio::test]
async fn direct_message_is_acked_after_commit_and_pushed() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;

    let (conv, seq) = alice.send_to("bob", "hello bob").await;
    assert_eq!(conv, direct_conv("alice", "bob"));
    assert_eq!(seq, 1);
    // The ack means committed: a fresh reader sees the message at once.
    let mut reader = Client::login(&url, "bob", SECRET).await;
    let stored = reader.sync_all(&conv, 0).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].body, "hello bob");

    let pushed = bob.next_msg().await;
    assert_eq!(
        (
            pushed.conv.as_str(),
            pushed.seq,
            pushed.from.as_str(),
            pushed.body.as_str()
        ),
        (conv.as_str(), 1, "alice", "hello bob")
    );
    let (_, seq) = bob.send_to("alice", "hi alice").await;
    assert_eq!(seq, 2, "one seq counter per conversation, both directions");
    assert_eq!(alice.next_msg().await.body, "hi alice");
    server.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn group_fan_out_reaches_every_online_member_in_order() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut owner = Client::login(&url, "owner", SECRET).await;
    owner
        .group(
            |r, group| ClientFrame::GroupCreate { r#ref: r, group },
            "team",
        )
        .await;
    let mut members = Vec::new();
    for name in ["m1", "m2", "m3"] {
        let mut m = Client::login(&url, name, SECRET).await;
        m.group(
            |r, group| ClientFrame::GroupJoin { r#ref: r, group },
            "team",
        )
        .await;
        members.push(m);
    }
    let sent = bodies("g", 50);
    let seqs = owner
        .send_many(&Dest::Group("team".into()), &sent, 16)
        .await;
    assert_eq!(seqs, (1..=50).collect::<Vec<u64>>());
    for m in &mut members {
        let mut got = Vec::new();
        while got.len() < sent.len() {
            got.push(m.next_msg().await);
        }
        assert!(got
            .iter()
            .all(|g| g.conv == group_conv("team") && g.from == "owner"));
        assert_eq!(got.iter().map(|g| g.seq).collect::<Vec<_>>(), seqs);
        assert_eq!(got.iter().map(|g| g.body.clone()).collect::<Vec<_>>(), sent);
    }
    assert!(
        owner
            .msgs_within(Duration::from_millis(100))
            .await
            .is_empty(),
        "the sender gets acks, not pushes of its own messages"
    );
}

#[tokio::test]
async fn only_members_send_to_or_read_a_group() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut owner = Client::login(&url, "owner", SECRET).await;
    let mut outsider = Client::login(&url, "outsider", SECRET).await;
    owner
        .group(
            |r, group| ClientFrame::GroupCreate { r#ref: r, group },
            "club",
        )
        .await;
    owner
        .send_msg(Dest::Group("club".into()), "members only")
        .await;

    let reply = outsider
        .request(|r| ClientFrame::Send {
            r#ref: r,
            to: Dest::Group("club".into()),
            body: "let me in".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::NotMember);
    let reply = outsider
        .request(|r| ClientFrame::Sync {
            r#ref: r,
            conv: group_conv("club"),
            after: 0,
            limit: 10,
        })
        .await;
    expect_error(&reply, ErrorCode::NotMember);
    let reply = outsider
        .request(|r| ClientFrame::Sync {
            r#ref: r,
            conv: direct_conv("owner", "someone"),
            after: 0,
            limit: 10,
        })
        .await;
    expect_error(&reply, ErrorCode::NotMember);
    let reply = outsider
        .request(|r| ClientFrame::GroupJoin {
            r#ref: r,
            group: "nope".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::NoSuchGroup);
    let reply = outsider
        .request(|r| ClientFrame::GroupCreate {
            r#ref: r,
            group: "club".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::GroupExists);

    outsider
        .group(
            |r, group| ClientFrame::GroupJoin { r#ref: r, group },
            "club",
        )
        .await;
    assert_eq!(outsider.sync_all(&group_conv("club"), 0).await.len(), 1);
    outsider
        .group(
            |r, group| ClientFrame::GroupLeave { r#ref: r, group },
            "club",
        )
        .await;
    let reply = outsider
        .request(|r| ClientFrame::Send {
            r#ref: r,
            to: Dest::Group("club".into()),
            body: "bye".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::NotMember);
}

#[tokio::test]
async fn the_sender_is_always_the_logged_in_user() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut mallory = Client::login(&url, "mallory", SECRET).await;
    let mut bob = Client::login(&url, "bob", SECRET).await;
    // A `from` field is not part of a send: the frame is refused, nothing is delivered.
    mallory
        .send_raw(tokio_tungstenite::tungstenite::Message::text(
            r#"{"type":"send","ref":9,"to":{"user":"bob"},"body":"x","from":"alice"}"#,
        ))
        .await;
    let reply = mallory.recv().await;
    expect_error(&reply, ErrorCode::Malformed);
    mallory.send_to("bob", "from me").await;
    let m = bob.next_msg().await;
    assert_eq!((m.from.as_str(), m.body.as_str()), ("mallory", "from me"));
    let reply = mallory
        .request(|r| ClientFrame::Send {
            r#ref: r,
            to: Dest::User("bad:id".into()),
            body: "x".into(),
        })
        .await;
    expect_error(&reply, ErrorCode::BadRecipient);
}

#[tokio::test]
async fn offline_user_syncs_exactly_the_missed_messages() {
    let server = start(config()).await;
    let url = server.ws_url();
    let mut alice = Client::login(&url, "alice", SECRET).await;
    let mut owner = Client::login(&url, "owner", SECRET).await;
    owner
        .group(
            |r, group| ClientFrame::GroupCreate { r#ref: r, group },
            "room",
        )
        .await;
    let mut carol = Client::login(&url, "carol", SECRET).await;
    carol
        .group(
            |r, group| ClientFrame::GroupJoin { r#ref: r, group },
            "room",
        )
        .await;
    alice.send_to("carol", "seen-1").await;
    assert_eq!(carol.next_msg().await.body, "seen-1");
    drop(carol);

    let direct = alice
        .send_many(&Dest::User("carol".into()), &bodies("d", 1500), 64)
        .await;
    let group = owner
        .send_many(&Dest::Group("room".into()), &bodies("r", 20), 8)
        .await;
    assert_eq!(direct.first(), Some(&2));

    let mut carol = Client::login(&url, "carol", SECRET).await;
    let convs = match carol.request(|r| ClientFrame::Convs { r#ref: r }).await {
        ServerFrame::ConvList { convs, .. } => convs,
        other => panic!("{other:?}"),
    };
    let last = |c: &str| convs.iter().find(|i| i.conv == c).map(|i| i.last_seq);
    assert_eq!(convs.len(), 2, "{convs:?}");
    assert_eq!(last(&direct_conv("alice", "carol")), Some(1501));
    assert_eq!(last(&group_conv("room")), Some(20));

    // Carol had seen seq 1 of the direct conversation and nothing of the group.
    let missed = carol.sync_all(&direct_conv("alice", "carol"), 1).await;
    assert_eq!(missed.iter().map(|m| m.seq).collect::<Vec<_>>(), direct);
    assert_eq!(
        missed.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
        bodies("d", 1500)
    );
    let missed = carol.sync_all(&group_conv("room"), 0).await;
    assert_eq!(missed.iter().map(|m| m.seq).collect::<Vec<_>>(), group);
    // Fan-out runs after the ack, so a push of a message committed just before this login
    // may still arrive; nothing else may.
    for m in carol.msgs_within(Duration::from_millis(100)).await {
        let known = if m.conv == group_conv("room") {
            &group
        } else {
            &direct
        };
        assert!(known.contains(&m.seq), "unexpected push {m:?}");
    }
}
