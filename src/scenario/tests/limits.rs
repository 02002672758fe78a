//! Every numeric key has a range the engine can honour, refused by validation as
//! `FILE:LINE: KEY: …` (exit 2) — never a panic in validation or at run time — and the plan
//! stays O(patterns + chosen users) however many users there are.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

/// A scenario with every duration and rate key set to a small valid value.
const FULL: &str = r#"seed = 7
drain = "5s"

[target]
connect_timeout = "10s"
heartbeat = "30s"

[population]
users = 100
arrival = [{ duration = "1s", rate = 50 }, { duration = "1s", from = 50, to = 100 }]
late = { count = 5, at = "10s" }
churn = { count = 5, offline_at = "12s", back_at = "14s" }

[[traffic]]
kind = "direct"
senders = 10
receivers = 10
interval = "10ms"
start = "1s"
duration = "5s"

[[traffic]]
kind = "request"
request = "time"
sweep = [1, 2]
step_duration = "1s"

[[traffic]]
kind = "group"
groups = 2
group_size = 5
messages = 3
rate = 10

[ledger]
late_after = "5s"
examples = 3

[checks]
e2e_p99 = "1s"
ack_p99 = "1s"
request_p99 = "1s"
"#;

/// Every duration key of [`FULL`], as `--set` paths.
const DURATION_KEYS: [&str; 15] = [
    "drain",
    "target.connect_timeout",
    "target.heartbeat",
    "population.arrival[0].duration",
    "population.late.at",
    "population.churn.offline_at",
    "population.churn.back_at",
    "traffic[0].interval",
    "traffic[0].start",
    "traffic[0].duration",
    "traffic[1].step_duration",
    "ledger.late_after",
    "checks.e2e_p99",
    "checks.ack_p99",
    "checks.request_p99",
];

/// Every rate key of [`FULL`] (or of BASE), as `--set` paths on `FULL`.
const RATE_KEYS: [&str; 4] = [
    "population.arrival[0].rate",
    "population.arrival[1].from",
    "population.arrival[1].to",
    "traffic[2].rate",
];

#[test]
fn full_is_valid() {
    plan(FULL, &[]).unwrap();
}

#[test]
fn tiny_rates_are_refused_not_panics() {
    for key in RATE_KEYS {
        for v in ["1e-300", "0.0009", "5e-324", "1e10", "inf", "nan"] {
            let set = format!("{key}={v}");
            fails(
                FULL,
                &[&set],
                0,
                key,
                "must be a rate in 0.001..=1000000000",
            );
        }
    }
    for v in ["1e-300", "0.0009", "1e300"] {
        let set = format!("population.login_rate={v}");
        fails(
            BASE,
            &[&set],
            0,
            "population.login_rate",
            "must be a rate in",
        );
        fails(
            BASE,
            &[&format!("traffic[0].rate={v}")],
            0,
            "traffic[0].rate",
            "must be a rate in",
        );
    }
    fails(
        &edit("login_rate = 100", "login_rate = 1e-300"),
        &[],
        5,
        "population.login_rate",
        "must be a rate in 0.001..=1000000000 per second, got 1e-300",
    );
}

#[test]
fn slow_but_valid_rates_that_never_end_are_refused() {
    // 0.001 logins/s for 100 users: 100,000 s, more than a day but less than 30.
    plan(BASE, &["population.login_rate=0.001"]).unwrap();
    let users = "population.users=100000000";
    fails(
        BASE,
        &[users, "population.login_rate=0.001"],
        0,
        "population.login_rate",
        "the arrival must end within 30 days",
    );
    // 10 senders at 0.001 msgs/s in all: one send per sender every 10,000 s — valid;
    // 10,000 senders: every 10⁷ s, more than 30 days.
    plan(BASE, &["traffic[0].rate=0.001"]).unwrap();
    fails(
        BASE,
        &[
            "population.users=100000",
            "traffic[0].senders=10000",
            "traffic[0].rate=0.001",
        ],
        0,
        "traffic[0].rate",
        "at most 30 days apart",
    );
}

#[test]
fn huge_durations_are_refused() {
    for key in DURATION_KEYS {
        for v in ["31days", "18446744073709551615s"] {
            let set = format!("{key}={v}");
            fails(FULL, &[&set], 0, key, "must be at most 30 days, got ");
        }
    }
    fails(
        &FULL.replace("drain = \"5s\"", "drain = \"9999999999999s\""),
        &[],
        2,
        "drain",
        "must be at most 30 days, got 9999999999999s",
    );
    // 30 days exactly is fine wherever the other keys allow it.
    plan(FULL, &["drain=30days", "ledger.late_after=30days"]).unwrap();
}

#[test]
fn intervals_and_heartbeats_have_a_floor() {
    fails(
        FULL,
        &["traffic[0].interval=1ns"],
        0,
        "traffic[0].interval",
        "must be at least 1µs, got 0.001µs",
    );
    plan(FULL, &["traffic[0].interval=1us"]).unwrap();
    fails(
        FULL,
        &["target.heartbeat=10us"],
        0,
        "target.heartbeat",
        "must be at least 1ms",
    );
    plan(FULL, &["target.heartbeat=0s"]).unwrap();
}

#[test]
fn a_wake_tick_is_whole_milliseconds_up_to_ten() {
    for v in ["1500us", "11ms", "1s", "0.5ms"] {
        fails(
            FULL,
            &[&format!("wake_tick={v}")],
            0,
            "wake_tick",
            "must be whole milliseconds from 0s (none) to 10ms, got ",
        );
    }
    for (v, ms) in [("0s", 0), ("1ms", 1), ("10ms", 10)] {
        let p = plan(FULL, &[&format!("wake_tick={v}")]).unwrap();
        assert_eq!(p.wake_tick, Duration::from_millis(ms));
    }
    assert_eq!(plan(FULL, &[]).unwrap().wake_tick, Duration::ZERO);
}

#[test]
fn count_bounded_sends_must_end_within_30_days() {
    // 10 messages × 10 receivers at one per 30 days each: 99 × 30 days.
    // 100 messages × 10 receivers, one send per sender every 10,000 s: 115 days.
    fails(
        &edit("duration = \"5s\"", "messages = 100"),
        &["traffic[0].rate=0.001"],
        13,
        "traffic[0].messages",
        "1000 sends (receivers × messages) per sender, one every 10000s, take 9990000s",
    );
    let group = [
        "traffic[2].messages=4000000000",
        "traffic[2].rate=100",
        "traffic[2].groups=2",
    ];
    fails(
        FULL,
        &group,
        0,
        "traffic[2].messages",
        "must end within 30 days",
    );
}

#[test]
fn sweeps_must_end_within_30_days() {
    let sweep = format!("traffic[1].sweep=[{}]", vec!["1"; 40].join(", "));
    fails(
        FULL,
        &[&sweep, "traffic[1].step_duration=1day"],
        0,
        "traffic[1].sweep",
        "40 steps of 86400s take 3456000s",
    );
}

#[test]
fn products_of_counts_are_bounded() {
    // groups × group_size members listed in the plan.
    fails(
        FULL,
        &[
            "population.users=100000000",
            "population.arrival[0].rate=1000000000",
            "traffic[2].groups=1000000",
            "traffic[2].group_size=1000",
        ],
        28,
        "traffic[2]",
        "the plan would list 1000000030 users",
    );
    // groups × senders × members pairs.
    fails(
        FULL,
        &[
            "population.users=100000",
            "population.arrival[0].rate=1000000000",
            "traffic[2].groups=10000",
            "traffic[2].group_size=1000",
            "traffic[2].senders_per_group=1000",
        ],
        28,
        "traffic[2]",
        "stream × recipient pairs; at most 1000000000",
    );
    // deliveries: 4e9 messages per sender over 10⁷ pairs.
    fails(
        FULL,
        &[
            "population.users=100000",
            "population.arrival[0].rate=1000000000",
            "traffic[2].groups=10000",
            "traffic[2].group_size=1000",
            "traffic[2].messages=4000000000",
            "traffic[2].duration=30days",
            "traffic[2].rate=1000000",
        ],
        28,
        "traffic[2]",
        "deliveries; at most 1000000000000000",
    );
    fails(
        FULL,
        &["ledger.examples=1000000"],
        0,
        "ledger.examples",
        "must be in 0..=1000",
    );
}

#[test]
fn the_most_users_make_a_plan_of_chosen_users_only() {
    // 10⁸ users, 10% late and 10% churning, a direct pattern, groups and everyone idle:
    // the plan lists the chosen users, never the population (which was 8 bytes per user).
    let text = r#"
[population]
users = 100000000
login_rate = 1000000
late = { fraction = 0.001, at = "10m" }
churn = { count = 1000, offline_at = "10m", back_at = "11m" }

[[traffic]]
kind = "direct"
senders = 100
receivers = 100
rate = 1000
duration = "10s"

[[traffic]]
kind = "group"
groups = 10
group_size = 1000
senders_per_group = 3
rate = 100
duration = "10s"

[[traffic]]
kind = "idle"
duration = "10s"

"#;
    let p = plan(text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let pop = &p.population;
    assert_eq!(pop.users, 100_000_000);
    assert_eq!((pop.late.len(), pop.churn.len()), (100_000, 1000));
    let TrafficShape::Direct(d) = &p.traffic[0].kind else {
        panic!()
    };
    assert_eq!((d.senders.len(), d.receivers.len()), (100, 100));
    let TrafficShape::Group(g) = &p.traffic[1].kind else {
        panic!()
    };
    assert_eq!(g.groups.len(), 10);
    assert!(g.groups.iter().all(|g| g.members.len() == 1000));
    assert_eq!(
        p.traffic[2].kind,
        TrafficShape::Idle {
            users: IdleUsers::All
        }
    );
    // Every user is still somebody: the largest ids are drawn too.
    let late_max = pop.late.last().copied().unwrap_or(0);
    assert!(late_max > 99_000_000, "{late_max}");
    // every_kth over 10⁸ users, without listing them.
    let p = plan(
        text,
        &["traffic[2].users=4", "traffic[2].pick=\"every_kth\""],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let TrafficShape::Idle {
        users: IdleUsers::Chosen(idle),
    } = &p.traffic[2].kind
    else {
        panic!()
    };
    assert_eq!(idle, &[0, 25_000_000, 50_000_000, 75_000_000]);
}

/// A numeric or duration value, valid or not.
fn any_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|x| format!("{x:e}")),
        prop_oneof![
            Just(0.0),
            Just(1e-300),
            Just(1e-3),
            Just(1.0),
            Just(1e9),
            Just(1e300)
        ]
        .prop_map(|x: f64| format!("{x:e}")),
        (
            any::<u64>(),
            prop_oneof![
                Just("ns"),
                Just("us"),
                Just("ms"),
                Just("s"),
                Just("h"),
                Just("days")
            ]
        )
            .prop_map(|(n, u)| format!("\"{n}{u}\"")),
        (0u64..100, prop_oneof![Just("ms"), Just("s"), Just("days")])
            .prop_map(|(n, u)| format!("\"{n}{u}\"")),
        prop_oneof![Just("nan"), Just("inf"), Just("-inf"), Just("-0.0")].prop_map(String::from),
    ]
}

/// Every numeric key of [`FULL`] (and the ones it leaves out), as `--set` paths.
fn any_key() -> impl Strategy<Value = &'static str> {
    const OTHERS: [&str; 27] = [
        "seed",
        "population.users",
        "population.first_id",
        "population.late.count",
        "population.churn.count",
        "traffic[0].senders",
        "traffic[0].receivers",
        "traffic[0].messages",
        "traffic[0].size",
        "traffic[1].sweep[0]",
        "traffic[1].sweep[1]",
        "traffic[2].groups",
        "traffic[2].group_size",
        "traffic[2].senders_per_group",
        "traffic[2].messages",
        "traffic[2].interval",
        "traffic[2].duration",
        "traffic[2].start",
        "traffic[2].size",
        "ledger.sample",
        "ledger.examples",
        "checks.max_lost",
        "checks.max_late",
        "checks.min_login_success",
        "checks.max_send_error_rate",
        "monitor.pids",
        "population.late.fraction",
    ];
    let mut keys: Vec<&'static str> = DURATION_KEYS.to_vec();
    keys.extend(RATE_KEYS);
    keys.extend(OTHERS);
    prop::sample::select(keys)
}

/// Only `Ok` or a scenario error: never a panic, never another kind of error. A plan
/// that validates is also cut into the engine's schedule (first and last shard of three)
/// and its last login time computed, the arithmetic a run does with it.
fn ok_or_scenario_error(text: &str, overrides: &[&str]) -> std::result::Result<(), String> {
    match plan(text, overrides) {
        Ok(p) => {
            for index in [0, 2] {
                let range = Shard { index, count: 3 }.range(p.population.users);
                crate::engine::schedule::build(&p, range);
            }
            let last = u64::from(p.population.users - 1);
            crate::engine::arrival::arrival_offset(&p.population.arrival, last);
            Ok(())
        }
        Err(e @ Error::Scenario { .. }) if e.exit_code() == 2 => Ok(()),
        Err(e) => Err(format!("not a scenario error: {e}")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_numbers_via_set_never_panic(
        sets in prop::collection::vec((any_key(), any_value()), 1..4),
    ) {
        let sets: Vec<String> = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        prop_assert_eq!(ok_or_scenario_error(FULL, &sets), Ok(()));
    }

    #[test]
    fn any_numbers_in_the_file_never_panic(
        which in 0usize..64,
        value in any_value(),
    ) {
        // Replace the value of one `key = value` line of the file.
        let lines: Vec<&str> = FULL.lines().collect();
        let assignments: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains(" = ") && !lines[i].contains('{'))
            .collect();
        let at = assignments[which % assignments.len()];
        let key = lines[at].split(" = ").next().unwrap_or("");
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        edited[at] = format!("{key} = {value}");
        prop_assert_eq!(ok_or_scenario_error(&edited.join("\n"), &[]), Ok(()));
    }
}

#[test]
fn a_sample_that_tracks_nothing_is_refused() {
    // BASE has 10 × 10 streams: 0.01 tracks about one, less tracks none.
    plan(BASE, &["ledger.sample=0.01"]).unwrap();
    fails(
        BASE,
        &["ledger.sample=1e-300"],
        0,
        "ledger.sample",
        "1e-300 of 100 streams is less than one stream, so the ledger would verify nothing; \
         set at least 0.01",
    );
}

#[test]
fn error_messages_write_floats_compactly_and_cut_long_overrides() {
    // A float in a wrong-type message is written compactly, and a long override is cut.
    fails(
        BASE,
        &["population.users=1e-300"],
        0,
        "population.users",
        "got floating point `1e-300` (from",
    );
    let long = format!("x=[{}]", "1, ".repeat(100));
    let e = plan(BASE, &[&long]).unwrap_err().to_string();
    assert!(e.len() < 300 && e.contains("…`)"), "{e}");
}

#[test]
fn every_duration_at_its_maximum_schedules_without_overflow() {
    let sets = [
        "drain=30days",
        "target.connect_timeout=30days",
        "target.heartbeat=30days",
        "population.late.at=30days",
        "population.churn.offline_at=29days",
        "population.churn.back_at=30days",
        "traffic[0].interval=30days",
        "traffic[0].start=30days",
        "traffic[0].duration=30days",
        "traffic[1].step_duration=15days",
        "traffic[2].start=30days",
        "ledger.late_after=30days",
        "checks.e2e_p99=30days",
    ];
    let p = plan(FULL, &sets).unwrap_or_else(|e| panic!("{e}"));
    let s = crate::engine::schedule::build(&p, Shard::WHOLE.range(p.population.users));
    assert!(s.end <= 3 * crate::scenario::values::MAX_DURATION);
    for vu in &s.vus {
        for prog in &vu.programs {
            let mut prog = prog.clone();
            prog.sent = u64::MAX - 1;
            prog.count = None;
            prog.end = None;
            assert!(prog.due().is_some());
        }
    }
    let last = u64::from(p.population.users);
    crate::engine::arrival::arrival_offset(&p.population.arrival, last);
}
