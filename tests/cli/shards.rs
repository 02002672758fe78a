//! Shards: two `msgstorm run --shard I/2` processes with one `--run-id` against one server,
//! with direct traffic crossing the shards, together account for every message —
//! `msgstorm report a b` merges them to zero lost, `Artifact::merge` gives delivered ==
//! expected, and the merge is the same in either order.

use std::path::Path;

use msgstorm::artifact::Artifact;

use crate::common::run::{msgstorm, scenario, Ran, Work};
use crate::common::{config, start};

/// 40 users, 8 senders × 16 receivers drawn at random: 24 users cannot all sit in one
/// shard of 20, so messages cross from one process to the other. Traffic starts 1 s after
/// each shard's logins so both processes send on nearly the same clock.
const TRAFFIC: &str = r#"
[population]
users = 40
login_rate = 400

[[traffic]]
name = "chat"
kind = "direct"
senders = 8
receivers = 16
start = "1s"
rate = 80
duration = "2s"

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
max_corrupted = 0
"#;

fn json(a: &Artifact) -> String {
    serde_json::to_string(a).expect("artifacts serialize")
}

/// The top-level fields in which two artifacts differ, with both values (clipped).
fn differing(x: &Artifact, y: &Artifact) -> Vec<String> {
    let (x, y) = (
        serde_json::to_value(x).expect("serialize"),
        serde_json::to_value(y).expect("serialize"),
    );
    let clip = |v: &serde_json::Value| v.to_string().chars().take(200).collect::<String>();
    x.as_object()
        .expect("an object")
        .iter()
        .filter(|(k, v)| y.get(k.as_str()) != Some(v))
        .map(|(k, v)| format!("{k}: {} vs {}", clip(v), clip(&y[k.as_str()])))
        .collect()
}

fn merged(first: &Artifact, second: &Artifact) -> Artifact {
    let mut m = first.clone();
    m.merge(second).expect("shards of one run merge");
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_of_one_run_merge_to_every_message_delivered() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario(
        "name = \"sharded\"\nseed = 5\ndrain = \"3s\"",
        &server,
        TRAFFIC,
    );
    let file = work.write("s.toml", &text);
    let file = file.to_str().expect("utf-8");
    let (a_dir, b_dir) = (work.path("a"), work.path("b"));
    let (a_dir, b_dir) = (
        a_dir.to_str().expect("utf-8"),
        b_dir.to_str().expect("utf-8"),
    );
    let run = |shard: &'static str, out: &str| {
        let args: Vec<String> = [
            "run", file, "-q", "--shard", shard, "--run-id", "5eed0001", "--out", out,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            msgstorm(&refs).await
        }
    };
    let (ra, rb): (Ran, Ran) = tokio::join!(run("0/2", a_dir), run("1/2", b_dir));
    // A shard alone is INCOMPLETE, but that is its nature: it exits 0 and says where the
    // verdict comes from.
    for r in [&ra, &rb] {
        r.expect_code(0);
        assert!(r.verdict().starts_with("INCOMPLETE"), "{r}");
        assert!(r.stderr.contains("one shard of the run"), "{r}");
    }
    let (pa, pb) = (
        format!("{a_dir}/result.json"),
        format!("{b_dir}/result.json"),
    );
    let a = Artifact::read(pa.as_ref()).unwrap_or_else(|e| panic!("{e}\n{ra}"));
    let b = Artifact::read(pb.as_ref()).unwrap_or_else(|e| panic!("{e}\n{rb}"));
    assert_eq!(
        (a.run_id.as_str(), b.run_id.as_str()),
        ("5eed0001", "5eed0001")
    );
    assert_eq!((a.shards[0].users, b.shards[0].users), (20, 20));
    // Alone, each shard sees only half of the story: its senders' messages to the other
    // shard are expected there, and deliveries from the other shard's senders arrive here.
    let (da, db) = (a.ledger.summary(), b.ledger.summary());
    assert!(da.sent > 0 && db.sent > 0, "{da:?}\n{db:?}");

    // Every expectation is checked and all failures are reported together.
    let mut problems: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };

    // Either order, the same result, byte for byte — also when the shards started in
    // different seconds (shards of a Kubernetes Job do): here shard 1 as if 5 s earlier.
    let ab = merged(&a, &b);
    let ba = merged(&b, &a);
    check(
        json(&ab) == json(&ba),
        format!(
            "merge depends on the order of the shards: {:?}",
            differing(&ab, &ba)
        ),
    );
    let mut early_b = b.clone();
    early_b.started_unix_us -= 5_000_000;
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_micros(early_b.started_unix_us);
    early_b.started_at = humantime::format_rfc3339_seconds(start).to_string();
    let (ab5, ba5) = (merged(&a, &early_b), merged(&early_b, &a));
    check(
        json(&ab5) == json(&ba5),
        format!(
            "merge depends on the order of shards that started in different seconds: {:?}",
            differing(&ab5, &ba5)
        ),
    );
    check(
        ab5.started_at == early_b.started_at,
        format!(
            "merged started_at {} is not the earliest shard's start {} (started_unix_us {})",
            ab5.started_at, early_b.started_at, ab5.started_unix_us
        ),
    );

    // Shards may have notes of their own (one fell behind, one was CPU-bound).
    let (mut noted_a, mut noted_b) = (a.clone(), b.clone());
    noted_a.notes.push("only shard 0 says this".to_owned());
    noted_b.notes.push("only shard 1 says this".to_owned());
    let (abn, ban) = (merged(&noted_a, &noted_b), merged(&noted_b, &noted_a));
    check(
        json(&abn) == json(&ban),
        format!(
            "merge depends on the order of shards with different notes: {:?}",
            differing(&abn, &ban)
        ),
    );

    let d = ab.ledger.summary();
    check(d.expected > 0, format!("nothing expected: {d:?}"));
    check(d.sent == da.sent + db.sent, format!("sent: {d:?}"));
    let timing = format!(
        "shard 0: traffic at {:?} s, ran {:.2} s; shard 1: traffic at {:?} s, ran {:.2} s",
        a.traffic_started_s, a.duration_s, b.traffic_started_s, b.duration_s
    );
    check(
        (d.lost, d.duplicated, d.unexpected) == (0, 0, 0) && d.delivered == d.expected,
        format!(
            "merged shards: expected {}, delivered {}, lost {}, duplicated {}, unexpected {}; \
             {timing}; examples {:?}",
            d.expected, d.delivered, d.lost, d.duplicated, d.unexpected, d.examples
        ),
    );
    let report = msgstorm(&["report", &pa, &pb]).await;
    check(
        report.code == 0 && report.verdict().starts_with("PASS"),
        format!("msgstorm report of both shards: {}", report.verdict()),
    );
    check(
        report.verdict().contains(" 0 lost"),
        format!("msgstorm report of both shards: {}", report.verdict()),
    );
    assert!(
        problems.is_empty(),
        "{}\n\nshard 0 {ra}\nshard 1 {rb}",
        problems.join("\n")
    );
    server.shutdown().await.expect("server stops");
}

/// Runs `file` as `msgstorm run --shards 2` into `out` with `env` set, checks that it
/// passed, and returns the merged result (one entry per generator process).
async fn two_shards_pass(file: &Path, out: &Path, env: &[(&str, &std::ffi::OsStr)]) -> Artifact {
    let args = [
        "run",
        file.to_str().expect("utf-8 path"),
        "--shards",
        "2",
        "--out",
        out.to_str().expect("utf-8 path"),
        "-q",
    ];
    let ran = crate::common::run::msgstorm_with_env(&args, env).await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let a = Artifact::read(&out.join("result.json")).expect("merged result.json");
    assert_eq!(a.shards.len(), 2, "one entry per generator process");
    a
}

/// `msgstorm run --shards 2` with no target: the coordinator hosts the embedded server, two
/// generator processes each take half of the users with one run id and a common traffic
/// start, and the merged report accounts for every message (late users included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_flag_runs_processes_and_merges_their_results() {
    let work = Work::new();
    let file = work.write(
        "sharded.toml",
        r#"
[population]
users = 60
login_rate = 600
late = { count = 4, at = "1500ms" }

[[traffic]]
kind = "direct"
senders = 10
receivers = 20
rate = 100
duration = "2s"

[[traffic]]
kind = "group"
groups = 4
group_size = 8
rate = 40
duration = "2s"

[checks]
max_lost = 0
max_duplicated = 0
"#,
    );
    let out = work.path("out");
    let a = two_shards_pass(&file, &out, &[]).await;
    assert_eq!(a.shards.iter().map(|s| s.users).sum::<u32>(), 60);
    assert!(a.target.starts_with("embedded"), "{}", a.target);
    let d = a.ledger.summary();
    assert!(d.expected > 0 && d.delivered == d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated), (0, 0), "{d:?}");
    assert!(out.join("shard-0/result.json").exists() && out.join("shard-1/result.json").exists());
    // The merged run's HTML report, and `report --html` over the shards' results.
    let page = std::fs::read_to_string(out.join("report.html")).expect("the run's report.html");
    assert!(
        page.contains("2 generator processes"),
        "report.html of the merged run"
    );
    let shard = |i: u32| {
        out.join(format!("shard-{i}/result.json"))
            .display()
            .to_string()
    };
    let again = work.path("merged.html");
    msgstorm(&[
        "report",
        &shard(0),
        &shard(1),
        &format!("--html={}", again.display()),
    ])
    .await
    .expect_code(0);
    let page = std::fs::read_to_string(&again).expect("report --html over both shards");
    assert!(page.contains("2 generator processes") && page.contains("<h1>PASS"));
}

/// A generator confined to one worker thread (one core, or `TOKIO_WORKER_THREADS=1`) runs
/// everything on that thread: the coordinator with the embedded server beside it, and each
/// shard. Nothing in a run may wait on another thread's progress while holding this one:
/// the sharded run still delivers every message and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_worker_thread_hosts_the_server_and_its_shards_and_passes() {
    let work = Work::new();
    let file = work.write(
        "one-thread.toml",
        r#"
[population]
users = 24
login_rate = 400

[[traffic]]
kind = "group"
groups = 3
group_size = 6
rate = 30
duration = "2s"
"#,
    );
    one_thread_shards_deliver_everything(&file, &work.path("out")).await;
}

/// [`two_shards_pass`] with every process on one worker thread, and every message
/// delivered exactly once.
async fn one_thread_shards_deliver_everything(file: &Path, out: &Path) -> Artifact {
    let one_thread = [("TOKIO_WORKER_THREADS", std::ffi::OsStr::new("1"))];
    let a = two_shards_pass(file, out, &one_thread).await;
    let d = a.ledger.summary();
    assert!(d.expected > 0 && d.delivered == d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated), (0, 0), "{d:?}");
    a
}

/// A run with a wake tick (`wake_tick`): every process's threads sleep to the next
/// millisecond before they wait for their sockets (on one thread: the coordinator with the
/// embedded server, and each shard). Every message is still delivered once, the run passes,
/// and each shard says that its receive times were the kernel's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_a_wake_tick_delivers_everything_with_the_kernel_s_receive_times() {
    let work = Work::new();
    let file = work.write(
        "wake-tick.toml",
        r#"
wake_tick = "1ms"

[population]
users = 40
login_rate = 400

[[traffic]]
kind = "group"
groups = 4
group_size = 10
rate = 200
duration = "2s"
"#,
    );
    let out = work.path("out");
    one_thread_shards_deliver_everything(&file, &out).await;
    for i in 0..2 {
        let shard = Artifact::read(&out.join(format!("shard-{i}/result.json"))).expect("shard");
        assert!(
            shard
                .notes
                .iter()
                .any(|n| n.starts_with("wake tick 1 ms")
                    && n.contains("receive times are the kernel's")),
            "shard {i}: {:?}",
            shard.notes
        );
    }
}

/// The shards' common traffic start waits for every shard's users. Shard 1 starts
/// 3 s after shard 0, long after the common `--start-traffic-at`: with `--start-barrier`,
/// shard 0 holds its traffic until shard 1's users are in, so no message is sent to a user
/// still logging in (nothing arrives by the catch-up sync) and nothing is lost, duplicated or
/// reordered. Without the barrier, shard 1's result says in words that its users were not
/// all in at the common start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_waits_for_every_shards_logins() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario(
        "name = \"barrier\"\nseed = 5\ndrain = \"3s\"",
        &server,
        TRAFFIC,
    );
    let file = work.write("s.toml", &text);
    let file = file.to_str().expect("utf-8").to_owned();
    let barrier = work.path("start");
    let barrier = barrier.to_str().expect("utf-8").to_owned();
    let run = |shard: &'static str, out: String, with_barrier: bool, delay_ms: u64| {
        let at = std::time::SystemTime::now() + std::time::Duration::from_millis(500);
        let at_ms = at
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis()
            .to_string();
        let mut args: Vec<String> = [
            "run",
            &file,
            "-q",
            "--shard",
            shard,
            "--run-id",
            "5eed0010",
            "--start-traffic-at",
            &at_ms,
            "--out",
            &out,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if with_barrier {
            args.extend(["--start-barrier".to_owned(), barrier.clone()]);
        }
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            msgstorm(&refs).await
        }
    };
    let out = |name: &str| work.path(name).to_str().expect("utf-8").to_owned();
    let (ra, rb) = tokio::join!(
        run("0/2", out("a"), true, 0),
        run("1/2", out("b"), true, 3000)
    );
    let read = |dir: String, ran: &Ran| {
        Artifact::read(format!("{dir}/result.json").as_ref())
            .unwrap_or_else(|e| panic!("{e}\n{ran}"))
    };
    let (a, b) = (read(out("a"), &ra), read(out("b"), &rb));
    let d = merged(&a, &b).ledger.summary();
    let timing = format!(
        "shard 0: traffic at {:?} s; shard 1: traffic at {:?} s; notes {:?} {:?}",
        a.traffic_started_s, b.traffic_started_s, a.notes, b.notes
    );
    assert!(
        a.traffic_started_s.is_some_and(|t| t >= 2.5),
        "shard 0 did not wait for shard 1: {timing}"
    );
    assert_eq!(
        (d.via_sync, d.lost, d.duplicated, d.reordered),
        (0, 0, 0, 0),
        "{timing}\n{d:?}"
    );
    assert!(d.expected > 0 && d.delivered == d.expected, "{d:?}");
    assert!(
        !a.notes
            .iter()
            .chain(&b.notes)
            .any(|n| n.contains("logged in")),
        "{timing}"
    );

    // The same without the barrier: shard 1 was late for the common start and says so.
    let (_, rb) = tokio::join!(
        run("0/2", out("c"), false, 0),
        run("1/2", out("d"), false, 3000)
    );
    let late = read(out("d"), &rb);
    assert!(
        late.notes
            .iter()
            .any(|n| n.contains("not all logged in at the run's common traffic start")),
        "{:?}",
        late.notes
    );
    server.shutdown().await.expect("server stops");
}
