//! Missing keys, impossible combinations and overrides, each asserting the exact
//! `file:line: key`.

use super::*;

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
        "population.users",
        "duplicate key `users`",
    );
}

#[test]
fn duplicate_keys_name_their_full_path() {
    let second =
        format!("{BASE}\n[[traffic]]\nkind = \"idle\"\nduration = \"1s\"\nduration = \"2s\"\n");
    fails(
        &second,
        &[],
        18,
        "traffic[1].duration",
        "duplicate key `duration`",
    );
    let rate = edit("\nrate = 100", "\nrate = 100\nrate = 5");
    fails(&rate, &[], 13, "traffic[0].rate", "duplicate key `rate`");
    let mqtt =
        with_target("driver = \"mqtt\"\nurl = \"mqtt://h\"\n[target.mqtt]\nqos = 1\nqos = 2");
    fails(&mqtt, &[], 7, "target.mqtt.qos", "duplicate key `qos`");
    let inline = edit(
        "login_rate = 100",
        "login_rate = 100\nlate = { count = 1, count = 2, at = \"9s\" }",
    );
    fails(
        &inline,
        &[],
        6,
        "population.late.count",
        "duplicate key `count`",
    );
    let in_array = edit(
        "login_rate = 100",
        "arrival = [{ duration = \"1s\", rate = 1 }, { duration = \"1s\", rate = 2, rate = 3 }]",
    );
    fails(
        &in_array,
        &[],
        5,
        "population.arrival[1].rate",
        "duplicate key `rate`",
    );
    let table = format!("{BASE}\n[ledger]\nsample = 1.0\n[ledger]\n");
    fails(&table, &[], 17, "ledger", "duplicate key `ledger`");
    let dotted = edit("users = 100", "users = 100\nlate.count = 1\nlate.count = 2");
    fails(
        &dotted,
        &[],
        6,
        "population.late.count",
        "duplicate key `count`",
    );
    // Two duplicates: the first is reported, with its path.
    let two = edit("\nrate = 100", "\nrate = 100\nrate = 5\nsize = 1\nsize = 2");
    fails(&two, &[], 13, "traffic[0].rate", "duplicate key `rate`");
}

#[test]
fn a_file_that_is_not_utf8_names_its_line() {
    let dir = std::env::temp_dir().join(format!("msgstorm-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.toml");
    let mut bytes = BASE.as_bytes().to_vec();
    let at = BASE.find("chat").unwrap();
    bytes[at + 1] = 0xFF;
    std::fs::write(&file, &bytes).unwrap();
    let e = load(&file, &[], Shard::WHOLE).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(e.exit_code(), 2);
    let shown = e.to_string();
    assert!(
        shown.ends_with("t.toml:8: encoding: byte 0xFF at column 10 is not UTF-8; a scenario file is UTF-8 text"),
        "{shown}"
    );
}

#[test]
fn override_errors_name_the_override() {
    fails(
        BASE,
        &["traffic[0].rate=-5"],
        0,
        "traffic[0].rate",
        "must be a rate in 0.001..=1000000000 per second, got -5 (from `--set traffic[0].rate=-5`)",
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
