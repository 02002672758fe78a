//! `kind = "flow"`: every key is checked at its line, and a flow lowers into direct or
//! group traffic paced by seeded think times.

use std::time::Duration;

use super::*;

/// A valid flow to one receiver each loop; `traffic[0]` starts at line 7.
const FLOW: &str = r#"seed = 7

[population]
users = 20
login_rate = 100

[[traffic]]
kind = "flow"
users = 5
loops = 3
think = "2s"
"#;

/// FLOW with `line` appended to its traffic entry (line 12).
fn with(line: &str) -> String {
    format!("{FLOW}{line}\n")
}

#[test]
fn a_direct_flow_lowers_to_direct_traffic_with_think_times() {
    let p = plan(&with("receivers = 2"), &[]).unwrap();
    let TrafficShape::Direct(d) = &p.traffic[0].kind else {
        panic!("{:?}", p.traffic[0].kind);
    };
    assert_eq!((d.senders.len(), d.receivers.len()), (5, 2));
    assert_eq!(d.messages, Some(3), "one message per receiver and loop");
    let Pace::Think(think) = &d.pace else {
        panic!("{:?}", d.pace);
    };
    assert_eq!(think.times, ThinkTimes::Fixed(Duration::from_secs(2)));
    // The seed comes from the scenario seed: the same file, the same think seed.
    let again = plan(&with("receivers = 2"), &[]).unwrap();
    assert_eq!(p.traffic, again.traffic);
    assert_eq!(p.target.kinds, vec!["direct"]);
}

#[test]
fn a_group_flow_splits_its_users_over_the_groups() {
    let text = with("to = \"group\"\ngroups = 2\ngroup_size = 6\nthink = { exponential = \"1s\" }")
        .replace("think = \"2s\"\n", "")
        .replace("users = 5\n", "users = 4\n");
    let p = plan(&text, &[]).unwrap();
    let TrafficShape::Group(g) = &p.traffic[0].kind else {
        panic!("{:?}", p.traffic[0].kind);
    };
    assert_eq!(g.groups.len(), 2);
    assert!(g.groups.iter().all(|x| x.members.len() == 6));
    assert_eq!(g.senders_per_group, 2);
    assert_eq!(g.messages, Some(3));
    assert_eq!(p.target.kinds, vec!["group"]);
}

#[test]
fn every_flow_key_names_its_line() {
    let cases: &[(&str, &str, usize, &str, &str)] = &[
        ("users = 5\n", "", 7, "traffic[0].users", "needs `users`"),
        ("loops = 3\n", "", 7, "traffic[0].loops", "needs `loops`"),
        (
            "loops = 3\n",
            "loops = 0\n",
            10,
            "traffic[0].loops",
            "must be > 0, got 0",
        ),
        (
            "think = \"2s\"\n",
            "",
            7,
            "traffic[0].think",
            "needs `think`",
        ),
        (
            "think = \"2s\"\n",
            "think = \"soon\"\n",
            11,
            "traffic[0].think",
            "not a duration: `soon`",
        ),
        (
            "think = \"2s\"\n",
            "think = \"0s\"\n",
            11,
            "traffic[0].think",
            "must be longer than 0s",
        ),
        (
            "think = \"2s\"\n",
            "think = { uniform = [\"3s\", \"1s\"] }\n",
            11,
            "traffic[0].think",
            "uniform bounds must rise",
        ),
        (
            "think = \"2s\"\n",
            "think = { poisson = \"1s\" }\n",
            11,
            "traffic[0].think",
            "{ exponential = \"2s\" }",
        ),
        (
            "think = \"2s\"\n",
            "think = 2\n",
            11,
            "traffic[0].think",
            "must be a duration (\"2s\")",
        ),
        (
            "loops = 3\n",
            "loops = 2000000\n",
            10,
            "traffic[0].loops",
            "must end within 30 days",
        ),
        (
            "users = 5\n",
            "users = 50\n",
            9,
            "traffic[0].users",
            "50 > 20 users online throughout",
        ),
    ];
    for (from, to, line, key, msg) in cases {
        fails(&FLOW.replacen(from, to, 1), &[], *line, key, msg);
    }
    let extra: &[(&str, usize, &str, &str)] = &[
        (
            "to = \"room\"",
            12,
            "traffic[0].to",
            "must be \"direct\" or \"group\", got `room`",
        ),
        (
            "receivers = 16",
            12,
            "traffic[0].receivers",
            "5 + 16 > 20 users",
        ),
        (
            "groups = 2",
            12,
            "traffic[0].groups",
            "`groups` goes with `to = \"group\"`",
        ),
        (
            "duration = \"5s\"",
            12,
            "traffic[0].duration",
            "ends after its `loops`",
        ),
        (
            "rate = 5",
            12,
            "traffic[0].rate",
            "`rate` does not apply to kind `flow`",
        ),
        (
            "to = \"group\"\ngroups = 2",
            13,
            "traffic[0].groups",
            "5 users do not split evenly into 2 groups",
        ),
        (
            "to = \"group\"\ngroup_size = 3",
            13,
            "traffic[0].group_size",
            "must be in 5..=20",
        ),
        (
            "to = \"group\"",
            7,
            "traffic[0].group_size",
            "needs `group_size`",
        ),
        (
            "to = \"group\"\ngroup_size = 9\nreceivers = 2",
            14,
            "traffic[0].receivers",
            "goes with `to = \"direct\"`",
        ),
    ];
    for (line, at, key, msg) in extra {
        fails(&with(line), &[], *at, key, msg);
    }
}

#[test]
fn a_flow_runs_on_the_drivers_that_run_direct_traffic() {
    let text = FLOW.replacen(
        "seed = 7\n",
        "seed = 7\n[target]\nurl = \"ws://h/echo\"\ndriver = \"echo\"\n",
        1,
    );
    fails(
        &text,
        &[],
        11,
        "traffic[0].kind",
        "kind `flow` is not supported by driver `echo`; it runs: echo",
    );
}
