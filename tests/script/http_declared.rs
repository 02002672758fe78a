//! The declared hot path of an HTTP adapter (`scenarios/http-chat.lua`: answers read by
//! shape, sends by template, a long poll declared once) against the real HTTP chat server:
//! what msgstorm reads itself is what `receive` would have said, and what it does not read
//! (an answer outside 2xx) still reaches `receive`.

use msgstorm::artifact::Artifact;
use msgstorm::metrics::{Counter, ErrorKind};

use super::http::{exact, signals_scenario, HttpChat};
use crate::common::run::{run_file, Ran, Work};

/// `scenarios/http-chat.toml` against a fresh server, its adapter edited by `edit`.
async fn run_edited(edit: impl Fn(String) -> String) -> (Ran, Artifact) {
    let server = HttpChat::start();
    let work = Work::new();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}{name}")).expect(name);
    work.write("http-chat.lua", &edit(read("http-chat.lua")));
    let url = format!("http://127.0.0.1:{}", server.port);
    let file = work.write(
        "scenario.toml",
        &read("http-chat.toml").replace("http://127.0.0.1:8008", &url),
    );
    run_file(&file, &work.path("out"), &[]).await
}

/// `text` with `with` put before `at`, which it must hold.
fn before(text: String, at: &str, with: &str) -> String {
    assert!(text.contains(at), "the adapter has no {at:?}");
    text.replacen(at, &format!("{with}{at}"), 1)
}

/// The errors of kind `kind`: their count and kept examples.
fn errors(a: &Artifact, kind: ErrorKind) -> (u64, Vec<String>) {
    a.metrics
        .errors()
        .find(|(k, _, _)| *k == kind)
        .map_or((0, Vec::new()), |(_, n, texts)| (n, texts.to_vec()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_answer_acks_a_send_with_the_servers_conv_and_seq() {
    // Each login first sends a probe to a user nobody plays and awaits its acceptance: the
    // answer, read by `accepted` alone, must carry the request's id and the server's
    // conversation and position; `receive` refuses every 2xx answer it is given.
    let probe = r#"  local txn = u:next_id()
  u:request("PUT", "/send/" .. txn, encode({ to = "nobody", body = "probe" }), auth(u), txn,
    accepted)
  local a = u:await(txn)
  local conv = u.id < "nobody" and "d:" .. u.id .. ":nobody" or "d:nobody:" .. u.id
  if a.ack ~= tostring(txn) or a.conv ~= conv or math.type(a.seq) ~= "integer" or a.seq < 1 then
    refuse("the answer read as " .. tostring(a.ack) .. " " .. tostring(a.conv) .. " " .. tostring(a.seq))
  end
"#;
    let (ran, a) = run_edited(|s| {
        let s = before(s, "  if vars.mode == \"sse\" then\n    u:sse", probe);
        before(
            s,
            "  if kind == \"event\" then",
            "  if kind == \"response\" and meta.status < 300 then\n    \
             return { protocol = \"receive got a 2xx answer\" }\n  end\n",
        )
    })
    .await;
    exact(&ran, &a);
    let sent = a.metrics.count(Counter::Sent);
    assert!(sent > 400, "{sent} sent");
    assert_eq!(a.metrics.count(Counter::Accepted), sent, "{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_long_poll_delivers_every_message_once_across_reconnects_from_its_kept_cursor() {
    // Users who come and go; a returning user's fetch hands nothing over, so what it missed
    // comes only by its first poll, from the cursor msgstorm kept in `u.kept.since`: from
    // an older cursor it would come twice, from a newer one not at all.
    let server = HttpChat::start();
    let work = Work::new();
    let url = format!("http://127.0.0.1:{}", server.port);
    let file = signals_scenario(&work, &url, |s| {
        before(
            s,
            "  if why == \"start\" then",
            "  if why == \"missed\" then return end\n",
        )
    });
    let (ran, a) = run_file(std::path::Path::new(&file), &work.path("out"), &[]).await;
    exact(&ran, &a);
    let (logins, users) = (a.metrics.count(Counter::LoginOk), 40);
    assert!(logins > 2 * users, "{logins} logins: too few returns");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_answered_outside_2xx_reaches_receive_as_its_refusal() {
    let (ran, a) =
        run_edited(|s| s.replace("path = \"/send/{id}\"", "path = \"/nosend/{id}\"")).await;
    ran.expect_code(1);
    let (refused, texts) = errors(&a, ErrorKind::SendFailed);
    assert!(refused > 100, "{refused} refused\n{ran}");
    // What `receive` says of them. (The server answers 404 without reading the body, whose
    // bytes it then takes for the next request on the connection: a 501 besides.)
    assert!(texts.iter().all(|t| t.starts_with("HTTP ")), "{texts:?}");
    assert!(texts.iter().any(|t| t == "HTTP 404"), "{texts:?}");
    assert_eq!(errors(&a, ErrorKind::Script).0, 0, "{ran}");
    assert_eq!(a.metrics.count(Counter::Accepted), 0, "{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_poll_answered_outside_2xx_reaches_receive_and_is_asked_again_later() {
    let (ran, a) =
        run_edited(|s| s.replace("\"/sync?timeout=\" ..", "\"/nosync?timeout=\" ..")).await;
    ran.expect_code(1);
    let (failed, texts) = errors(&a, ErrorKind::Protocol);
    assert!(
        texts.iter().all(|t| t.contains("sync: HTTP 404")),
        "{texts:?}"
    );
    // A second between a failed poll and the next: a few per user over the run's seconds,
    // not a tight loop.
    let logins = a.metrics.count(Counter::LoginOk);
    assert!(
        (logins..=logins * 15).contains(&failed),
        "{failed} failed polls for {logins} logins\n{ran}"
    );
}
