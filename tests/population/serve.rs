//! The population against `msgstorm serve`, in one process and as two shards.

use msgstorm::artifact::Artifact;
use msgstorm::metrics::Counter;
use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::ServeConfig;

use super::DAY;
use crate::common::run::{msgstorm, run_file, run_text, scenario, Work};
use crate::common::{config, fault_log, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_day_delivers_every_message_to_contacts_exactly_once() {
    let server = start(config()).await;
    let work = Work::new();
    let (ran, a) = run_text(
        &work,
        &scenario("name = \"day\"\nseed = 11\ndrain = \"3s\"", &server, DAY),
    )
    .await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let d = a.ledger.summary();
    let sent = a.metrics.count(Counter::Sent);
    // 60 + 10 msgs/s over 12 s: a Poisson count within 20% of 840.
    assert!((672..=1008).contains(&sent), "{sent} sent");
    // Group messages reach every other member: more deliveries than sends.
    assert!(d.expected > sent + 200, "{d:?}");
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
    assert!(
        d.via_sync > 50 && d.via_push > 50,
        "both live and caught up: {d:?}"
    );
    // The result keeps the offered shape; its planned sends are the sends the run made due.
    let o = a
        .population
        .as_ref()
        .expect("the population's shape in result.json");
    assert_eq!(
        o.chat_sends + o.group_sends,
        a.metrics.count(Counter::Due),
        "{o:?}"
    );
    assert_eq!((o.groups, o.online.len()), (20, 13), "{o:?}");
    assert!(o.top10_share > 0.3, "a few users send most: {o:?}");
    assert!(ran.stdout.contains("population (as planned)"), "{ran}");
    let text = std::fs::read_to_string(work.path("out").join("result.json")).expect("read");
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let (schemas, schema) = crate::cli::report::result_schema();
    if let Err(e) = schemas.validate(&value, schema) {
        panic!("result.json does not match schema/result.schema.json: {e:#}");
    }
    // Users log in again and again: more logins than users.
    assert!(
        a.metrics.count(Counter::LoginOk) > 400,
        "{}",
        a.metrics.count(Counter::LoginOk)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_of_a_day_send_and_verify_what_one_process_plans() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario("name = \"day2\"\nseed = 12\ndrain = \"3s\"", &server, DAY);
    let file = work.write("s.toml", &text);
    let (one, whole) = run_file(&file, &work.path("one"), &[]).await;
    one.expect_code(0);
    let (two, sharded) = run_file(&file, &work.path("two"), &["--shards", "2"]).await;
    two.expect_code(0);
    let sum = |a: &Artifact| {
        let d = a.ledger.summary();
        (
            a.metrics.count(Counter::Due),
            d.expected,
            d.delivered,
            d.lost,
            d.duplicated,
        )
    };
    let (w, s) = (sum(&whole), sum(&sharded));
    // The same seed plans the same sends, whether one process or two run them.
    assert_eq!(w.0, s.0, "due: one process {w:?}, two shards {s:?}");
    assert_eq!((s.1, s.3, s.4), (s.2, 0, 0), "{s:?}");
    assert_eq!((w.1, w.3, w.4), (w.2, 0, 0), "{w:?}");
    // The shards' splits merge: every delivery in one phase, every group stream's band
    // known, whether one process or two counted them.
    use msgstorm::metrics::split::Part;
    for a in [&whole, &sharded] {
        let split = a.metrics.split();
        let phases = split.count(Part::LoginWave) + split.count(Part::Steady);
        assert_eq!(phases, a.ledger.summary().delivered);
        let rows = msgstorm::report::split::rows(&a.metrics, &a.ledger);
        let bands: Vec<_> = rows.iter().filter(|r| r.lost.is_some()).collect();
        assert!(bands.len() >= 2, "{rows:?}");
        assert!(bands.iter().all(|r| r.lost == Some(0)), "{rows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mix_of_body_sizes_arrives_whole_at_the_mix_mean() {
    let server = start(config()).await;
    let work = Work::new();
    let day = DAY.replace(
        "size = 120",
        "size = { mix = [[100, 0.8], [1000, 0.15], [10000, 0.05]] }",
    );
    let (ran, a) = run_text(
        &work,
        &scenario("name = \"sizes\"\nseed = 13\ndrain = \"3s\"", &server, &day),
    )
    .await;
    ran.expect_code(0);
    let d = a.ledger.summary();
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.corrupted), (0, 0, 0), "{d:?}");
    // 0.8 × 100 + 0.15 × 1000 + 0.05 × 10000 = 730 bytes a message; over ~840 sends the
    // 10 kB share alone moves the mean by ~10%, so within 25%.
    let sent = a.metrics.count(Counter::Sent);
    let mean = a.metrics.count(Counter::BytesOut) as f64 / sent.max(1) as f64;
    assert!(
        (547.0..=913.0).contains(&mean),
        "{mean} bytes a message over {sent}"
    );
    let sizes = a
        .population
        .as_ref()
        .and_then(|o| o.sizes)
        .expect("sizes in result.json");
    assert_eq!(
        (sizes.p50, sizes.p99, sizes.max),
        (100, 10000, 10000),
        "{sizes:?}"
    );
    assert!(ran.stdout.contains("sizes: mean"), "{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_splits_its_deliveries_by_group_band_session_phase_and_return() {
    use msgstorm::metrics::split::Part;
    let server = start(config()).await;
    let work = Work::new();
    let (ran, a) = run_text(
        &work,
        &scenario("name = \"split\"\nseed = 14\ndrain = \"3s\"", &server, DAY),
    )
    .await;
    ran.expect_code(0);
    let d = a.ledger.summary();
    let s = a.metrics.split();
    // Every delivery was due in one phase or the other.
    assert_eq!(
        s.count(Part::LoginWave) + s.count(Part::Steady),
        d.delivered,
        "{d:?}"
    );
    assert!(s.count(Part::LoginWave) > 0 && s.count(Part::Steady) > 0);
    // Groups of 3 to 60 members: some small, some large, and the largest apart.
    let bands = [Part::Small, Part::Large, Part::Hot].map(|p| s.count(p));
    assert!(bands.iter().all(|&n| n > 0), "{bands:?}");
    assert!(
        bands.iter().sum::<u64>() < d.delivered,
        "{bands:?} of {d:?}"
    );
    // Only live deliveries are timed.
    assert!(s.hist(Part::Steady).len() <= s.count(Part::Steady));
    assert_eq!(
        s.hist(Part::Steady).len() + s.hist(Part::LoginWave).len(),
        d.via_push
    );
    // Users come back and catch up.
    assert!(s.count(Part::Sync) > 20, "{}", s.count(Part::Sync));
    assert_eq!(s.hist(Part::Sync).len(), s.count(Part::Sync));
    assert!(ran.stdout.contains("where the shape matters"), "{ran}");
    // Lost messages are told by group band and by phase (none here).
    let rows = msgstorm::report::split::rows(&a.metrics, &a.ledger);
    let lost = |part: &str| rows.iter().find(|r| r.part == part).and_then(|r| r.lost);
    assert_eq!([lost("small"), lost("large"), lost("hot")], [Some(0); 3]);
    assert_eq!((lost("steady"), lost("sync")), (Some(0), None));
    // The page charts the offered shape and tables the split.
    let html = std::fs::read_to_string(work.path("out").join("report.html")).expect("read");
    for id in [
        "shape-online",
        "shape-logins",
        "shape-sessions",
        "shape-groups",
        "shape-senders",
        "split",
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "no #{id} in report.html"
        );
    }
    // `compare` puts the population's numbers and the split side by side.
    let result = work.path("out").join("result.json").display().to_string();
    let cmp = msgstorm(&["compare", &result, &result]).await;
    cmp.expect_code(0);
    for row in [
        "| population_top10_share ",
        "| population_fanout ",
        "| split_hot_p99 ",
        "| split_sync_count ",
    ] {
        assert!(cmp.stdout.contains(row), "no {row} in {cmp}");
    }
    let text = std::fs::read_to_string(work.path("out").join("result.json")).expect("read");
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let (schemas, schema) = crate::cli::report::result_schema();
    if let Err(e) = schemas.validate(&value, schema) {
        panic!("result.json does not match schema/result.schema.json: {e:#}");
    }
}

/// Pushes the server drops, with no final verification sync to repair them: each lost
/// message is told by the session phase it was due in, the phases add up to the run's lost,
/// and never more are lost than the server's fault log lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_messages_are_split_by_the_session_phase_they_were_due_in() {
    let work = Work::new();
    let log = work.path("faults.jsonl");
    let server = start(ServeConfig {
        faults: FaultSpec::parse("drop=0.3").expect("valid fault spec"),
        fault_seed: Some(37),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    // A login wave in the middle of the day, when users are online to get pushes.
    let spike = "day = \"12s\"\ncurve = [1, 1, 1, 1, 1, 12, 1, 1, 1, 1, 1]";
    let body = DAY.replace("day = \"12s\"", spike) + "\n[ledger]\nverify_sync = false\n";
    let (ran, a) = run_text(
        &work,
        &scenario(
            "name = \"lost-by-phase\"\nseed = 14\ndrain = \"3s\"",
            &server,
            &body,
        ),
    )
    .await;
    server.shutdown().await.expect("server stops");
    ran.expect_code(1);
    let dropped = fault_log(&log)
        .iter()
        .filter(|l| l["kind"] == "drop" && l.get("signal").is_none())
        .count() as u64;
    let d = a.ledger.summary();
    assert!(d.lost > 0 && d.lost <= dropped, "{dropped} dropped, {d:?}");
    let [wave, steady] = a.ledger.lost_by_wave().expect("a login wave");
    assert_eq!(wave + steady, d.lost, "{d:?}");
    // About a sixth of the deliveries are due in the wave: ~12 of ~70 lost expected there.
    assert!(
        wave > 0 && steady > 0,
        "{wave} in the wave, {steady} outside"
    );
    let rows = msgstorm::report::split::rows(&a.metrics, &a.ledger);
    let lost = |part: &str| rows.iter().find(|r| r.part == part).and_then(|r| r.lost);
    assert_eq!(
        (lost("login_wave"), lost("steady")),
        (Some(wave), Some(steady))
    );
    assert_eq!(lost("sync"), None);
    let line = ran
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("login_wave"))
        .unwrap_or_default();
    assert!(line.contains(&format!("lost {wave:>6}")), "{line}\n{ran}");
}
