//! Lowering rules, the example files and the public entry points.

use std::collections::BTreeSet;
use std::time::Duration;

use super::*;

const RICH: &str = r#"
seed = 9
[population]
users = 1000
login_rate = 500
late = { fraction = 0.1, at = "5s" }
churn = { count = 50, offline_at = "6s", back_at = "8s" }

[[traffic]]
kind = "direct"
senders = 20
receivers = 30
rate = 200
messages = 5

[[traffic]]
name = "rooms"
kind = "group"
groups = 40
group_size = 8
senders_per_group = 3
interval = "100ms"
duration = "5s"

[[traffic]]
kind = "idle"
users = 100
pick = "every_kth"
duration = "5s"

[[traffic]]
kind = "request"
request = "kv_get"
sweep = [10, 20, 30]
step_duration = "2s"
start = "10s"

[checks]
max_lost = 0
e2e_p99 = "250ms"
min_login_success = 0.99
"#;

fn direct(p: &Plan, i: usize) -> &DirectTraffic {
    match &p.traffic[i].kind {
        TrafficShape::Direct(d) => d,
        k => panic!("not direct: {k:?}"),
    }
}

fn groups(p: &Plan, i: usize) -> &GroupTraffic {
    match &p.traffic[i].kind {
        TrafficShape::Group(g) => g,
        k => panic!("not group: {k:?}"),
    }
}

#[test]
fn same_seed_same_plan_other_seed_other_users() {
    let a = plan(RICH, &[]).unwrap();
    assert_eq!(a, plan(RICH, &[]).unwrap());
    let b = plan(RICH, &["seed=10"]).unwrap();
    assert_ne!(a.population.late, b.population.late);
    assert_ne!(direct(&a, 0).senders, direct(&b, 0).senders);
}

#[test]
fn late_and_churn_are_disjoint_samples() {
    let p = plan(RICH, &[]).unwrap();
    let pop = &p.population;
    assert_eq!((pop.late.len(), pop.churn.len()), (100, 50));
    assert!(pop.late.windows(2).all(|w| w[0] < w[1]));
    assert!(pop.churn.windows(2).all(|w| w[0] < w[1]));
    assert!(pop.late.iter().all(|u| !pop.churn.contains(u)));
    assert_eq!(pop.late_at, Duration::from_secs(5));
    assert_eq!(
        (pop.churn_offline_at, pop.churn_back_at),
        (Duration::from_secs(6), Duration::from_secs(8))
    );
}

#[test]
fn senders_are_online_throughout_receivers_are_anyone_else() {
    let p = plan(RICH, &[]).unwrap();
    let away: BTreeSet<u32> = p
        .population
        .late
        .iter()
        .chain(&p.population.churn)
        .copied()
        .collect();
    let d = direct(&p, 0);
    assert_eq!((d.senders.len(), d.receivers.len()), (20, 30));
    assert!(d.senders.iter().all(|s| !away.contains(s)));
    assert!(d.receivers.iter().all(|r| !d.senders.contains(r)));
    assert_eq!(
        d.pace,
        Pace::Every(Duration::from_millis(100)),
        "20 senders / 200 msgs/s"
    );
    assert_eq!(d.messages, Some(5));
    assert_eq!(*d.size.sizes, Sizes::Fixed(100));
    assert_eq!(p.traffic[0].name, "traffic[0]");
    assert_eq!(p.traffic[0].duration, None);
}

#[test]
fn late_users_can_receive() {
    let text = RICH.replace("receivers = 30", "receivers = 900");
    let p = plan(&text, &[]).unwrap();
    let d = direct(&p, 0);
    assert!(d.receivers.iter().any(|r| p.population.late.contains(r)));
}

#[test]
fn groups_are_unique_sorted_and_senders_are_steady_members() {
    let p = plan(RICH, &[]).unwrap();
    let away: BTreeSet<u32> = p
        .population
        .late
        .iter()
        .chain(&p.population.churn)
        .copied()
        .collect();
    let g = groups(&p, 1);
    assert_eq!(g.groups.len(), 40);
    let names: BTreeSet<&str> = g.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names.len(), 40);
    assert_eq!(g.groups[0].name, "g9-0");
    for spec in &g.groups {
        assert_eq!(spec.members.len(), 8);
        assert!(
            spec.members.windows(2).all(|w| w[0] < w[1]),
            "sorted, distinct"
        );
        assert_eq!(spec.senders.len(), 3);
        assert!(spec
            .senders
            .iter()
            .all(|s| spec.members.contains(s) && !away.contains(s)));
    }
    assert_eq!(g.pace, Pace::Every(Duration::from_millis(100)));
    assert_eq!(g.senders_per_group, 3);
}

#[test]
fn stream_ids_are_dense_across_patterns() {
    let text = format!("{RICH}\n[[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 3\nrate = 1\nmessages = 1\n");
    let p = plan(&text, &[]).unwrap();
    assert_eq!(direct(&p, 0).stream_base, 0);
    assert_eq!(groups(&p, 1).stream_base, 20 * 30);
    assert_eq!(direct(&p, 4).stream_base, 20 * 30 + 40 * 3);
}

#[test]
fn every_kth_picks_evenly() {
    let p = plan(RICH, &[]).unwrap();
    let TrafficShape::Idle {
        users: IdleUsers::Chosen(users),
    } = &p.traffic[2].kind
    else {
        panic!()
    };
    assert_eq!(users.len(), 100);
    assert_eq!(&users[..3], &[0, 10, 20]);
}

#[test]
fn request_sweep_runs_each_step() {
    let p = plan(RICH, &[]).unwrap();
    let TrafficShape::Request(r) = &p.traffic[3].kind else {
        panic!()
    };
    assert_eq!(
        (r.request, r.steps.clone(), r.step_duration),
        ("kv_get", vec![10, 20, 30], Duration::from_secs(2))
    );
    assert_eq!(p.traffic[3].duration, Some(Duration::from_secs(6)));
    assert_eq!(p.traffic[3].start, Duration::from_secs(10));
}

#[test]
fn arrival_logs_in_exactly_the_on_time_users() {
    let p = plan(RICH, &[]).unwrap();
    let n: f64 = p
        .population
        .arrival
        .iter()
        .map(|a| (a.rate_from + a.rate_to) / 2.0 * a.duration.as_secs_f64())
        .sum();
    assert!((n - 900.0).abs() < 1e-6, "{n}");
    let text = RICH.replace(
        "login_rate = 500",
        "arrival = [{ duration = \"1s\", from = 100, to = 300 }, { duration = \"9s\", rate = 50 }]",
    );
    let p = plan(
        &text,
        &[
            "population.late.at=20s",
            "population.churn.offline_at=16s",
            "population.churn.back_at=18s",
        ],
    )
    .unwrap();
    let a = &p.population.arrival;
    assert_eq!(a.len(), 3, "200 + 450 users, then the last rate continues");
    assert_eq!(
        (a[1].duration, a[2].rate_from, a[2].rate_to),
        (Duration::from_secs(9), 50.0, 50.0)
    );
    assert!(
        (a[2].duration.as_secs_f64() - 5.0).abs() < 1e-6,
        "(900 − 650) / 50"
    );
}

#[test]
fn checks_and_defaults_lower() {
    let p = plan(RICH, &[]).unwrap();
    assert_eq!(
        p.checks,
        vec![
            Check {
                key: "checks.max_lost".into(),
                metric: CheckMetric::Lost,
                bound: Bound::AtMost(0.0)
            },
            Check {
                key: "checks.e2e_p99".into(),
                metric: CheckMetric::E2eP99,
                bound: Bound::AtMost(250_000.0)
            },
            Check {
                key: "checks.min_login_success".into(),
                metric: CheckMetric::LoginSuccess,
                bound: Bound::AtLeast(0.99)
            },
        ]
    );
    assert_eq!(p.name, "t", "file stem");
    assert_eq!(p.drain, Duration::from_secs(5));
    assert_eq!(p.target.endpoint, None);
    assert_eq!(p.target.auth, Auth::Secret(DEFAULT_SECRET.into()));
    assert_eq!(
        p.target.heartbeat,
        Some(Duration::from_secs(30)),
        "clients keep alive by default"
    );
    assert_eq!(
        p.ledger,
        LedgerOpts {
            sample: 1.0,
            late_after: Duration::from_secs(5),
            examples: 10,
            verify_sync: true,
            bounds_us: Vec::new(),
            wave_us: Vec::new(),
        }
    );
    assert_eq!(p.population.user_id(3), "u3");
}

#[test]
fn target_lowers() {
    let text = format!(
        "{}\n[target]\nurl = \"mqtts://broker:8883\"\ndriver = \"mqtt\"\nheartbeat = \"0s\"\n\
         [target.auth]\nusername = \"{{user}}\"\npassword = \"pw-{{user}}\"\n[target.mqtt]\nqos = 1\n",
        RICH.replace("[[traffic]]\nkind = \"request\"", "[[traffic]]\nkind = \"idle\"").replace("request = \"kv_get\"\nsweep = [10, 20, 30]\nstep_duration = \"2s\"", "duration = \"1s\"")
    );
    let p = plan(&text, &[]).unwrap();
    assert_eq!(p.target.driver.name, "mqtt");
    let ep = p.target.endpoint.as_ref().expect("a url");
    assert_eq!((ep.addr(), ep.tls()), ("broker:8883".to_owned(), true));
    assert!(p.target.caps.acceptance, "qos 1 has PUBACKs");
    assert_eq!(p.target.heartbeat, None);
    assert_eq!(
        p.target.auth,
        Auth::Password {
            username: "{user}".into(),
            password: "pw-{user}".into()
        }
    );
    assert_eq!(
        p.target.options.get("qos").and_then(|v| v.as_integer()),
        Some(1)
    );
}

#[test]
fn overrides_set_and_create_keys() {
    let p = plan(
        RICH,
        &[
            "population.users=2000",
            "traffic[1].rate=400",
            "traffic[1].interval=",
            "report.out=out/x",
            "target.heartbeat=20s",
        ],
    );
    // `interval=` sets an empty string, which is not a duration.
    let e = p.unwrap_err().to_string();
    assert!(
        e.starts_with("--set:0: traffic[1].interval: not a duration"),
        "{e}"
    );
    let p = plan(
        RICH,
        &[
            "population.users=2000",
            "traffic[0].size=64",
            "report.out=out/x",
            "target.heartbeat=20s",
            "population.late={ count = 7, at = \"9s\" }",
        ],
    )
    .unwrap();
    assert_eq!(p.population.users, 2000);
    assert_eq!(direct(&p, 0).size.max(), 64);
    assert_eq!(p.report.out.as_deref(), Some(std::path::Path::new("out/x")));
    assert_eq!(p.target.heartbeat, Some(Duration::from_secs(20)));
    assert_eq!(p.population.late.len(), 7);
}

#[test]
fn shard_is_recorded_and_checked() {
    let text = RICH;
    let p = parse(text, Path::new("t.toml"), &[], Shard { index: 1, count: 3 }).unwrap();
    assert_eq!(p.shard, Shard { index: 1, count: 3 });
    assert_eq!(
        p.population.users, 1000,
        "the plan keeps the whole population"
    );
    let e = parse(text, Path::new("t.toml"), &[], Shard { index: 3, count: 3 }).unwrap_err();
    assert_eq!(e.exit_code(), 2);
}

#[test]
fn default_plan_parses() {
    let p = default_plan();
    assert_eq!(p.name, "default");
    assert_eq!(p.population.users, 1000);
    assert_eq!(p.target.endpoint, None);
    assert!(!p.checks.is_empty());
}

#[test]
fn every_example_scenario_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let p = load(&path, &[], Shard::WHOLE).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.name, path.file_stem().unwrap().to_str().unwrap());
            n += 1;
        }
    }
    assert!(n >= 6, "{n} scenarios");
}

#[test]
fn missing_file_is_an_io_error() {
    let e = load(Path::new("/nonexistent/x.toml"), &[], Shard::WHOLE).unwrap_err();
    assert!(matches!(e, Error::Io { .. }));
}
