//! The `script` driver against the reference server, its protocol written as
//! `scenarios/script-native.lua`: the same traffic through `native` and through the script
//! gives the same ledger — late users fetched by the script's paged sync, the server's
//! injected faults counted exactly — and a script that fails, or a server that refuses,
//! is named in the result and never passes.

use msgstorm::artifact::Artifact;

use crate::common::run::{msgstorm, run_text, target, Ran, Work};
use crate::common::{config, start};
use crate::ws_json::native::{counts, counts_faults_exactly_as_native, run, LATE, ONE_TO_MANY};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_and_native_give_the_same_ledger_with_late_users() {
    let (nran, _, n) = run("native", config(), LATE).await;
    let (sran, sart, s) = run("script", config(), LATE).await;
    nran.expect_code(0);
    sran.expect_code(0);
    assert_eq!(sart.driver, "script");
    assert!(sart.acceptance, "acks are matched");
    assert_eq!(counts(&n), counts(&s), "native {n:?}\nscript {s:?}\n{sran}");
    assert_eq!((s.lost, s.duplicated), (0, 0), "{s:?}");
    assert!(s.via_sync > 0, "late users fetched nothing: {s:?}");
    let errors: Vec<_> = sart.metrics.errors().collect();
    assert!(errors.is_empty(), "script errors: {errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_counts_injected_faults_exactly_as_native_does() {
    counts_faults_exactly_as_native("script").await;
}

/// The examples of the first error kind among `kinds` the run counted (at least once, or
/// the test fails showing the run).
pub(crate) fn examples_of(artifact: &Artifact, kinds: &[&str], ran: &Ran) -> Vec<String> {
    let (kind, count, examples) = artifact
        .metrics
        .errors()
        .find(|(k, _, _)| kinds.contains(&k.name()))
        .unwrap_or_else(|| panic!("no {kinds:?} errors\n{ran}"));
    assert!(kinds.contains(&kind.name()) && count > 0, "{ran}");
    examples.to_vec()
}

/// The shipped script with `edit` applied, written next to a scenario that runs it.
pub(crate) fn scenario_with(
    work: &Work,
    server_target: &str,
    edit: impl Fn(String) -> String,
) -> String {
    let script = include_str!("../../scenarios/script-native.lua").to_owned();
    let script = edit(script);
    let path = work.write("adapter.lua", &script);
    let target = server_target.replacen("[target]\n", "[target]\ndriver = \"script\"\n", 1);
    format!(
        "name = \"script\"\nseed = 5\ndrain = \"1s\"\n\n{target}\n[target.script]\nfile = \"{}\"\n\n{ONE_TO_MANY}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or_default()
    )
}

/// A script that fails at run time: each failure is error kind `script` with the
/// script's file and line, the messages it could not send are not server loss, and the
/// run fails naming it first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_error_is_counted_with_its_line_and_fails_the_run() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), |s| {
        s.replace(
            "function direct(u, to, body)\n",
            "function direct(u, to, body)\n  u.state.sent = (u.state.sent or 0) + 1\n  \
             if u.state.sent % 25 == 0 then local broken = nil; broken.field = 1 end\n",
        )
    });
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    ran.expect_code(1);
    let examples = examples_of(&artifact, &["script"], &ran);
    assert!(
        examples
            .iter()
            .all(|e| e.contains("adapter.lua:") && e.contains("broken")),
        "{examples:?}"
    );
    assert!(
        ran.verdict()
            .starts_with("FAIL: checks.max_script_errors: ")
            && ran.verdict().contains("adapter.lua:"),
        "a run with script errors cannot pass: {}",
        ran.verdict()
    );
}

/// The server refusing the login (a wrong secret): `refuse(reason)` in the script makes
/// it `auth_failed` with the server's reason, not a script error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_is_auth_failed_with_the_servers_reason() {
    let work = Work::new();
    let server = start(config()).await;
    let wrong = target(&server).replace(server.secret(), "not-the-secret");
    let text = scenario_with(&work, &wrong, |s| s);
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    assert_ne!(ran.code, 0, "{ran}");
    let examples = examples_of(&artifact, &["auth_failed"], &ran);
    assert!(
        examples
            .iter()
            .any(|e| e.contains("login refused: bad_token")),
        "{examples:?}"
    );
}

/// A script with a syntax error or without `receive` is refused by `validate`, naming the
/// script's line or the missing function, before anything connects (exit 2).
#[tokio::test]
async fn validate_names_the_scripts_syntax_error_and_missing_functions() {
    let work = Work::new();
    let scenario = |script: &str| {
        work.write("bad.lua", script);
        work.write(
            "s.toml",
            "name = \"s\"\n[target]\ndriver = \"script\"\nurl = \"ws://127.0.0.1:9/ws\"\n\
             [target.script]\nfile = \"bad.lua\"\n[population]\nusers = 2\n\
             [[traffic]]\nname = \"t\"\nkind = \"direct\"\nsenders = 1\nreceivers = 1\nmessages = 1\nrate = 1\n",
        )
    };
    let file = scenario("function login(u)\n  local x = = 1\nend\nfunction receive() end\n");
    let path = file.display().to_string();
    let ran = msgstorm(&["validate", &path]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains("target.script.file") && ran.stderr.contains("bad.lua:2:"),
        "{ran}"
    );
    let file = scenario("function login(u) end\n");
    let path = file.display().to_string();
    let ran = msgstorm(&["validate", &path]).await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("no function `receive`"), "{ran}");
}

/// What the directory tests add to the shipped script: user 0 publishes a value at login,
/// every user looks it up before its login is done (a lookup that times out fails the
/// login), and `key` is the key looked up.
fn directory_script(key: &str) -> impl Fn(String) -> String + '_ {
    move |s: String| {
        format!(
            "{s}\nlocal base_login = login\n\
             function login(u)\n  base_login(u)\n\
             \x20 if u.ix == 0 then u:publish(\"first\", \"hello from \" .. u.id) end\n\
             \x20 local leader = u:claim(\"leader\", u.id)\n\
             \x20 if leader ~= u:lookup(\"leader\") then error(\"two leaders\") end\n\
             \x20 local v = u:lookup(\"{key}\", 20)\n\
             \x20 if v:sub(1, 11) ~= \"hello from \" then error(\"looked up \" .. v) end\n\
             end\n"
        )
    }
}

/// The run-wide directory across the shards of one run (`--shards 2`): user 0 (in shard
/// 0) publishes, every user of both shards finds it — or its login fails and the run with
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_published_by_one_user_reach_users_of_every_shard() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), directory_script("first"));
    let file = work.write("sharded.toml", &text);
    let (file, out) = (
        file.display().to_string(),
        work.path("out").display().to_string(),
    );
    let ran = msgstorm(&["run", &file, "--shards", "2", "--out", &out, "-q"]).await;
    server.shutdown().await.expect("server stops");
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let artifact = msgstorm::artifact::Artifact::read(&work.path("out").join("result.json"))
        .unwrap_or_else(|e| panic!("no result: {e}\n{ran}"));
    assert_eq!(artifact.shards.len(), 2, "{ran}");
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// A lookup nobody answers fails the login after its timeout, naming the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_nobody_answers_fails_the_login_naming_the_key() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), |s| {
        directory_script("never")(s).replace("u:lookup(\"never\", 20)", "u:lookup(\"never\", 0.2)")
    });
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    assert_ne!(ran.code, 0, "{ran}");
    let examples = examples_of(&artifact, &["timeout", "connect_timeout"], &ran);
    assert!(
        examples
            .iter()
            .any(|e| e.contains("u:lookup(\"never\"): nobody published it")),
        "{examples:?}"
    );
}

/// `validate --frames` shows what the script would send — the login frame with the user's
/// token, a direct and a group message (after the group's join) with a real envelope and
/// the id each acceptance carries — and where each flow waits for the server; another
/// driver has no dry run.
#[tokio::test]
async fn validate_frames_shows_what_the_script_would_send() {
    let ran = msgstorm(&["validate", "scenarios/script-native.toml", "--frames"]).await;
    ran.expect_code(0);
    let token = msgstorm::wire::token("u0", msgstorm::scenario::DEFAULT_SECRET);
    let want = [
        "login of u0:".to_owned(),
        format!(
            "  sends text {{\"token\":\"{token}\",\"type\":\"login\",\"user\":\"u0\",\"v\":1}}"
        ),
        "  then waits (\"wait\" \"login\" nil): the rest needs the server".to_owned(),
        "direct message from u0 to u1:".to_owned(),
    ];
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[..4], want, "{ran}");
    assert!(
        lines[4].starts_with("  sends text {\"body\":\"ms1:")
            && lines[4].contains("\"to\":{\"user\":\"u1\"}"),
        "{ran}"
    );
    assert_eq!(lines[5], "  its acceptance is the reply with id 1", "{ran}");
    assert!(
        ran.stdout.contains("\"to\":{\"group\":\"group-1\"}"),
        "{ran}"
    );
    // The group message comes after the group's join, as in a run.
    let join = ran.stdout.find("  join(group-1) first:\n  sends text {\"group\":\"group-1\",\"ref\":2,\"type\":\"group_create\"}");
    let send = ran.stdout.find("\"to\":{\"group\":\"group-1\"}");
    assert!(join.is_some() && join < send, "{ran}");
    let ran = msgstorm(&["validate", "scenarios/ws-json-native.toml", "--frames"]).await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("has no dry run"), "{ran}");
}

/// `open(u, to)` runs once per peer and connection, before the first direct message to
/// it; `u:lookup(key, 0)` asks once (nil for a key nobody published); `u:sleep` pauses a
/// flow; `receive` may return a list of tables, each judged in order. With all of them in
/// the adapter, the run is still exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_runs_once_per_peer_before_its_first_message() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), |s| {
        format!(
            "{s}\nlocal base_login, base_direct, base_receive = login, direct, receive\n\
             function login(u)\n\
             \x20 base_login(u)\n\
             \x20 if u:lookup(\"nobody-published-this\", 0) ~= nil then error(\"peeked a value\") end\n\
             \x20 u:sleep(0.01)\n\
             \x20 u.state.opened = {{}}\n\
             end\n\
             function open(u, to)\n\
             \x20 if u.state.opened[to] then error(\"opened \" .. to .. \" twice\") end\n\
             \x20 u:sleep(0.01)\n\
             \x20 u.state.opened[to] = true\n\
             \x20 u:publish(\"opened:\" .. u.id .. \":\" .. to, \"yes\")\n\
             end\n\
             function direct(u, to, body)\n\
             \x20 if not u.state.opened[to] then error(\"no open before the message to \" .. to) end\n\
             \x20 return base_direct(u, to, body)\n\
             end\n\
             function receive(u, frame, kind)\n\
             \x20 local t = base_receive(u, frame, kind)\n\
             \x20 if t == nil then return nil end\n\
             \x20 return {{ t }}\n\
             end\n"
        )
    });
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    ran.expect_code(0);
    let d = artifact.ledger.summary();
    assert_eq!((d.lost, d.duplicated), (0, 0), "{ran}");
    assert!(d.delivered > 0 && d.delivered == d.expected, "{ran}");
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "{errors:?}\n{ran}");
}

/// A dry run of an adapter with `open`: the direct message shows `open` first and stops
/// where it needs the server (Tinode's p2p topic is the peer's server-assigned id).
#[tokio::test]
async fn validate_frames_shows_open_before_a_direct_message() {
    let ran = msgstorm(&["validate", "scenarios/tinode.toml", "--frames"]).await;
    ran.expect_code(0);
    let want = "direct message from u0 to u1:\n  open(u1) first:\n  \
                then waits (\"lookup\" \"usr:u1\" nil): the rest needs the server\n  \
                the message itself needs what open waits for\n";
    assert!(ran.stdout.contains(want), "{ran}");
    assert!(
        ran.stdout.contains("sends text {\"hi\":{\"id\":\"1\""),
        "the login's first frame\n{ran}"
    );
}
