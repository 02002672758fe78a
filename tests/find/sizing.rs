//! `msgstorm size` from a run against the embedded server: the basis comes from the
//! generator's process (which holds the server), and a result without any watched target
//! process is refused with the way to get one.

use crate::common::run::{msgstorm, msgstorm_sync, Work};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_size_gives_a_table_from_a_run_and_refuses_one_without_a_target() {
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
async fn issue_15_size_takes_bytes_on_the_wire_from_the_watched_servers_sockets() {
    // The server runs in this test's process: watching it means watching this pid.
    let server = crate::common::start(crate::common::config()).await;
    let work = Work::new();
    let text = crate::common::run::scenario(
        &format!(
            "name = \"wire\"\ndrain = \"500ms\"\n[monitor]\npids = [{}]",
            std::process::id()
        ),
        &server,
        r#"
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
    );
    let (ran, artifact) = crate::common::run::run_text(&work, &text).await;
    ran.expect_code(0);
    let watched = artifact
        .processes
        .iter()
        .find(|p| !p.generator)
        .expect("the watched server");
    assert!(watched.tcp.len() >= 3, "{:?}", watched.tcp);
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
    // 1,000-byte bodies: more than 1,000 B of TCP payload a message (framing on top; other
    // tests' servers in this process can only add to it, so there is no upper bound).
    let line = sized
        .stdout
        .lines()
        .find(|l| l.contains("bandwidth into the server"))
        .unwrap_or_else(|| panic!("no wire line\n{sized}"));
    let bytes: f64 = line
        .split("| ")
        .nth(3)
        .and_then(|b| b.split_whitespace().next())
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("no bytes in {line}"));
    assert!(bytes > 1000.0, "{line}");
    server.shutdown().await.expect("server stops");
}
