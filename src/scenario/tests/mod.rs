//! Scenario tests: each class of mistake names its exact `file:line: key`, the examples in
//! `scenarios/` all parse, and lowering follows its documented rules.

mod errors;
mod lowering;

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
