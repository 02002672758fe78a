//! OpenIM v3.8.3's stack (`peers/openim/stack.sh`), started once for the whole test binary
//! and stopped by the script when the binary ends, and what a run needs of its REST API
//! before it starts: the scenario's users registered, its groups created with their
//! members, and each user's token for the adapter's `vars.tokens`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine as _;
use msgstorm::scenario::{self, Shard, TrafficShape};
use serde_json::{json, Value};

use crate::common::detect;
use crate::common::peers::installed;
use crate::ws_json::peer::repo;

/// OpenIM's REST API (the stack's fixed port).
const API: &str = "127.0.0.1:10002";

/// The stack's admin secret and admin user (OpenIM's shipped `share.yml`).
const SECRET: &str = "openIM123";
const ADMIN: &str = "imAdmin";

/// The platform the adapter logs in as (its `vars.platform` default: Web).
const PLATFORM: u32 = 5;

/// Users registered per REST call.
const BATCH: usize = 200;

/// The running stack: its folder (state and every service's log).
pub struct Stack {
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

/// POSTs `body` to OpenIM's `path` as `token` and returns the answer's `data`; an
/// `errCode` other than 0 fails the test.
pub fn post(path: &str, token: &str, body: &Value) -> Value {
    let body = body.to_string();
    let mut s = TcpStream::connect(API).expect("connect to OpenIM's API");
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: {API}\r\nContent-Type: application/json\r\n\
         operationID: msgstorm-test\r\ntoken: {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write the request");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read the answer");
    let (_, answer) = resp.split_once("\r\n\r\n").expect("an HTTP answer");
    let v: Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("{path}: {e}: {answer}"));
    assert_eq!(v["errCode"], 0, "{path} {body}: {answer}");
    v["data"].clone()
}

/// The admin's token.
pub fn admin() -> String {
    let data = post(
        "/auth/get_admin_token",
        "",
        &json!({ "secret": SECRET, "userID": ADMIN }),
    );
    data["token"].as_str().expect("a token").to_owned()
}

/// Registers the users and groups of `scenario` (the text of a file in `dir`) and returns
/// the scenario with every user's token in `[target.script.vars.tokens]` (the shipped
/// scenarios end with that table).
pub fn with_tokens(scenario: &str, dir: &Path) -> String {
    let plan = scenario::parse(scenario, &dir.join("scenario.toml"), &[], Shard::WHOLE)
        .expect("the scenario loads");
    let pop = &plan.population;
    let users: Vec<String> = (0..pop.users).map(|ix| pop.user_id(ix)).collect();
    let admin = admin();
    for chunk in users.chunks(BATCH) {
        let list: Vec<Value> = chunk
            .iter()
            .map(|u| json!({ "userID": u, "nickname": u }))
            .collect();
        post("/user/user_register", &admin, &json!({ "users": list }));
    }
    for t in &plan.traffic {
        let TrafficShape::Group(g) = &t.kind else {
            continue;
        };
        for group in &g.groups {
            let mut members = group.members.iter().map(|&ix| pop.user_id(ix));
            let owner = members.next().expect("a group has members");
            let info = json!({ "groupID": group.name, "groupName": group.name, "groupType": 2 });
            post(
                "/group/create_group",
                &admin,
                &json!({ "ownerUserID": owner, "memberUserIDs": members.collect::<Vec<_>>(),
                    "groupInfo": info }),
            );
        }
    }
    let mut out = scenario.trim_end().to_owned();
    assert!(
        out.ends_with("[target.script.vars.tokens]"),
        "the scenario ends with its tokens' table"
    );
    for u in &users {
        let data = post(
            "/auth/get_user_token",
            &admin,
            &json!({ "platformID": PLATFORM, "userID": u }),
        );
        let token = data["token"].as_str().expect("a token");
        out.push_str(&format!("\n{u} = \"{token}\""));
    }
    out.push('\n');
    out
}

/// What OpenIM holds of conversation `conv` for `user`: each message's content (the
/// text the adapter sent), by seq, pulled through the REST API.
pub fn stored(user: &str, conv: &str) -> Vec<(u64, String)> {
    let admin = admin();
    let newest = post("/msg/newest_seq", &admin, &json!({ "userID": user }));
    let max = newest["maxSeqs"][conv].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    let mut from = 1;
    while from <= max {
        let to = (from + 99).min(max);
        let range = json!({ "conversationID": conv, "begin": from, "end": to, "num": to - from + 1 });
        let data = post(
            "/msg/pull_msg_by_seq",
            &admin,
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
