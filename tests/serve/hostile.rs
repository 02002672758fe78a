//! The reference server under hostile or unlucky clients (issue 10): the login race,
//! replies that would pin memory, slowloris upgrades, idle unauthenticated connections.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use msgstorm::wire::{ClientFrame, Dest, ServerFrame, PROTOCOL_VERSION};

use crate::common::{bodies, config, start, Client, SECRET};

/// Issue 10: a push could reach a client before `welcome`. Logins are hammered while a
/// sender pushes to the same users; the first frame of every login must be `welcome`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_welcome_is_always_the_first_frame() {
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
