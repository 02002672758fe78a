//! `[target.ws-json]` mistakes are found by `msgstorm validate`, before anything connects,
//! as one `FILE:LINE: KEY: message` line and exit code 2.

use crate::common::run::{msgstorm, Work};

/// The shipped reference-server scenario with `from` replaced by `to`.
fn edited(from: &str, to: &str) -> String {
    let text = include_str!("../../scenarios/ws-json-native.toml");
    assert!(text.contains(from), "the scenario has no `{from}`");
    text.replacen(from, to, 1)
}

/// The 1-based line of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    let at = text.find(needle).expect("needle in text");
    1 + text[..at].matches('\n').count()
}

/// Validates `text` and checks it fails at `line` of the file naming `key`, with `msg`.
async fn refused(text: &str, line: usize, key: &str, msg: &str) {
    let work = Work::new();
    let file = work.write("s.toml", text).display().to_string();
    let ran = msgstorm(&["validate", &file]).await;
    ran.expect_code(2);
    let want = format!("{file}:{line}: {key}: ");
    assert!(ran.stderr.contains(&want), "want `{want}`\n{ran}");
    assert!(ran.stderr.contains(msg), "want `{msg}`\n{ran}");
    assert_eq!(ran.stderr.trim().lines().count(), 1, "one line\n{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_scenario_is_valid() {
    let work = Work::new();
    let file = work.write(
        "s.toml",
        include_str!("../../scenarios/ws-json-native.toml"),
    );
    msgstorm(&["validate", &file.display().to_string()])
        .await
        .expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_placeholder_is_named_at_its_line() {
    let text = edited("\"body\":\"{body}\"}'", "\"body\":\"{bdy}\"}'");
    refused(
        &text,
        line_of(&text, "direct = "),
        "target.ws-json.direct",
        "unknown placeholder `{bdy}`; this template takes {user}, {req_id}, {to}, {body}",
    )
    .await;
    // A placeholder of another template.
    let text = edited("\"ts\":{now_ms}", "\"ts\":{after}");
    refused(
        &text,
        line_of(&text, "heartbeat = "),
        "target.ws-json.heartbeat",
        "placeholder `{after}` has no value in this template",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_that_is_not_json_is_refused() {
    let text = edited("\"user\":\"{user}\"", "\"user\":{user}");
    refused(
        &text,
        line_of(&text, "login = "),
        "target.ws-json.login",
        "is not JSON once filled in",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_that_cannot_match_are_refused() {
    let text = edited("body = \"body\"", "body = \"msg..body\"");
    refused(
        &text,
        line_of(&text, "body = \"msg..body\""),
        "target.ws-json.push.body",
        "has an empty step",
    )
    .await;
    // A rule without any condition would match every frame.
    let text = edited("when = { type = \"msg\" }\n", "");
    refused(
        &text,
        line_of(&text, "[target.ws-json.push]"),
        "target.ws-json.push",
        "has no condition, so it would match every frame",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_the_traffic_needs_are_required() {
    let text = edited(
        "group = '{\"type\":\"send\"",
        "groupx = '{\"type\":\"send\"",
    );
    refused(
        &text,
        line_of(&text, "groupx = "),
        "target.ws-json.groupx",
        "unknown key `groupx`",
    )
    .await;
    let start = include_str!("../../scenarios/ws-json-native.toml");
    let line = start
        .lines()
        .find(|l| l.starts_with("group = "))
        .expect("group line");
    let text = edited(&format!("{line}\n"), "");
    refused(
        &text,
        line_of(&text, "[target.ws-json]"),
        "target.ws-json.group",
        "is required: the scenario has `group` traffic",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_users_need_the_sync_tables() {
    let text = include_str!("../../scenarios/ws-json-native.toml");
    let from = text.find("# Late users").expect("sync");
    let to = text.find("[population]").expect("population");
    let text = format!("{}{}", &text[..from], &text[to..]);
    refused(
        &text,
        line_of(&text, "late = "),
        "population.late",
        "cannot fetch the messages a user missed while offline as configured",
    )
    .await;
    // Sync without conversation and sequence number in pushes cannot merge the two.
    let text = edited("seq = \"seq\"                       #", "#");
    refused(
        &text,
        line_of(&text, "[target.ws-json.push]"),
        "target.ws-json.push.seq",
        "`conv` and `seq` go together",
    )
    .await;
}

/// The OpenIM-style example of `docs/drivers/ws-json.md` is a valid description.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openim_example_in_the_docs_is_valid() {
    let doc = include_str!("../../docs/drivers/ws-json.md");
    let start = doc
        .find("```toml\n[target]\ndriver = \"ws-json\"\nurl = \"ws://im-gateway")
        .expect("the OpenIM example");
    let block = &doc[start + "```toml\n".len()..];
    let block = &block[..block.find("```").expect("end of the example")];
    let text = format!(
        "{block}\n[population]\nusers = 10\n\n[[traffic]]\nkind = \"direct\"\nsenders = 2\n\
         receivers = 2\nrate = 10\nduration = \"1s\"\n\n[[traffic]]\nkind = \"group\"\n\
         groups = 1\ngroup_size = 3\nsenders_per_group = 1\nrate = 1\nduration = \"1s\"\n"
    );
    let work = Work::new();
    let file = work.write("openim.toml", &text);
    msgstorm(&["validate", &file.display().to_string()])
        .await
        .expect_code(0);
}
