//! What a run against OpenIM needs of its REST API before it starts: the scenario's users
//! registered, its groups created with their exact members (from the plan msgstorm lowers
//! the scenario to) and each user's token. Shared by the tests and
//! `examples/openim_setup.rs`; standard library, serde_json and msgstorm only.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use msgstorm::scenario::{self, Shard, TrafficShape};
use serde_json::{json, Value};

/// OpenIM's REST API (the stack's fixed port).
pub const API: &str = "127.0.0.1:10002";

/// The stack's admin secret and admin user (OpenIM's shipped `share.yml`).
const SECRET: &str = "openIM123";
const ADMIN: &str = "imAdmin";

/// The platform the adapter logs in as (its `vars.platform` default: Web).
const PLATFORM: u32 = 5;

/// Users registered per REST call.
const BATCH: usize = 200;

/// POSTs `body` to OpenIM's `path` as `token` and returns the answer's `data`, or what
/// went wrong in one line.
pub fn post(path: &str, token: &str, body: &Value) -> Result<Value, String> {
    let body = body.to_string();
    let fail = |e: std::io::Error| format!("{path}: OpenIM's API at {API}: {e}");
    let mut s = TcpStream::connect(API).map_err(fail)?;
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: {API}\r\nContent-Type: application/json\r\n\
         operationID: msgstorm\r\ntoken: {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(fail)?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).map_err(fail)?;
    let answer = resp.split_once("\r\n\r\n").map_or("", |(_, a)| a);
    let v: Value = serde_json::from_str(answer)
        .map_err(|e| format!("{path}: not JSON ({e}): {}", first_line(&resp)))?;
    if v["errCode"] != 0 {
        return Err(format!("{path}: {} {}", v["errCode"], v["errMsg"]));
    }
    Ok(v["data"].clone())
}

/// The first line of `text`.
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The admin's token.
pub fn admin() -> Result<String, String> {
    let data = post(
        "/auth/get_admin_token",
        "",
        &json!({ "secret": SECRET, "userID": ADMIN }),
    )?;
    token(&data)
}

/// The `token` of an answer's data.
fn token(data: &Value) -> Result<String, String> {
    data["token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("an answer without a token: {data}"))
}

/// Registers the users and groups of `scenario` (the text of the file `file`) and returns
/// each user's id and token.
pub fn register(scenario: &str, file: &Path) -> Result<Vec<(String, String)>, String> {
    let plan = scenario::parse(scenario, file, &[], Shard::WHOLE).map_err(|e| e.to_string())?;
    let pop = &plan.population;
    let users: Vec<String> = (0..pop.users).map(|ix| pop.user_id(ix)).collect();
    let admin = admin()?;
    for chunk in users.chunks(BATCH) {
        let list: Vec<Value> = chunk
            .iter()
            .map(|u| json!({ "userID": u, "nickname": u }))
            .collect();
        post("/user/user_register", &admin, &json!({ "users": list }))?;
    }
    for t in &plan.traffic {
        let TrafficShape::Group(g) = &t.kind else {
            continue;
        };
        for group in &g.groups {
            let mut members = group.members.iter().map(|&ix| pop.user_id(ix));
            let owner = members.next().unwrap_or_default();
            let info = json!({ "groupID": group.name, "groupName": group.name, "groupType": 2 });
            let req = json!({ "ownerUserID": owner,
                "memberUserIDs": members.collect::<Vec<_>>(), "groupInfo": info });
            post("/group/create_group", &admin, &req)?;
        }
    }
    users
        .into_iter()
        .map(|u| {
            let req = json!({ "platformID": PLATFORM, "userID": u });
            let t = token(&post("/auth/get_user_token", &admin, &req)?)?;
            Ok((u, t))
        })
        .collect()
}
