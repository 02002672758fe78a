//! An adapter cannot take the run down: a script stuck in a loop, a script that eats
//! memory, or one that fails on every frame is stopped call by call as a `script` error
//! naming its line, the other users go on, and the run ends in time and fails naming
//! `checks.max_script_errors` first.

use std::time::Duration;

use msgstorm::artifact::Artifact;

use super::native::{examples_of, scenario_with};
use crate::cli::signals::{accepted, interrupt, sigterm, stopped_in_time};
use crate::common::run::{msgstorm, run_text, target, Ran, Work};
use crate::common::{config, start};

/// The shipped adapter with `line` first in its `receive`, run against the reference
/// server with `[target.script]` `limits` (TOML lines) added.
async fn run_with_receive(line: &str, limits: &str) -> (Ran, Artifact) {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), |s| {
        s.replace(
            "function receive(u, text)\n",
            &format!("function receive(u, text)\n  {line}\n"),
        )
    })
    .replace("[target.script]\n", &format!("[target.script]\n{limits}\n"))
    .replace("[target]\n", "[target]\nconnect_timeout = \"2s\"\n");
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    (ran, artifact)
}

/// The case of the issue: one user's `receive` never returns. Each of its calls is
/// stopped at the bound (here 50 ms) as a script error at the line of the loop, the
/// other users get every message, and the run fails naming the script first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_in_one_users_receive_is_stopped_and_the_run_goes_on() {
    let (ran, a) = run_with_receive(
        "if u.ix == 7 then while true do end end",
        "call_limit = \"50ms\"",
    )
    .await;
    ran.expect_code(1);
    assert!(ran.took < Duration::from_secs(30), "{ran}");
    let examples = examples_of(&a, &["script"], &ran);
    assert!(
        examples
            .iter()
            .any(|e| e.contains("adapter.lua:") && e.contains("took longer than 50ms")),
        "{examples:?}"
    );
    assert!(
        ran.verdict()
            .starts_with("FAIL: checks.max_script_errors: ")
            && ran.verdict().contains("took longer than"),
        "{}",
        ran.verdict()
    );
    // 12 receivers of 50 messages; user 7 never logged in (its welcome was never judged).
    let d = a.ledger.summary();
    assert!(
        d.delivered >= 11 * 50,
        "the other users went on: {d:?}\n{ran}"
    );
}

/// A script that piles up memory in `receive` hits its interpreter's limit: a `script`
/// error naming the limit, never an out-of-memory kill of msgstorm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_eats_memory_hits_its_limit_not_the_machines() {
    let (ran, a) = run_with_receive(
        "if u.state.logged_in then local t = {} while true do t[#t + 1] = ('x'):rep(1e6) .. #t end end",
        "memory_limit = \"64MiB\"",
    )
    .await;
    ran.expect_code(1);
    let examples = examples_of(&a, &["script"], &ran);
    assert!(
        examples.iter().any(|e| e.contains("adapter.lua")
            && e.contains("out of memory")
            && e.contains("64 MiB")),
        "{examples:?}"
    );
    assert!(
        ran.verdict()
            .starts_with("FAIL: checks.max_script_errors: "),
        "{ran}"
    );
}

/// `error()` with a table on every frame after the login: each frame is a `script` error
/// at the line of the `error` call that says the object is not a message; nothing is
/// delivered and the run ends in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_object_on_every_frame_is_a_script_error_at_its_line() {
    let (ran, a) = run_with_receive("if u.state.logged_in then error({ code = 7 }) end", "").await;
    ran.expect_code(1);
    assert!(ran.took < Duration::from_secs(30), "{ran}");
    let examples = examples_of(&a, &["script"], &ran);
    assert!(
        examples.iter().all(|e| e.contains("adapter.lua:")
            && e.contains("error(table: ")
            && e.contains("not a message")),
        "{examples:?}"
    );
    let (_, count, _) = a
        .metrics
        .errors()
        .find(|(k, _, _)| k.name() == "script")
        .expect("script errors");
    assert!(count >= 50, "one error per frame at least: {count}\n{ran}");
    assert!(
        ran.verdict()
            .starts_with("FAIL: checks.max_script_errors: "),
        "{ran}"
    );
}

/// Signals stop a run whose adapter spins on every message a quarter of the users receive
/// (each call stopped at the default 100 ms, again and again, the interpreters busy most of
/// the time): the first SIGTERM within the drain plus 2 s, a second at once, both with an
/// interrupted result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_stop_a_run_whose_adapter_spins_on_every_message() {
    for twice in [false, true] {
        let work = Work::new();
        let server = start(config()).await;
        let text = scenario_with(&work, &target(&server), |s| {
            s.replace(
                "  if t == \"msg\" then\n",
                "  if t == \"msg\" then\n    if u.ix % 4 == 1 then while true do end end\n",
            )
        });
        // `interrupt` writes the scenario in a folder of its own: the script by its full path.
        let script = work.path("adapter.lua").display().to_string();
        let text = text.replace("file = \"adapter.lua\"", &format!("file = {script:?}"));
        let (head, _) = text.split_once("[population]").expect("a population table");
        let text = format!(
            "{head}[population]\nusers = 12\nlogin_rate = 200\n\n[[traffic]]\nkind = \"direct\"\n\
             senders = 4\nreceivers = 8\nrate = 40\nduration = \"60s\"\n"
        );
        let ran = interrupt(&text, &[], accepted(server.addr(), 40.0), twice, sigterm).await;
        stopped_in_time(&ran, twice, Duration::from_secs(1));
        server.shutdown().await.expect("server stops");
    }
}

/// A bound that is not one is refused by `validate` at its key (exit 2).
#[tokio::test]
async fn validate_refuses_bounds_that_are_not_bounds() {
    let work = Work::new();
    work.write("a.lua", "function login(u) end\nfunction receive() end\n");
    for (line, says) in [
        ("call_limit = \"0s\"", "call_limit: must be more than 0"),
        ("call_limit = \"soon\"", "call_limit: not a duration"),
        (
            "memory_limit = \"lots\"",
            "memory_limit: `lots` is not a memory size",
        ),
        (
            "memory_limit = \"64KiB\"",
            "memory_limit: `64KiB` is too small",
        ),
    ] {
        let file = work.write(
            "s.toml",
            &format!(
                "name = \"s\"\n[target]\ndriver = \"script\"\nurl = \"ws://127.0.0.1:9/ws\"\n\
                 [target.script]\nfile = \"a.lua\"\n{line}\n[population]\nusers = 2\n\
                 [[traffic]]\nname = \"t\"\nkind = \"direct\"\nsenders = 1\nreceivers = 1\n\
                 messages = 1\nrate = 1\n"
            ),
        );
        let ran = msgstorm(&["validate", &file.display().to_string()]).await;
        ran.expect_code(2);
        assert!(
            ran.stderr.contains("s.toml:") && ran.stderr.contains(says),
            "{line}: {ran}"
        );
    }
}
