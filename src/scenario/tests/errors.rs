//! Mistakes in keys, types and values, each asserting the exact `file:line: key`.

use super::*;

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
        "unknown driver `nativ`; did you mean `native`? allowed: echo, loopback, mqtt, native",
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
        "must be at most 100000000, got 5000000000",
    );
}

#[test]
fn negative_or_zero_numbers() {
    fails(
        &edit("\nrate = 100", "\nrate = -5"),
        &[],
        12,
        "traffic[0].rate",
        "must be a rate in 0.001..=1000000000 per second, got -5",
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
        "must be a rate in 0.001..=1000000000 per second, got 0",
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
        "scheme `http://` does not fit driver `native`; it needs ws:// or wss://",
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
fn monitor_pids_and_names_are_checked() {
    let ok = plan(
        &format!("{BASE}\n[monitor]\npids = [1]\nnames = [\"mosquitto\"]\n"),
        &[],
    )
    .unwrap();
    assert_eq!(ok.monitor.pids, vec![1]);
    assert_eq!(ok.monitor.names, vec!["mosquitto".to_owned()]);
    fails(
        &format!("{BASE}\n[monitor]\npids = [1, -4]\n"),
        &[],
        16,
        "monitor.pids[1]",
        "must be a process id > 0, got -4",
    );
    fails(
        &format!("{BASE}\n[monitor]\nnames = [\"/usr/bin/x\"]\n"),
        &[],
        16,
        "monitor.names[0]",
        "process name",
    );
    fails(
        &format!("{BASE}\n[monitor]\nprocess = 3\n"),
        &[],
        16,
        "monitor.process",
        "unknown key",
    );
}

#[test]
fn source_addresses_must_be_ip_addresses() {
    let ok = plan(
        &format!("{BASE}\n[target]\nsource_addresses = [\"127.0.0.2\", \"::1\"]\n"),
        &[],
    )
    .unwrap();
    assert_eq!(ok.target.source_addrs.len(), 2);
    fails(
        &format!("{BASE}\n[target]\nsource_addresses = [\"127.0.0.2\", \"localhost\"]\n"),
        &[],
        16,
        "target.source_addresses[1]",
        "`localhost` is not an IP address",
    );
}

#[test]
fn driver_options_are_located_through_the_scenario() {
    let mqtt = "url = \"mqtt://127.0.0.1:1883\"\ndriver = \"mqtt\"";
    // A table of its own, an inline table, and a `--set`: each names where the key was set.
    let text = with_target(&format!("{mqtt}\n[target.mqtt]\nversion = 4\nqos = 3"));
    fails(&text, &[], 7, "target.mqtt.qos", "must be 0, 1 or 2, got 3");
    let text = with_target(&format!("{mqtt}\nmqtt = {{ qos = 3 }}"));
    fails(&text, &[], 5, "target.mqtt.qos", "must be 0, 1 or 2, got 3");
    let text = with_target(mqtt);
    let e = plan(&text, &["target.mqtt.qos=7"]).expect_err("qos 7");
    assert_eq!(
        e.to_string(),
        "--set:0: target.mqtt.qos: must be 0, 1 or 2, got 7 (from `--set target.mqtt.qos=7`)"
    );
    let text = with_target(&format!("{mqtt}\n[target.mqtt]\nqoss = 1"));
    fails(&text, &[], 6, "target.mqtt.qoss", "unknown key `qoss`");
    let text = with_target("[target.native]\nfoo = 1");
    fails(
        &text,
        &[],
        4,
        "target.native.foo",
        "unknown key `foo`; allowed: ca_file, server_name",
    );
    let text = with_target("[target.mqtt]\nqos = 1\n[target.native]\nfoo = 1");
    fails(&text, &[], 3, "target.mqtt", "but the driver is `native`");
}

#[test]
fn late_users_need_a_driver_that_fetches_missed_messages() {
    let late = "login_rate = 100\nlate = { count = 5, at = \"3s\" }";
    let text = with_target(
        "url = \"mqtt://127.0.0.1:1883\"\ndriver = \"mqtt\"\n[target.mqtt]\nclean_session = true",
    )
    .replacen("login_rate = 100", late, 1);
    fails(
        &text,
        &[],
        11,
        "population.late",
        "driver `mqtt` cannot fetch the messages a user missed while offline as configured",
    );
    let text = with_target("url = \"mqtt://127.0.0.1:1883\"\ndriver = \"mqtt\"").replacen(
        "login_rate = 100",
        late,
        1,
    );
    plan(&text, &[]).expect("persistent sessions fetch what was missed");
}

#[test]
fn credentials_in_the_url() {
    let text = with_target("url = \"mqtt://alice:s3cret@[::1]:1883\"\ndriver = \"mqtt\"");
    let p = plan(&text, &[]).expect("mqtt takes a password");
    assert_eq!(
        p.target.auth,
        Auth::Password {
            username: "alice".into(),
            password: "s3cret".into()
        }
    );
    let ep = p.target.endpoint.expect("url");
    assert_eq!(
        (ep.addr(), ep.url.as_str()),
        ("[::1]:1883".into(), "mqtt://alice:***@[::1]:1883")
    );
    fails(
        &with_target("url = \"ws://alice:pw@h/ws\""),
        &[],
        3,
        "target.url",
        "driver `native` takes no user name or password in the URL",
    );
    fails(
        &with_target("url = \"mqtt://a:b@h\"\ndriver = \"mqtt\"\n[target.auth]\nusername = \"u\"\npassword = \"p\""),
        &[],
        3,
        "target.url",
        "both in the URL and in `[target.auth]`",
    );
}

#[test]
fn source_addresses_only_for_drivers_that_bind_them() {
    let text = with_target(
        "url = \"mqtt://127.0.0.1:1883\"\ndriver = \"mqtt\"\nsource_addresses = [\"127.0.0.2\"]",
    );
    fails(
        &text,
        &[],
        5,
        "target.source_addresses",
        "driver `mqtt` does not bind source addresses; these drivers do: echo, native",
    );
}

#[test]
fn requests_are_the_drivers_own() {
    let text = format!(
        "{BASE}\n[[traffic]]\nname = \"rpc\"\nkind = \"request\"\nrequest = \"kvget\"\nconcurrency = 5\nduration = \"1s\"\n"
    );
    fails(
        &text,
        &[],
        18,
        "traffic[1].request",
        "driver `native` has no request `kvget` (did you mean `kv_get`?); it sends: time, kv_get",
    );
}

#[test]
fn find_table_is_checked_at_its_lines() {
    let find = |body: &str| format!("{BASE}\n[find]\nvary = \"population.users\"\n{body}");
    let ok = plan(
        &find(
            "from = 100\nto = 4000\nprecision = \"10%\"\nstep_duration = \"20s\"\nmax_steps = 8\n",
        ),
        &[],
    )
    .unwrap();
    let f = ok.find.expect("a [find] table");
    assert_eq!(f.vary, "population.users");
    assert_eq!(f.from.map(|v| (v.value, v.whole)), Some((100.0, true)));
    assert_eq!(f.precision, Some(crate::find::Precision::Relative(0.1)));
    assert_eq!(f.step_duration, Some(std::time::Duration::from_secs(20)));
    fails(
        &find("from = -3\n"),
        &[],
        17,
        "find.from",
        "must be > 0, got -3",
    );
    fails(
        &find("from = 100\nto = 50\n"),
        &[],
        18,
        "find.to",
        "must be above find.from (100)",
    );
    fails(
        &find("precision = \"x\"\n"),
        &[],
        17,
        "find.precision",
        "write a positive number",
    );
    fails(
        &find("max_steps = 0\n"),
        &[],
        17,
        "find.max_steps",
        "must be in 1..=64, got 0",
    );
    fails(
        &find("step_duration = \"0s\"\n"),
        &[],
        17,
        "find.step_duration",
        "longer than 0s",
    );
    fails(&find("stpes = 3\n"), &[], 17, "find.stpes", "unknown key");
    fails(
        &format!("{BASE}\n[find]\nvary = \"traffic[0].rate\"\nstorm = true\n"),
        &[],
        17,
        "find.storm",
        "a connection storm varies `population.users`",
    );
}

#[test]
fn signals_of_a_pattern_name_a_pattern_that_sends_and_a_driver_that_can() {
    // BASE is 13 lines; [target] adds 3.
    let mqtt = with_target("driver = \"mqtt\"\nurl = \"mqtt://127.0.0.1\"");
    fails(
        &format!("{mqtt}\n[signals]\n[signals.pattern.chat]\nreceipts = 0.5\n"),
        &[],
        20,
        "signals.pattern.chat.receipts",
        "driver `mqtt` sends no read receipts",
    );
    fails(
        &format!("{BASE}\n[signals]\ntyping = 0.2\n[signals.pattern.chats]\ntyping = 0.5\n"),
        &[],
        17,
        "signals.pattern.chats",
        "no [[traffic]] pattern of that name sends messages (`chat`)",
    );
    fails(
        &format!("{BASE}\n[signals]\n[signals.pattern.chat]\nreceipts = 1.5\n"),
        &[],
        17,
        "signals.pattern.chat.receipts",
        "",
    );
    let ok = plan(
        &format!("{BASE}\n[signals]\n[signals.pattern.chat]\nreceipts = 0.5\n"),
        &[],
    )
    .expect("valid");
    let s = ok.signals.expect("signals asked");
    assert!(s.asks().receipts && !s.asks().typing, "{s:?}");
    assert_eq!(s.patterns[0].or_run(&s), (0.5, 0.0));
}
