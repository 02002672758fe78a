//! `msgstorm size` from a run against the embedded server: the basis comes from the
//! generator's process (which holds the server), and a result without any watched target
//! process is refused with the way to get one.

use crate::common::run::{msgstorm, msgstorm_sync, Work};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_gives_a_table_from_a_run_and_refuses_one_without_a_target() {
    let work = Work::new();
    // Four seconds of logins (the memory line needs three points), two of traffic.
    let file = work.write(
        "s.toml",
        r#"name = "size"
drain = "500ms"
[population]
users = 300
login_rate = 75
[[traffic]]
name = "chat"
kind = "direct"
senders = 10
receivers = 10
rate = 50
duration = "2s"
size = 300
"#,
    );
    let out = work.path("out");
    let ran = msgstorm(&[
        "run",
        file.to_str().expect("utf-8 path"),
        "--out",
        out.to_str().expect("utf-8 path"),
        "-q",
    ])
    .await;
    ran.expect_code(0);
    let result = out.join("result.json");
    let result = result.to_str().expect("utf-8 path");
    let sized = msgstorm_sync(&[
        "size",
        result,
        "--users",
        "10000",
        "--online",
        "5%",
        "--rate",
        "100",
        "--group-size",
        "5",
    ]);
    sized.expect_code(0);
    let text = &sized.stdout;
    assert!(text.contains("the embedded server"), "{sized}");
    // The memory line needs three monitor samples inside the login phase, which a very
    // busy box may delay: then the output says it was not measured.
    assert!(
        text.contains("| memory for 500 online users")
            || text.contains("not measured in this run: memory"),
        "{sized}"
    );
    assert!(text.contains("| cores for 400 deliveries/s"), "{sized}");
    assert!(text.contains("300 B a message: body bytes only"), "{sized}");

    // The same result as if the server had run elsewhere, unwatched.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(result).expect("read")).expect("JSON");
    json["notes"] = serde_json::json!([]);
    let bare = work.write("bare.json", &json.to_string());
    let refused = msgstorm_sync(&[
        "size",
        bare.to_str().expect("utf-8 path"),
        "--users",
        "10",
        "--online",
        "0.5",
        "--rate",
        "1",
    ]);
    refused.expect_code(2);
    assert!(refused.stderr.contains("[monitor]"), "{refused}");
    let bad = msgstorm_sync(&[
        "size", result, "--users", "10", "--online", "150%", "--rate", "1",
    ]);
    bad.expect_code(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_takes_bytes_on_the_wire_from_the_watched_servers_sockets() {
    // The real server in a process of its own, so its sockets are only its own.
    let server = crate::common::ChildServer::start(&[]);
    let work = Work::new();
    let text = format!(
        r#"name = "wire"
drain = "500ms"
[target]
url = "{}"
[target.auth]
secret = "{}"
[monitor]
pids = [{}]
[population]
users = 40
login_rate = 1000
[[traffic]]
name = "chat"
kind = "direct"
senders = 10
receivers = 10
rate = 200
duration = "4s"
size = 1000
"#,
        server.ws_url(),
        crate::common::SECRET,
        server.pid()
    );
    let (ran, artifact) = crate::common::run::run_text(&work, &text).await;
    ran.expect_code(0);
    let watched = artifact
        .processes
        .iter()
        .find(|p| !p.generator)
        .expect("the watched server");
    // From the baseline at second 0 (before any login) to its highest, what the server's
    // sockets received grew by at least the 1,000-byte bodies (framing on top).
    let first = watched.tcp.first().map_or(u64::MAX, |t| t.1);
    let most = watched.tcp.iter().map(|t| t.1).max().unwrap_or(0);
    let sent = artifact.metrics.count(msgstorm::metrics::Counter::Sent);
    assert!(
        sent > 0 && most - first >= sent * 1000,
        "{sent} sent: {:?}",
        watched.tcp
    );
    // The report's table of the target by phase has its bandwidth.
    assert!(ran.stdout.contains("| messages "), "{ran}");
    let result = work.path("out").join("result.json");
    let sized = msgstorm_sync(&[
        "size",
        result.to_str().expect("utf-8 path"),
        "--users",
        "1000",
        "--online",
        "10%",
        "--rate",
        "200",
    ]);
    sized.expect_code(0);
    // Bytes on the wire, not the bodies' lower bound.
    assert!(
        sized.stdout.contains("| bandwidth into the server")
            && sized.stdout.contains("B of TCP payload a message sent"),
        "{sized}"
    );
    assert!(!sized.stdout.contains("body bytes only"), "{sized}");
}
