//! A server whose error text would control the terminal and break lines, run against as a
//! new user would (`msgstorm run` with the `ws-json` driver, then `report`): the report's
//! first line stays one line, quoting the server's text with its escapes visible; no
//! output, text or Markdown, carries an escape sequence off a terminal; `result.json`
//! keeps the server's exact bytes.

use futures_util::{SinkExt, StreamExt};
use msgstorm::metrics::ErrorKind;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use crate::common::run::{msgstorm, run_file, Work};

/// What the server says to every message: clears the screen, sets the window title, rings
/// the bell, and starts a line of its own.
const HOSTILE: &str = "bad\x1b[2J\x1b]0;pwned\x07 frame\n\rSECOND LINE";

/// How the report shows it: on one line, every control character as an escape.
const SHOWN: &str = "bad\\x1b[2J\\x1b]0;pwned\\x07 frame\\n\\rSECOND LINE";

/// A WebSocket server that welcomes every login and answers every message sent with an
/// `error` frame carrying [`HOSTILE`]; its address.
async fn hostile_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                while let Some(Ok(frame)) = ws.next().await {
                    let Message::Text(text) = frame else {
                        continue;
                    };
                    let sent: serde_json::Value =
                        serde_json::from_str(text.as_str()).unwrap_or_default();
                    let answer = match sent["type"].as_str() {
                        Some("login") => serde_json::json!({ "type": "welcome" }),
                        Some("send") => serde_json::json!({ "type": "error", "message": HOSTILE }),
                        _ => continue,
                    };
                    if ws.send(Message::text(answer.to_string())).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The scenario: a few users, each message answered by the server's error.
fn scenario(addr: std::net::SocketAddr) -> String {
    format!(
        r#"name = "hostile"
drain = "1s"

[target]
driver = "ws-json"
url = "ws://{addr}/ws"

[target.ws-json]
login = '{{"type":"login","user":"{{user}}"}}'
direct = '{{"type":"send","to":"{{to}}","body":"{{body}}"}}'

[target.ws-json.login_ok]
when = {{ type = "welcome" }}

[target.ws-json.error]
when = {{ type = "error" }}
reason = "message"

[target.ws-json.push]
when = {{ type = "msg" }}
body = "body"

[population]
users = 4

[[traffic]]
kind = "direct"
senders = 2
receivers = 2
messages = 12
interval = "10ms"
"#
    )
}

/// Whether `out` holds a byte a terminal would act on: ESC, BEL, a carriage return, or a
/// C1 control.
fn acts(out: &str) -> bool {
    out.chars()
        .any(|c| c != '\n' && (c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_text_never_controls_the_terminal_nor_breaks_the_first_line() {
    let work = Work::new();
    let addr = hostile_server().await;
    let file = work.write("hostile.toml", &scenario(addr));
    let out = work.path("out");
    let markdown = work.path("summary.md");
    let md_arg = format!("markdown={}", markdown.display());
    let (ran, artifact) = run_file(&file, &out, &["--format", &md_arg]).await;
    ran.expect_code(1);

    // The data keeps the server's exact text.
    let (_, count, examples) = artifact
        .metrics
        .errors()
        .find(|(k, _, _)| *k == ErrorKind::Protocol)
        .unwrap_or_else(|| panic!("no protocol errors\n{ran}"));
    assert!(count > 10, "{count}\n{ran}");
    assert!(
        examples.iter().any(|e| e.ends_with(HOSTILE)),
        "{examples:?}"
    );
    let raw = std::fs::read_to_string(out.join("result.json")).expect("result.json");
    assert!(
        raw.contains(r#"bad\u001b[2J\u001b]0;pwned\u0007 frame\n\rSECOND LINE"#),
        "result.json keeps the bytes, JSON-escaped"
    );

    // The first line, which CI scripts read, is one line naming the check and the text.
    let first = ran.verdict();
    assert!(first.starts_with("FAIL: "), "{first}");
    assert!(
        first.contains("checks.max_protocol_errors: ") && first.contains(SHOWN),
        "the first line quotes the server's text with visible escapes: {first}"
    );
    assert!(
        !ran.stdout.lines().any(|l| l.starts_with("SECOND LINE")),
        "{ran}"
    );
    assert!(!acts(&ran.stdout) && !acts(&ran.stderr), "{ran:?}");

    // Markdown for a job summary: no escape sequence either.
    let md = std::fs::read_to_string(&markdown).expect("the Markdown summary");
    assert!(!acts(&md), "{md:?}");
    assert!(md.contains("SECOND LINE"), "{md}");

    // `report` over the result file prints the same, in every text format.
    let result = out.join("result.json");
    let result = result.to_str().expect("utf-8");
    let again = msgstorm(&["report", result]).await;
    again.expect_code(1);
    assert_eq!(again.stdout, ran.stdout);
    let md = msgstorm(&["report", result, "--format", "markdown"]).await;
    assert!(
        !acts(&md.stdout) && md.stdout.contains("SECOND LINE"),
        "{md}"
    );
    let base = work.write("base.json", &raw);
    let base = base.to_str().expect("utf-8");
    for format in ["text", "markdown"] {
        let compared = msgstorm(&["compare", base, result, "--format", format]).await;
        compared.expect_code(0);
        assert!(!acts(&compared.stdout), "{compared}");
    }
}

/// An error message (here a file name given on the command line) is one line on stderr
/// with its control characters shown as escapes.
#[test]
fn the_error_line_shows_control_characters_as_escapes() {
    let ran = crate::common::run::msgstorm_sync(&["report", "/nonexistent/a\x1b[2Jb\nc.json"]);
    ran.expect_code(2);
    assert_eq!(ran.stderr.lines().count(), 1, "{ran}");
    assert!(
        ran.stderr
            .starts_with("error: /nonexistent/a\\x1b[2Jb\\nc.json: "),
        "{ran}"
    );
    assert!(!acts(&ran.stderr), "{ran:?}");
}
