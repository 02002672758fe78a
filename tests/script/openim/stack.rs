//! OpenIM v3.8.3's stack (`peers/openim/stack.sh`), started once for the whole test binary
//! and stopped by the script when the binary ends; a scenario with its users' tokens
//! ([`setup`]), and what OpenIM stored, pulled through its REST API.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{json, Value};

use super::setup;
use crate::common::detect;
use crate::common::peers::installed;
use crate::ws_json::peer::repo;

/// The running stack.
pub struct Stack {
    /// Its folder: state and every service's log (removed when the test binary ends).
    pub dir: PathBuf,
}

/// The stack, started by the first test that asks (the others wait for it).
pub fn stack() -> &'static Stack {
    static STACK: OnceLock<Stack> = OnceLock::new();
    STACK.get_or_init(|| {
        installed("OpenIM", &repo(detect::OPENIM));
        let dir = std::env::temp_dir().join(format!("msgstorm-openim-{}", std::process::id()));
        let out = Command::new(repo("peers/openim/stack.sh"))
            .arg("start")
            .arg(&dir)
            .arg(std::process::id().to_string())
            .output()
            .expect("run peers/openim/stack.sh");
        assert!(
            out.status.success(),
            "the OpenIM stack did not start: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Stack { dir }
    })
}

impl Stack {
    /// A service's log so far (`openim-msgtransfer`, …).
    pub fn log(&self, service: &str) -> String {
        std::fs::read_to_string(self.dir.join("logs").join(format!("{service}.log")))
            .unwrap_or_default()
    }
}

/// Registers the users and groups of `scenario` (the text of a file in `dir`) and returns
/// the scenario with every user's token in `[target.script.vars.tokens]` (the shipped
/// scenarios end with that table).
pub fn with_tokens(scenario: &str, dir: &Path) -> String {
    let mut out = scenario.trim_end().to_owned();
    assert!(
        out.ends_with("[target.script.vars.tokens]"),
        "the scenario ends with its tokens' table"
    );
    let tokens = setup::register(scenario, &dir.join("scenario.toml")).expect("OpenIM's setup");
    for (user, token) in tokens {
        out.push_str(&format!("\n{user} = \"{token}\""));
    }
    out.push('\n');
    out
}

/// POSTs `body` to OpenIM's `path` with the admin's token; the answer's `data`.
pub fn post_admin(path: &str, body: &Value) -> Value {
    let admin = setup::admin().expect("the admin's token");
    setup::post(path, &admin, body).expect("OpenIM's API")
}

/// What OpenIM holds of conversation `conv` for `user`: each message's content (the
/// text the adapter sent), by seq, pulled through the REST API.
pub fn stored(user: &str, conv: &str) -> Vec<(u64, String)> {
    let newest = post_admin("/msg/newest_seq", &json!({ "userID": user }));
    let max = newest["maxSeqs"][conv].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    let mut from = 1;
    while from <= max {
        let to = (from + 99).min(max);
        let range =
            json!({ "conversationID": conv, "begin": from, "end": to, "num": to - from + 1 });
        let data = post_admin(
            "/msg/pull_msg_by_seq",
            &json!({ "userID": user, "seqRanges": [range], "order": 0 }),
        );
        for m in data["msgs"][conv]["Msgs"].as_array().into_iter().flatten() {
            let seq = m["seq"].as_u64().expect("a seq");
            let content = m["content"].as_str().unwrap_or_default();
            out.push((seq, text_of(content)));
        }
        from = to + 1;
    }
    out
}

/// The text of a text message's `content` (base64 of `{"content": TEXT}`, as Go's
/// encoding/json writes bytes).
fn text_of(content: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content)
        .expect("base64 content");
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    v["content"].as_str().unwrap_or_default().to_owned()
}
