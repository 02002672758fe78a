//! One test per class of mistake, each asserting the exact `file:line: key`.

use super::*;

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

#[test]
fn base_is_valid() {
    plan(BASE, &[]).unwrap();
}

#[test]
fn unknown_key_in_array_of_tables() {
    let text =
        format!("{BASE}\n[[traffic]]\nname = \"g\"\nkind = \"idle\"\nduration = \"1s\"\nrat = 5\n");
    fails(
        &text,
        &[],
        19,
        "traffic[1].rat",
        "unknown key `rat`; allowed: name, kind, start, duration, pick, users",
    );
    let text = edit("senders = 10", "senders = 10\nrat = 3");
    fails(
        &text,
        &[],
        11,
        "traffic[0].rat",
        "did you mean `rate`? allowed: name, kind, start, duration, pick, senders, receivers, \
         messages, interval, rate, size",
    );
}

#[test]
fn unknown_key_in_table_and_at_top() {
    fails(
        &edit("users = 100", "users = 100\nuserz = 3"),
        &[],
        5,
        "population.userz",
        "did you mean `users`?",
    );
    fails(
        &format!("sed = 1\n{BASE}"),
        &[],
        1,
        "sed",
        "did you mean `seed`?",
    );
}

#[test]
fn unknown_key_in_inline_table() {
    let text = edit(
        "login_rate = 100",
        "login_rate = 100\nlate = { fractoin = 0.1, at = \"9s\" }",
    );
    fails(
        &text,
        &[],
        6,
        "population.late.fractoin",
        "did you mean `fraction`?",
    );
}

#[test]
fn unknown_enum_value() {
    fails(
        &edit("kind = \"direct\"", "kind = \"directt\""),
        &[],
        9,
        "traffic[0].kind",
        "unknown value `directt`; did you mean `direct`?",
    );
    let text = with_target("driver = \"nativ\"");
    fails(
        &text,
        &[],
        3,
        "target.driver",
        "allowed: native, mqtt, echo",
    );
}

#[test]
fn wrong_type() {
    fails(
        &edit("users = 100", "users = \"many\""),
        &[],
        4,
        "population.users",
        "wrong type: expected an integer, got string \"many\"",
    );
    fails(
        &edit("\nrate = 100", "\nrate = \"fast\""),
        &[],
        12,
        "traffic[0].rate",
        "expected a number",
    );
    fails(
        &format!("{BASE}[ledger]\nverify_sync = 1\n"),
        &[],
        15,
        "ledger.verify_sync",
        "expected a boolean",
    );
    fails(
        "traffic = 3\n[population]\nusers = 1\n",
        &[],
        1,
        "traffic",
        "expected an array",
    );
}

#[test]
fn wrong_type_for_duration() {
    fails(
        &edit("duration = \"5s\"", "duration = 5"),
        &[],
        13,
        "traffic[0].duration",
        "expected a duration string such as \"200ms\"",
    );
}

#[test]
fn malformed_duration() {
    fails(
        &edit("duration = \"5s\"", "duration = \"5x\""),
        &[],
        13,
        "traffic[0].duration",
        "not a duration: `5x` (use e.g. `200ms`, `20s`",
    );
    fails(
        &format!("drain = \"-1s\"\n{BASE}"),
        &[],
        1,
        "drain",
        "not a duration",
    );
}

#[test]
fn integer_out_of_range() {
    fails(
        &edit("users = 100", "users = 99999999999999999999"),
        &[],
        4,
        "population.users",
        "out of range",
    );
    fails(
        &edit("users = 100", "users = 5000000000"),
        &[],
        4,
        "population.users",
        "must be at most 4294967295",
    );
}

#[test]
fn negative_or_zero_numbers() {
    fails(
        &edit("\nrate = 100", "\nrate = -5"),
        &[],
        12,
        "traffic[0].rate",
        "must be > 0, got -5",
    );
    fails(
        &edit("senders = 10", "senders = 0"),
        &[],
        10,
        "traffic[0].senders",
        "must be > 0, got 0",
    );
    fails(
        &edit("login_rate = 100", "login_rate = 0"),
        &[],
        5,
        "population.login_rate",
        "must be > 0",
    );
    fails(
        &edit("duration = \"5s\"", "duration = \"5s\"\nsize = -1"),
        &[],
        14,
        "traffic[0].size",
        "must be > 0 bytes, got -1",
    );
    fails(
        &edit("duration = \"5s\"", "duration = \"0s\""),
        &[],
        13,
        "traffic[0].duration",
        "longer than 0s",
    );
    fails(
        &format!("{BASE}[checks]\nmax_lost = -1\n"),
        &[],
        15,
        "checks.max_lost",
        "must be ≥ 0, got -1",
    );
    fails(
        &format!("seed = -3\n{}", &BASE[9..]),
        &[],
        1,
        "seed",
        "must be ≥ 0, got -3",
    );
}

#[test]
fn fractions_out_of_range() {
    fails(
        &format!("{BASE}[ledger]\nsample = 1.5\n"),
        &[],
        15,
        "ledger.sample",
        "fraction in 0..=1, got 1.5",
    );
    fails(
        &format!("{BASE}[checks]\nmin_login_success = 2\n"),
        &[],
        15,
        "checks.min_login_success",
        "fraction",
    );
}

#[test]
fn malformed_url() {
    let t = |url: &str| with_target(&format!("url = \"{url}\""));
    fails(
        &t("ws//x"),
        &[],
        3,
        "target.url",
        "url `ws//x`: malformed: expected `scheme://host`",
    );
    fails(
        &t("ws://:7700/ws"),
        &[],
        3,
        "target.url",
        "malformed: the host is missing",
    );
    fails(&t("ws://h:70000/ws"), &[], 3, "target.url", "port `70000`");
    fails(
        &t("http://h/ws"),
        &[],
        3,
        "target.url",
        "scheme `http` is not supported; use ws://, wss://, mqtt:// or mqtts://",
    );
}

#[test]
fn driver_and_scheme_mismatch() {
    let text = with_target("url = \"mqtt://127.0.0.1:1883\"");
    fails(
        &text,
        &[],
        3,
        "target.url",
        "scheme `mqtt://` does not fit driver `native`; it needs ws:// or wss://",
    );
    let text = with_target("driver = \"mqtt\"");
    fails(
        &text,
        &[],
        3,
        "target.driver",
        "driver `mqtt` needs `target.url`",
    );
}

#[test]
fn options_table_of_another_driver() {
    let text = with_target("[target.mqtt]\nqos = 1");
    fails(
        &text,
        &[],
        3,
        "target.mqtt",
        "options for driver `mqtt`, but the driver is `native`",
    );
}

#[test]
fn auth_that_does_not_fit_the_driver() {
    let text = with_target("[target.auth]\nusername = \"{user}\"\npassword = \"pw\"");
    fails(&text, &[], 4, "target.auth.username", "logs in with tokens");
    let text =
        with_target("url = \"mqtt://h\"\ndriver = \"mqtt\"\n[target.auth]\nusername = \"u\"");
    fails(
        &text,
        &[],
        6,
        "target.auth.password",
        "`username` needs `password` too",
    );
}

#[test]
fn key_of_another_kind() {
    fails(
        &edit("duration = \"5s\"", "duration = \"5s\"\ngroups = 3"),
        &[],
        14,
        "traffic[0].groups",
        "`groups` does not apply to kind `direct`; its keys: name, kind, start, duration, pick",
    );
}

#[test]
fn kind_the_driver_cannot_run() {
    let text = with_target("url = \"ws://h/echo\"\ndriver = \"echo\"");
    fails(
        &text,
        &[],
        12,
        "traffic[0].kind",
        "kind `direct` is not supported by driver `echo`; it runs: echo",
    );
}

#[test]
fn missing_required_key() {
    fails(
        &edit("users = 100\n", ""),
        &[],
        3,
        "population.users",
        "missing required key `users`",
    );
    fails(
        "seed = 1\n",
        &[],
        1,
        "population",
        "missing required key `population`",
    );
    fails(
        &edit("senders = 10\n", ""),
        &[],
        7,
        "traffic[0].senders",
        "a `direct` pattern needs `senders`",
    );
}

#[test]
fn messages_and_duration_both_absent() {
    fails(
        &edit("duration = \"5s\"\n", ""),
        &[],
        7,
        "traffic[0].messages",
        "set `messages` (how many to send), `duration`",
    );
}

#[test]
fn interval_and_rate_both_or_neither() {
    fails(
        &edit("\nrate = 100", "\nrate = 100\ninterval = \"10ms\""),
        &[],
        12,
        "traffic[0].rate",
        "either `interval` (per sender) or `rate`",
    );
    fails(
        &edit("\nrate = 100\n", "\n"),
        &[],
        7,
        "traffic[0].rate",
        "set `rate` (total msgs/s, e.g. 500) or `interval`",
    );
}

#[test]
fn more_senders_than_online_users() {
    let text = edit(
        "login_rate = 100",
        "login_rate = 100\nlate = { fraction = 0.95, at = \"5s\" }",
    )
    .replace("receivers = 10", "receivers = 1");
    fails(
        &text,
        &[],
        11,
        "traffic[0].senders",
        "10 > 5 users online throughout (users 100 − late 95 − churning 0)",
    );
}

#[test]
fn senders_plus_receivers_exceed_users() {
    fails(
        &edit("receivers = 10", "receivers = 95"),
        &[],
        11,
        "traffic[0].receivers",
        "10 + 95 > 100 users",
    );
}

#[test]
fn group_larger_than_population() {
    let text = format!("{BASE}\n[[traffic]]\nkind = \"group\"\ngroups = 2\ngroup_size = 101\nrate = 10\nduration = \"1s\"\n");
    fails(
        &text,
        &[],
        18,
        "traffic[1].group_size",
        "groups of 101 need that many users; there are 100",
    );
    let text = format!("{BASE}\n[[traffic]]\nkind = \"group\"\ngroups = 2\ngroup_size = 3\nsenders_per_group = 4\nrate = 10\nduration = \"1s\"\n");
    fails(
        &text,
        &[],
        19,
        "traffic[1].senders_per_group",
        "4 senders in groups of 3",
    );
}

#[test]
fn request_concurrency_above_users() {
    let text = format!("{BASE}\n[[traffic]]\nkind = \"request\"\nrequest = \"kv_get\"\nsweep = [10, 500]\nstep_duration = \"1s\"\n");
    fails(&text, &[], 18, "traffic[1].sweep[1]", "500 > 100 users");
    let text = format!("{BASE}\n[[traffic]]\nkind = \"request\"\nrequest = \"time\"\nconcurrency = 200\nduration = \"1s\"\n");
    fails(&text, &[], 18, "traffic[1].concurrency", "200 > 100 users");
    let text = format!("{BASE}\n[[traffic]]\nkind = \"request\"\nrequest = \"time\"\nsweep = [1]\nduration = \"1s\"\n");
    fails(
        &text,
        &[],
        19,
        "traffic[1].duration",
        "with `sweep`, set `step_duration`",
    );
}

#[test]
fn late_plus_churn_above_one() {
    let text = edit(
        "login_rate = 100",
        "login_rate = 100\nlate = { fraction = 0.6, at = \"5s\" }\nchurn = { fraction = 0.5, offline_at = \"5s\", back_at = \"6s\" }",
    );
    fails(
        &text,
        &[],
        7,
        "population.churn",
        "60 late + 50 churning users > 100 users",
    );
}

#[test]
fn late_before_the_arrival_ends() {
    // 90 on-time users at 100/s are all in after 0.9 s.
    let text = edit(
        "login_rate = 100",
        "login_rate = 100\nlate = { fraction = 0.1, at = \"500ms\" }",
    );
    fails(
        &text,
        &[],
        6,
        "population.late.at",
        "500ms is before the on-time users are all logged in (900ms)",
    );
}

#[test]
fn churn_times_out_of_order() {
    let text = edit(
        "login_rate = 100",
        "login_rate = 100\nchurn = { count = 5, offline_at = \"5s\",\n  back_at = \"4s\" }",
    );
    fails(
        &text,
        &[],
        7,
        "population.churn.back_at",
        "must be after `offline_at` (5s), got 4s",
    );
}

#[test]
fn malformed_arrival_phase() {
    let text = edit("login_rate = 100", "arrival = [\n  { duration = \"5s\", rate = 10 },\n  { duration = \"5s\", rate = 10, to = 20 },\n]");
    fails(
        &text,
        &[],
        7,
        "population.arrival[1]",
        "a phase is `{ duration, rate }` (steady) or `{ duration, from, to }`",
    );
    let text = edit("login_rate = 100", "login_rate = 100\narrival = []");
    fails(&text, &[], 5, "population.login_rate", "not both");
}

#[test]
fn duplicate_traffic_names() {
    let text =
        format!("{BASE}\n[[traffic]]\nname = \"chat\"\nkind = \"idle\"\nduration = \"1s\"\n");
    fails(
        &text,
        &[],
        16,
        "traffic[1].name",
        "`chat` is already the name of traffic[0]",
    );
}

#[test]
fn syntax_error_and_duplicate_key() {
    fails(
        &format!("{BASE}[checks\n"),
        &[],
        14,
        "syntax",
        "TOML syntax",
    );
    fails(
        &edit("users = 100", "users = 100\nusers = 5"),
        &[],
        5,
        "users",
        "duplicate key `users`",
    );
}

#[test]
fn override_errors_name_the_override() {
    fails(
        BASE,
        &["traffic[0].rate=-5"],
        0,
        "traffic[0].rate",
        "must be > 0, got -5 (from `--set traffic[0].rate=-5`)",
    );
    fails(
        BASE,
        &["traffic[0].rat=5"],
        0,
        "traffic[0].rat",
        "did you mean `rate`?",
    );
    fails(
        BASE,
        &["traffic[3].rate=5"],
        0,
        "traffic[3].rate",
        "index 3 is out of range: `traffic` has 1 entries",
    );
    fails(
        BASE,
        &["population.users"],
        0,
        "population.users",
        "an override is KEY=VALUE",
    );
    fails(
        BASE,
        &["traffic[x].rate=1"],
        0,
        "traffic[x].rate",
        "is not a key path",
    );
    fails(BASE, &["seed.x=1"], 0, "seed.x", "`seed` is not a table");
    fails(
        BASE,
        &["population.users=many"],
        0,
        "population.users",
        "expected an integer, got string \"many\"",
    );
}

#[test]
fn stream_count_overflow() {
    let text = edit("users = 100", "users = 200000")
        .replace("senders = 10", "senders = 100000")
        .replace("receivers = 10", "receivers = 100000");
    fails(&text, &[], 7, "traffic[0]", "10000000000 streams");
}
