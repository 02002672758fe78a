//! Scenario tests: each class of mistake names its exact `file:line: key`, the examples in
//! `scenarios/` all parse, and lowering follows its documented rules.

mod combinations;
mod errors;
mod flow;
mod limits;
mod lowering;
mod warnings;

use std::path::Path;

use super::*;

/// Parses `text` as `t.toml` with `overrides`.
fn plan(text: &str, overrides: &[&str]) -> Result<Plan> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    parse(text, Path::new("t.toml"), &overrides, Shard::WHOLE)
}

/// A small valid scenario; tests append to it or replace parts of it.
const BASE: &str = r#"seed = 7

[population]
users = 100
login_rate = 100

[[traffic]]
name = "chat"
kind = "direct"
senders = 10
receivers = 10
rate = 100
duration = "5s"
"#;

/// Asserts that `text` (with `overrides`) fails at `line` and `key` with a message
/// containing `msg`, and that it renders as `t.toml:LINE: KEY: …`.
#[track_caller]
fn fails(text: &str, overrides: &[&str], line: usize, key: &str, msg: &str) {
    let e = plan(text, overrides).expect_err("scenario should be rejected");
    let shown = e.to_string();
    assert_eq!(e.exit_code(), 2, "{shown}");
    let Error::Scenario {
        file,
        line: l,
        key: k,
        msg: m,
    } = e
    else {
        panic!("not a scenario error: {shown}");
    };
    let want_file = if line == 0 { "--set" } else { "t.toml" };
    assert_eq!(
        (file.to_str().unwrap(), l, k.as_str()),
        (want_file, line, key),
        "{shown}"
    );
    assert!(m.contains(msg), "message {m:?} lacks {msg:?}");
    assert!(
        shown.starts_with(&format!("{want_file}:{line}: {key}: ")),
        "{shown}"
    );
}

/// BASE with a `[target]` table (lines 2…) after its first line.
fn with_target(lines: &str) -> String {
    BASE.replacen("seed = 7\n", &format!("seed = 7\n[target]\n{lines}\n"), 1)
}

/// BASE with `from` replaced by `to` (which must occur).
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}
