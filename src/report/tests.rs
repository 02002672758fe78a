//! The report model and its renderers on a committed result file
//! (`testdata/result.json`, a real run's, written before findings were computed by the
//! report, so its notes still carry the saturation sentence). Set `MSGSTORM_BLESS=1` to
//! rewrite the golden files after an intended change of the output.

use std::path::{Path, PathBuf};

mod hostile;

use super::checks::{Measure, NotMeasured, Origin, RunMetric, Unit};
use super::findings::{self, Finding};
use super::model::{Accounts, Report, Verdict};
use super::{html, json, present, text};
use crate::artifact::{Artifact, CheckMetric, Op};
use crate::metrics::{Counter, ErrorKind, Hist, Metrics};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/testdata")
        .join(name)
}

fn fixture() -> Artifact {
    Artifact::read(&testdata("result.json")).expect("the fixture reads")
}

/// Compares `actual` with the golden file `name`, or rewrites it under `MSGSTORM_BLESS=1`.
fn golden(name: &str, actual: &str) {
    let path = testdata(name);
    if std::env::var_os("MSGSTORM_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).expect("read the golden file");
    assert!(
        expected == actual,
        "{} differs (MSGSTORM_BLESS=1 rewrites it after an intended change):\n{actual}",
        path.display()
    );
}

#[test]
fn text_report_matches_its_golden_file() {
    golden("report.txt", &text::render(&Report::new(&fixture())));
}

#[test]
fn json_report_matches_its_golden_file() {
    let report = json::render(&Report::new(&fixture())).expect("encode");
    golden("report.json", &format!("{report}\n"));
}

#[test]
fn accounts_created_before_login_show_in_text_and_html() {
    assert_eq!(Report::new(&fixture()).connections.accounts, None);
    let mut a = fixture();
    a.metrics.add(0, Counter::AccountsCreated, 7);
    a.metrics.add(1, Counter::AccountsExisting, 2);
    a.metrics
        .error(1, ErrorKind::Registration, || "not-allowed".to_owned());
    let r = Report::new(&a);
    let want = Accounts {
        created: 7,
        existing: 2,
        refused: 1,
    };
    assert_eq!(r.connections.accounts, Some(want));
    let line = "7 created, 2 existed, 1 refused";
    let text = text::render(&r);
    assert!(text.contains(line), "{text}");
    assert!(html::render(&r).contains(line));
}

/// Reconnects that could not resume (Socket.IO without an offset) are in the
/// connections table and in a note saying what to do, in text and HTML.
#[test]
fn resumes_without_offset_show_in_connections_and_notes() {
    let r = Report::new(&fixture());
    assert_eq!(r.connections.resumes_without_offset, None);
    assert!(!r.notes.iter().any(|n| n.contains("offset")));
    let mut a = fixture();
    a.metrics.add(2, Counter::ResumesWithoutOffset, 3);
    let r = Report::new(&a);
    assert_eq!(r.connections.resumes_without_offset, Some(3));
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("no offset"))
        .expect("a note");
    assert!(note.starts_with("3 reconnect(s)") && note.contains("first message"));
    let text = text::render(&r);
    assert!(text.contains(present::RESUMES_WITHOUT_OFFSET), "{text}");
    assert!(text.contains(note.as_str()), "{text}");
    let page = html::render(&r);
    assert!(page.contains(present::RESUMES_WITHOUT_OFFSET));
}

#[test]
fn findings_are_computed_not_read_from_notes() {
    let old = fixture();
    let frozen: Vec<&String> = old
        .notes
        .iter()
        .filter(|n| findings::is_finding_note(n))
        .collect();
    assert_eq!(frozen.len(), 1, "the fixture carries the old sentence");
    let mut new = old.clone();
    new.notes.retain(|n| !findings::is_finding_note(n));
    let (old_text, new_text) = (
        text::render(&Report::new(&old)),
        text::render(&Report::new(&new)),
    );
    assert_eq!(old_text, new_text);
    assert_eq!(old_text.matches("was the bottleneck there").count(), 0);
    assert_eq!(old_text.matches("used all 2 cores").count(), 1);
    let report = Report::new(&new);
    assert_eq!(
        saturated(&report),
        vec![&Finding::Saturated {
            process: "msgstorm (generator)".to_owned(),
            pid: 10963,
            generator: true,
            embedded_server: true,
            ticked: false,
            cores: 2,
            from_sec: 0,
            cpu_pct: 692.52655,
        }]
    );
}

/// The saturation findings of `r`.
fn saturated(r: &Report) -> Vec<&Finding> {
    r.findings
        .iter()
        .filter(|f| matches!(f, Finding::Saturated { .. }))
        .collect()
}

#[test]
fn a_saturated_generator_with_the_embedded_server_blames_neither_side() {
    // The fixture's server ran embedded in the generator's process (its notes say so).
    let embedded = fixture();
    let text = text::render(&Report::new(&embedded));
    assert!(
        text.contains(
            "note: the generator process (pid 10963), which also ran the embedded reference \
             server, used all 2 cores from second 0 (693% of one core): neither side's capacity \
             can be read from this run; run `msgstorm serve` separately (its own cores or host) \
             and give the scenario a [target]\n"
        ),
        "{text}"
    );
    assert!(!text.contains("the generator itself"), "{text}");
    // Against a separate server, a saturated generator is the generator's own limit.
    let mut apart = fixture();
    apart.notes.clear();
    apart.target = "ws://10.0.0.5:8080/ws".to_owned();
    let report = Report::new(&apart);
    assert!(matches!(
        saturated(&report).as_slice(),
        [Finding::Saturated {
            embedded_server: false,
            ..
        }]
    ));
    assert!(text::render(&report).contains(
        "note: msgstorm (generator) (pid 10963) used all 2 cores from second 0 (693% of one \
         core): the generator itself was the bottleneck there; `wake_tick = \"1ms\"` in the \
         scenario takes more deliveries per generator CPU-second (fewer wake-ups, receive \
         times from the kernel), and shards on other hosts add cores\n"
    ));
    // A generator that already slept to a wake tick is not told to.
    apart.notes.push(format!(
        "{}1 ms (`wake_tick`): the generator's threads slept",
        crate::runtime::WAKE_TICK_NOTE_START
    ));
    let ticked = Report::new(&apart);
    assert!(matches!(
        saturated(&ticked).as_slice(),
        [Finding::Saturated { ticked: true, .. }]
    ));
    assert!(
        text::render(&ticked).contains("core): the generator itself was the bottleneck there\n")
    );
}

#[test]
fn send_lag_over_10_ms_is_a_finding() {
    let mut a = fixture();
    assert!(!Report::new(&a)
        .findings
        .iter()
        .any(|f| matches!(f, Finding::SendLag { .. })));
    for _ in 0..10_000 {
        a.metrics.record(1, Hist::SendLag, 25_000);
    }
    let report = Report::new(&a);
    let Some(Finding::SendLag { p99_us }) = report.findings.first() else {
        panic!("no send-lag finding: {:?}", report.findings);
    };
    assert!((25_000..25_100).contains(p99_us), "{p99_us}");
    assert!(text::render(&report).contains(
        "note: the generator fell behind its schedule: send lag p99 25.0 ms (latencies still \
         count from the due time)\n"
    ));
}

#[test]
fn saturation_is_judged_against_the_cores_of_the_shard_that_saw_it() {
    let mut a = fixture();
    let mut other = a.shards[0].clone();
    other.index = 1;
    other.cores = 8;
    a.shards.push(other);
    let mut target = a.processes[0].clone();
    target.name = "imserver".to_owned();
    target.pid = 42;
    target.generator = false;
    target.shard = 1;
    target.series = vec![(3, 650.0, 0), (4, 710.0, 0)];
    a.processes.push(target.clone());
    // 710% of one core is not 90% of 8 cores.
    let report = Report::new(&a);
    let found = saturated(&report);
    assert_eq!(found.len(), 1, "{found:?}");
    a.processes.last_mut().expect("pushed").series = vec![(3, 650.0, 0), (4, 730.0, 0)];
    let report = Report::new(&a);
    assert_eq!(
        saturated(&report).last(),
        Some(&&Finding::Saturated {
            process: "imserver".to_owned(),
            pid: 42,
            generator: false,
            embedded_server: false,
            ticked: false,
            cores: 8,
            from_sec: 4,
            cpu_pct: 730.0,
        })
    );
    assert!(text::render(&report).contains(
        "note: imserver (pid 42) used all 8 cores from second 4 (730% of one core): this \
         target process was the bottleneck there\n"
    ));
}

#[test]
fn checks_carry_numbers_and_units() {
    let report = Report::new(&fixture());
    let ack = report
        .checks
        .iter()
        .find(|c| c.key == "checks.ack_p99")
        .expect("the fixture checks ack_p99");
    assert_eq!(ack.metric, Measure::Check(CheckMetric::AckP99));
    assert_eq!(
        (ack.op, ack.bound, ack.unit),
        (Op::AtMost, 1.0, Unit::Micros)
    );
    assert_eq!(
        ack.value,
        Some(report.latency_us[&Hist::SendAck].p99 as f64)
    );
    assert!(!ack.passed);
    let login = report
        .checks
        .iter()
        .find(|c| c.key == "checks.min_login_success")
        .expect("the fixture checks login success");
    assert_eq!(
        (login.op, login.unit, login.value, login.passed),
        (Op::AtLeast, Unit::Ratio, Some(1.0), true)
    );
    assert_eq!(report.verdict, Verdict::Fail);
}

#[test]
fn a_check_without_samples_fails_with_its_reason() {
    let mut a = fixture();
    a.metrics = Metrics::new();
    a.acceptance = false;
    let report = Report::new(&a);
    let reason = |key: &str| {
        let c = report
            .checks
            .iter()
            .find(|c| c.key == key)
            .expect("checked");
        assert!(!c.passed && c.value.is_none(), "{c:?}");
        c.not_measured
    };
    assert_eq!(reason("checks.e2e_p99"), Some(NotMeasured::NoSamples));
    assert_eq!(reason("checks.ack_p99"), Some(NotMeasured::NoAcceptance));
    let text = text::render(&report);
    assert!(text.contains(" not measured: no samples |"), "{text}");
    assert!(text.contains(" not measured: the protocol has no acceptance |"));
}

#[test]
fn pseudo_checks_fail_a_run_without_logins_an_interrupted_run_and_engine_errors() {
    let mut a = fixture_passing();
    let report = Report::new(&a);
    assert_eq!(report.verdict, Verdict::Pass);
    assert!(report
        .checks
        .iter()
        .all(|c| c.origin != Origin::Run && c.passed));

    let mut m = Metrics::new();
    m.add(0, Counter::ConnectAttempts, 3);
    m.error(0, ErrorKind::ConnectRefused, || "refused".to_owned());
    m.error(2, ErrorKind::Engine, || "user 7 panicked: boom".to_owned());
    a.metrics = m;
    a.interrupted = true;
    let report = Report::new(&a);
    let run: Vec<(&str, Measure, f64, bool)> = report
        .checks
        .iter()
        .filter(|c| c.origin == Origin::Run)
        .map(|c| {
            (
                c.key.as_str(),
                c.metric,
                c.value.expect("measured"),
                c.passed,
            )
        })
        .collect();
    assert_eq!(
        run,
        [
            ("run.logins", Measure::Run(RunMetric::Logins), 0.0, false),
            (
                "run.completed",
                Measure::Run(RunMetric::Interrupted),
                1.0,
                false
            ),
            (
                "run.engine",
                Measure::Run(RunMetric::EngineErrors),
                1.0,
                false
            ),
        ]
    );
    assert_eq!(report.verdict, Verdict::Interrupted);
    let text = text::render(&report);
    assert!(text.starts_with("INTERRUPTED — "), "{text}");
    for (key, bound, measured) in [
        (
            "run.logins",
            "at least one user logs in",
            "none of 3 attempts: connect_refused (refused)",
        ),
        (
            "run.engine",
            "no user task of the generator fails",
            "1 failed: user 7 panicked: boom",
        ),
    ] {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| {key} ")))
            .unwrap_or_else(|| panic!("no row {key}:\n{text}"));
        assert!(row.contains(bound) && row.contains(measured), "{row}");
    }

    a.interrupted = false;
    let report = Report::new(&a);
    assert_eq!(report.verdict, Verdict::Fail);
    let text = text::render(&report);
    assert!(
        text.starts_with(
            "FAIL: run.logins: none of 3 attempts: connect_refused (refused); \
             run.engine: 1 failed: user 7 panicked: boom — "
        ),
        "{text}"
    );
}

/// The fixture as shard `index` of `count`.
fn shard(index: u32, count: u32) -> Artifact {
    let mut a = fixture();
    for s in &mut a.shards {
        (s.index, s.count) = (index, count);
    }
    for p in &mut a.processes {
        p.shard = index;
    }
    a
}

#[test]
fn a_result_missing_shards_is_incomplete_never_pass() {
    let mut lone = shard(0, 2);
    lone.checks = fixture_passing().checks;
    assert_eq!(Report::new(&fixture_passing()).verdict, Verdict::Pass);
    let report = Report::new(&lone);
    assert_eq!(report.verdict, Verdict::Incomplete);
    assert!(!report.passed());
    assert_eq!(report.missing_shards, [1]);
    assert!(
        little(&report).is_empty(),
        "the missing shard's requests explain the sweep: {:?}",
        report.findings
    );
    assert!(!little(&Report::new(&fixture())).is_empty());
    let c = report
        .checks
        .iter()
        .find(|c| c.origin == Origin::Run)
        .expect("a pseudo-check");
    assert_eq!(
        (c.key.as_str(), c.metric, c.bound, c.value, c.passed),
        (
            "run.shards",
            Measure::Run(RunMetric::Shards),
            2.0,
            Some(1.0),
            false
        )
    );
    let text = text::render(&report);
    assert!(
        text.starts_with("INCOMPLETE: 1 of 2 shards: missing shard 1; FAIL: run.shards — "),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("| run.shards "))
        .unwrap_or_else(|| panic!("no run.shards row:\n{text}"));
    assert!(
        row.contains("all 2 shards of the run") && row.contains("1 of 2 shards: missing shard 1"),
        "{row}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&json::render(&report).expect("encode")).expect("JSON");
    assert_eq!(json["verdict"], "incomplete");
    assert_eq!(json["missing_shards"], serde_json::json!([1]));

    // Shards 0 and 2 of 3 (the same ledger twice, so duplicates too): incomplete first,
    // every failure named.
    let mut m = shard(0, 3);
    m.merge(&shard(2, 3)).expect("0/3 and 2/3 merge");
    let report = Report::new(&m);
    assert_eq!(report.verdict, Verdict::Incomplete);
    let text = text::render(&report);
    assert!(
        text.starts_with(
            "INCOMPLETE: 2 of 3 shards: missing shard 1; FAIL: checks.max_duplicated: 2 \
             duplicated, e.g. stream 0 → user 0, seq 0: another copy via push (bound <= 0); \
             checks.ack_p99: p99 6.92 ms (bound <= 0.00 ms); run.shards — "
        ),
        "{text}"
    );

    // Interrupted and incomplete: incomplete says more.
    lone.interrupted = true;
    assert_eq!(Report::new(&lone).verdict, Verdict::Incomplete);
}

/// The fixture without its checks, but for the one duplicate its run had (allowed).
fn fixture_passing() -> Artifact {
    let mut a = fixture();
    a.checks.clear();
    a.checks.push(crate::artifact::CheckSpec {
        key: "checks.max_duplicated".to_owned(),
        metric: CheckMetric::Duplicated,
        op: Op::AtMost,
        value: 1.0,
    });
    a
}

/// The fixture's sweep (concurrency 4 then 16, whole seconds 3 and 5) with `replies` replies
/// of round trip `rt_us` in each step's second.
fn sweep_of(steps: [(u64, u64); 2]) -> Report {
    let mut a = fixture();
    let mut m = Metrics::new();
    for (sec, (replies, rt_us)) in [3, 5].into_iter().zip(steps) {
        m.add(sec, Counter::Replies, replies);
        for _ in 0..replies {
            m.record(sec, Hist::Request, rt_us);
        }
    }
    a.metrics = m;
    Report::new(&a)
}

/// The Little's-law findings of `r`.
fn little(r: &Report) -> Vec<&Finding> {
    r.findings
        .iter()
        .filter(|f| matches!(f, Finding::LittleBelow { .. } | Finding::LittleAbove { .. }))
        .collect()
}

#[test]
fn little_law_mismatch_in_a_sweep_is_a_finding() {
    // 4,000/s × 1 ms = 4 and 8,000/s × 2 ms = 16: the law holds, nothing to say.
    let holds = sweep_of([(4_000, 1_000), (8_000, 2_000)]);
    let rows: Vec<(u32, f64)> = holds
        .sweeps
        .first()
        .expect("a sweep")
        .rows
        .iter()
        .map(|r| (r.concurrency, r.little))
        .collect();
    assert_eq!(rows.len(), 2);
    for (c, l) in rows {
        assert!((l - f64::from(c)).abs() < 0.01 * f64::from(c), "{c} vs {l}");
    }
    assert!(little(&holds).is_empty(), "{:?}", holds.findings);
    // Within 15%: still nothing (16 × 1.14).
    assert!(little(&sweep_of([(4_000, 1_000), (8_000, 2_280)])).is_empty());

    // 2,000 users but 1,200 in flight, W3's case, scaled: 16 users, 9.6 in flight.
    let below = sweep_of([(4_000, 1_000), (8_000, 1_200)]);
    let found = little(&below);
    let [Finding::LittleBelow { steps }] = found.as_slice() else {
        panic!("{:?}", below.findings);
    };
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].concurrency, 16);
    assert!((steps[0].in_flight - 9.6).abs() < 0.1, "{steps:?}");
    let text = text::render(&below);
    assert!(
        text.contains(
            "note: Little's law does not hold at concurrency 16 (9.6 in flight): TPS × mean RT \
             is more than 15% below the concurrency, so fewer requests were in flight than \
             users. Likely causes: time between a reply and the user's next request"
        ),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&json::render(&below).expect("encode")).expect("JSON");
    let kinds: Vec<&str> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"little_below"), "{kinds:?}");

    // More in flight than users at concurrency 4 (6), fewer at 16 (8): both said.
    let both = sweep_of([(4_000, 1_500), (8_000, 1_000)]);
    let found = little(&both);
    let [Finding::LittleBelow { steps: b }, Finding::LittleAbove { steps: a }] = found.as_slice()
    else {
        panic!("{:?}", both.findings);
    };
    assert_eq!((b[0].concurrency, a[0].concurrency), (16, 4));
    assert!(text::render(&both).contains(
        "note: Little's law does not hold at concurrency 4 (6.0 in flight): TPS × mean RT is \
         more than 15% above the concurrency, so more requests were in flight than users. \
         Likely causes: requests overlapping"
    ));
}

/// Three messages of a sampled stream sent and expected by user 5, who received none.
fn three_sent_to_user_5(a: &mut Artifact) {
    let stream = (1_000_000..)
        .find(|&s| a.ledger.sampled(s))
        .expect("a sampled stream");
    for seq in 0..3 {
        a.ledger.sent(stream, seq);
    }
    a.ledger.expect(stream, 5);
}

#[test]
fn a_loss_bound_fails_while_messages_are_unverified_and_says_why() {
    let mut a = fixture();
    let lost_check = |r: &Report| {
        r.checks
            .iter()
            .find(|c| c.key == "checks.max_lost")
            .cloned()
            .expect("the fixture checks max_lost")
    };
    assert!(lost_check(&Report::new(&a)).passed);
    // Three messages of a sampled stream for a recipient the run never reached.
    three_sent_to_user_5(&mut a);
    a.ledger.unreached(5);
    let report = Report::new(&a);
    let d = &report.delivery;
    assert_eq!((d.lost, d.unverified), (0, 3), "{d:?}");
    let c = lost_check(&report);
    assert_eq!((c.value, c.passed), (Some(0.0), false), "{c:?}");
    let text = text::render(&report);
    assert!(
        text.contains("0 + 3 unverified (recipients never logged in)"),
        "{text}"
    );
    assert!(
        text.contains("| unverified (recipient never logged in) "),
        "{text}"
    );
}

/// The report (text and HTML) states each shard's clock offset and the uncertainty of latency
/// across shards, shows end-to-end latencies below it as `~0 ±…`, and names a shard whose
/// drift is unknown.
#[test]
fn clock_offsets_and_their_uncertainty_are_stated() {
    use crate::artifact::ClockSync;
    let mut a = fixture();
    assert!(
        Report::new(&a).clocks.is_none(),
        "no clocks without records"
    );
    let mut zero = a.shards[0].clone();
    zero.count = 2;
    zero.clock = Some(ClockSync {
        reference: "itself: shard 0 is the run's reference clock".into(),
        offset_us: 0,
        uncertainty_us: 0,
        end_offset_us: Some(0),
        end_uncertainty_us: Some(0),
    });
    let mut one = zero.clone();
    one.index = 1;
    one.clock = Some(ClockSync {
        reference: "shard 0 at g-0.g:7400".into(),
        offset_us: 30_000_000,
        uncertainty_us: 400_000,
        end_offset_us: Some(30_100_000),
        end_uncertainty_us: Some(300_000),
    });
    a.shards = vec![zero, one.clone()];
    let r = Report::new(&a);
    let c = r.clocks.as_ref().expect("clocks");
    assert_eq!(c.reference, "shard 0 at g-0.g:7400");
    // Shard 1's times are within 400 ms + 100 ms of drift; shard 0's are exact.
    assert_eq!(c.uncertainty_us, Some(500_000));
    assert_eq!(c.shards[1].drift_us, Some(100_000));
    let shown = text::render(&r);
    assert!(
        shown.contains("shard 1: offset +30000.00 ms ±400.00 ms, drift +100.00 ms"),
        "{shown}"
    );
    assert!(shown.contains("known to ±500.00 ms"), "{shown}");
    let e2e = shown
        .lines()
        .find(|l| l.contains("end-to-end"))
        .expect("an end-to-end row");
    assert!(e2e.contains("~0 ±500.00 ms"), "{e2e}");
    // The HTML report's latency table applies the same rule.
    let page = html::render(&r);
    let row = page
        .split("<tr>")
        .find(|row| row.starts_with("<td>end-to-end"))
        .expect("an end-to-end row in the HTML latency table");
    assert!(row.contains("~0 ±500.00 ms"), "{row}");
    let json = json::render(&r).expect("encode");
    assert!(json.contains("\"uncertainty_us\": 500000"), "{json}");

    // Without a final estimate the drift is unknown: named, its cross-shard latencies left
    // out, and the bound is that of the shards left (shard 0 alone: exact).
    if let Some(c) = one.clock.as_mut() {
        c.end_offset_us = None;
        c.end_uncertainty_us = None;
    }
    a.shards[1] = one;
    let e2e_before = a.metrics.hist(Hist::EndToEnd).len();
    let mut cross = 0;
    for us in [900, 1_200, 40_000_000] {
        a.metrics.record(0, Hist::EndToEnd, us);
        a.metrics.record_cross(0, 1, us);
        cross += 1;
    }
    a.metrics.record(0, Hist::EndToEnd, 2_000);
    a.metrics.record_cross(1, 0, 2_000);
    cross += 1;
    let r = Report::new(&a);
    let c = r.clocks.as_ref().expect("clocks");
    assert_eq!((c.uncertainty_us, c.unknown.clone()), (Some(0), vec![1]));
    assert_eq!(c.excluded, cross);
    assert_eq!(r.latency_us[&Hist::EndToEnd].count, e2e_before);
    assert!(r.latency_us[&Hist::EndToEnd].max < 40_000_000);
    let shown = text::render(&r);
    assert!(
        shown.contains("drift unknown")
            && shown.contains("shard(s) 1 have no clock estimate at the end")
            && shown.contains("their 4 cross-shard end-to-end latencies are left out"),
        "{shown}"
    );
}

#[test]
fn the_target_by_phase_has_its_bandwidth_cpu_and_memory() {
    let mut a = fixture();
    let last = a.metrics.seconds().map(|s| s.sec).max().unwrap_or(0) + 2;
    a.processes.push(crate::monitor::ProcUsage {
        name: "server".to_owned(),
        pid: 7,
        series: (0..=last).map(|s| (s, 50.0, 1_000_000)).collect(),
        // 1,000 B/s in, 3,000 B/s out, steadily.
        tcp: (0..=last)
            .map(|s| (s, u64::from(s) * 1_000, u64::from(s) * 3_000))
            .collect(),
        ..Default::default()
    });
    // A second shard watching the same server adds nothing.
    let mut again = a.processes[a.processes.len() - 1].clone();
    again.shard = 1;
    a.processes.push(again);
    let r = Report::new(&a);
    let phases = super::phases::of(&r);
    let messages = phases
        .iter()
        .find(|p| p.name == "messages")
        .expect("a phase with messages");
    assert_eq!(messages.in_bytes_per_s, Some(1_000.0));
    assert_eq!(messages.out_bytes_per_s, Some(3_000.0));
    assert_eq!(messages.cpu_pct, Some(50.0));
    assert_eq!(messages.rss_bytes, Some(1_000_000));
    assert!(messages.sent_per_s > 0.0);
    let text = text::render(&r);
    assert!(text.contains("| messages "), "{text}");
    assert!(text.contains("0.01 Mbit/s"), "{text}");
    // Without a watched target there is no such table.
    assert!(super::phases::of(&Report::new(&fixture())).is_empty());
}

/// The fixture with a fresh ledger of one stream (stream 7, user 1 → user 2) on which `sent`
/// messages went out and the first `refused` were refused, every accepted one pushed; and
/// metrics counting those sends.
fn built_in_fixture(sent: u64, refused: u64) -> Artifact {
    let mut a = fixture();
    a.checks.clear();
    let mut l = crate::ledger::Ledger::new(&crate::scenario::LedgerOpts {
        sample: 1.0,
        late_after: std::time::Duration::from_secs(5),
        examples: 3,
        verify_sync: true,
        bounds_us: Vec::new(),
        wave_us: Vec::new(),
    });
    l.expect(7, 2);
    for seq in 0..sent {
        if seq < refused {
            l.refused(7, seq);
        } else {
            l.sent(7, seq);
            l.received(2, 7, seq, 1_000, crate::ledger::Via::Push, false);
        }
    }
    a.ledger = l;
    let mut m = Metrics::new();
    m.add(0, Counter::ConnectAttempts, 2);
    m.add(0, Counter::LoginOk, 2);
    m.add(0, Counter::Sent, sent);
    m.add(0, Counter::Accepted, sent - refused);
    m.add(0, Counter::Refused, refused);
    for _ in 0..refused {
        m.error(0, ErrorKind::SendFailed, || {
            "unknown type `bogus`".to_owned()
        });
    }
    a.metrics = m;
    a
}

fn outcome<'a>(r: &'a Report, key: &str) -> &'a super::checks::CheckOutcome {
    r.checks
        .iter()
        .find(|c| c.key == key)
        .unwrap_or_else(|| panic!("no check {key}: {:?}", r.checks))
}

#[test]
fn built_in_checks_apply_without_a_checks_table_and_pass_a_run_that_did_the_work() {
    let r = Report::new(&built_in_fixture(100, 0));
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.checks);
    let keys: Vec<(&str, Origin)> = r
        .checks
        .iter()
        .map(|c| (c.key.as_str(), c.origin))
        .collect();
    assert_eq!(
        keys,
        [
            ("checks.min_login_success", Origin::BuiltIn),
            ("checks.max_lost", Origin::BuiltIn),
            ("checks.max_duplicated", Origin::BuiltIn),
            ("checks.max_reordered", Origin::BuiltIn),
            ("checks.max_corrupted", Origin::BuiltIn),
            ("checks.min_verified", Origin::BuiltIn),
            ("checks.max_send_error_rate", Origin::BuiltIn),
            ("checks.max_protocol_errors", Origin::BuiltIn),
            ("checks.max_repaired_rate", Origin::BuiltIn),
            ("checks.max_foreign", Origin::BuiltIn),
            ("checks.max_join_failures", Origin::BuiltIn),
        ]
    );
    assert_eq!(outcome(&r, "checks.min_verified").value, Some(1.0));
    let text = text::render(&r);
    assert!(text.starts_with("PASS (11 checks) — "), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("| checks.min_verified "))
        .unwrap_or_default();
    for cell in ["built-in", ">= 90.000%", "100.000%", "pass"] {
        assert!(row.contains(cell), "{row}");
    }
}

#[test]
fn refused_sends_fail_the_run_with_the_reason_in_the_first_line() {
    let r = Report::new(&built_in_fixture(100, 80));
    assert_eq!(r.verdict, Verdict::Fail);
    let first = text::render(&r)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        first.starts_with(
            "FAIL: checks.min_verified: 20 of 100 planned deliveries verified (20.00%): 80 to \
             sends refused or never confirmed, e.g. send_failed: \"unknown type `bogus`\" \
             (bound >= 90.000%); checks.max_send_error_rate: 80.000% of sends refused or \
             failed, e.g. send_failed: \"unknown type `bogus`\" (bound <= 1.000%) — "
        ),
        "{first}"
    );
    // Every format carries the reason and where the check came from.
    let json = json::render(&r).expect("encode");
    assert!(json.contains(r#""origin": "built_in""#), "{json}");
    assert!(
        json.contains(r#""reason": "80.000% of sends refused or failed"#),
        "{json}"
    );
    let html = html::render(&r);
    assert!(
        html.contains("FAIL: 80.000% of sends refused or failed"),
        "{html}"
    );
}

#[test]
fn a_relaxed_built_in_check_says_so_and_holds_its_new_bound() {
    let mut a = built_in_fixture(100, 80);
    for (key, metric, op, value) in [
        (
            "checks.max_send_error_rate",
            CheckMetric::SendErrorRate,
            Op::AtMost,
            0.9,
        ),
        (
            "checks.min_verified",
            CheckMetric::Verified,
            Op::AtLeast,
            0.1,
        ),
    ] {
        a.checks.push(crate::artifact::CheckSpec {
            key: key.to_owned(),
            metric,
            op,
            value,
        });
    }
    let r = Report::new(&a);
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.checks);
    let c = outcome(&r, "checks.max_send_error_rate");
    assert_eq!((c.origin, c.default_bound), (Origin::Relaxed, Some(0.01)));
    assert_eq!(
        r.checks.len(),
        11,
        "a written built-in is not applied twice"
    );
    let text = text::render(&r);
    assert!(text.contains(" relaxed (built-in <= 1.000%) |"), "{text}");
    assert!(text.contains(" relaxed (built-in >= 90.000%) |"), "{text}");
}

#[test]
fn frames_not_understood_and_foreign_bodies_fail_past_their_budget() {
    let mut a = built_in_fixture(10, 0);
    for _ in 0..10 {
        a.metrics
            .error(0, ErrorKind::Protocol, || "unmatched frame: {}".to_owned());
    }
    assert_eq!(
        Report::new(&a).verdict,
        Verdict::Pass,
        "10 frames are within budget"
    );
    a.metrics
        .error(0, ErrorKind::Protocol, || "unmatched frame: {}".to_owned());
    a.metrics.error(0, ErrorKind::Foreign, || {
        "body not from this run: hi".to_owned()
    });
    let r = Report::new(&a);
    let failed: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(failed, ["checks.max_protocol_errors", "checks.max_foreign"]);
    let reason = outcome(&r, "checks.max_foreign")
        .reason
        .clone()
        .unwrap_or_default();
    assert!(
        reason.starts_with("1 bodies not from this run and 0 deliveries to recipients"),
        "{reason}"
    );
}

#[test]
fn pushes_found_only_by_the_final_sync_fail_the_run() {
    let mut a = built_in_fixture(0, 0);
    for seq in 0..100 {
        a.ledger.sent(7, seq);
        let via = if seq < 98 {
            crate::ledger::Via::Repair
        } else {
            crate::ledger::Via::Push
        };
        a.ledger.received(2, 7, seq, 1_000, via, false);
    }
    a.metrics.add(0, Counter::Sent, 100);
    let r = Report::new(&a);
    let c = outcome(&r, "checks.max_repaired_rate");
    assert!(!c.passed && c.value == Some(0.98), "{c:?}");
    assert!(
        c.reason
            .as_deref()
            .unwrap_or_default()
            .starts_with("98 of 100 deliveries arrived only through the final verification sync"),
        "{c:?}"
    );
}

#[test]
fn sends_due_while_nothing_went_out_are_nothing_verified() {
    let mut a = built_in_fixture(0, 0);
    a.metrics.add(0, Counter::Dropped, 50);
    let r = Report::new(&a);
    let c = outcome(&r, "checks.min_verified");
    assert_eq!((c.value, c.passed), (Some(0.0), false));
    assert!(
        c.reason
            .as_deref()
            .unwrap_or_default()
            .starts_with("nothing verified: 50 sends were due"),
        "{c:?}"
    );
}

/// A running run's report: `built_in_fixture`'s metrics with the ledger still empty (as
/// the live page has it), a loss bound and a duplicate bound.
fn live_report() -> Report {
    let mut a = built_in_fixture(100, 0);
    a.ledger = crate::ledger::Ledger::new(&crate::scenario::LedgerOpts {
        sample: 1.0,
        late_after: std::time::Duration::from_secs(5),
        examples: 3,
        verify_sync: true,
        bounds_us: Vec::new(),
        wave_us: Vec::new(),
    });
    for (key, metric) in [
        ("checks.max_lost", CheckMetric::Lost),
        ("checks.max_duplicated", CheckMetric::Duplicated),
    ] {
        a.checks.push(crate::artifact::CheckSpec {
            key: key.to_owned(),
            metric,
            op: Op::AtMost,
            value: 0.0,
        });
    }
    let progress = super::live::Progress {
        phase: "traffic".to_owned(),
        running: crate::ledger::Running {
            delivered: 90,
            duplicated: 2,
            ..Default::default()
        },
        overdue: 10,
        elapsed: std::time::Duration::from_secs_f64(a.duration_s),
    };
    super::live::report(&a, &progress)
}

#[test]
fn a_running_run_shows_its_checks_as_they_stand_and_leaves_losses_pending() {
    let r = live_report();
    let live = r.live.as_ref().expect("a live view");
    assert_eq!(
        live.pending,
        [
            "checks.max_lost",
            "checks.min_verified",
            "checks.max_repaired_rate"
        ]
    );
    assert_eq!((live.phase.as_str(), live.overdue), ("traffic", 10));
    // Counts already certain stand as they are: two duplicates fail a bound of 0 now.
    let dup = outcome(&r, "checks.max_duplicated");
    assert!(!dup.passed && dup.value == Some(2.0), "{dup:?}");
    assert!(outcome(&r, "checks.max_send_error_rate").passed);
    assert_eq!(r.delivery.delivered, 90);

    let page = html::render(&r);
    for shown in [
        "RUNNING — traffic",
        "<main data-live=\"traffic\">",
        "<b id=\"n-overdue\">10</b> overdue",
        "<b id=\"n-delivered\">90</b> delivered",
        "pending: judged when the run ends",
        "FAIL so far: ",
        "pass so far",
        "Delivery so far",
        "data-refreshes",
    ] {
        assert!(page.contains(shown), "{shown} is not on the live page");
    }
    assert!(
        !page.contains("id=\"n-lost\""),
        "no loss count while running"
    );

    // A finished run's page neither refreshes nor says it is running.
    let done = html::render(&Report::new(&fixture()));
    for live_only in ["data-live", "data-refreshes", "RUNNING", "so far"] {
        assert!(
            !done.contains(live_only),
            "{live_only} on a finished run's page"
        );
    }
    assert!(done.contains("id=\"n-lost\""));
}

#[test]
fn a_live_page_has_every_chart_from_its_first_second_empty_until_samples_come() {
    // The first second of traffic is not over: no series, no latency recorded yet.
    let mut a = built_in_fixture(0, 0);
    a.metrics = Metrics::new();
    let progress = super::live::Progress {
        phase: "traffic".to_owned(),
        running: crate::ledger::Running::default(),
        overdue: 0,
        elapsed: std::time::Duration::from_millis(300),
    };
    let r = super::live::report(&a, &progress);
    assert!(r.latency_us.is_empty() && r.series.iter().all(|s| s.e2e.count == 0));
    let page = html::render(&r);
    for chart in ["users", "messages", "e2e", "percentiles"] {
        assert!(
            page.contains(&format!("<svg id=\"{chart}\"")),
            "chart {chart} is not on the live page in its first second"
        );
    }
    assert!(page.contains("no samples"));
    // A finished run without samples keeps no empty latency charts.
    a.duration_s = 0.3;
    let done = html::render(&Report::of(&a, crate::ledger::Delivery::default(), None));
    assert!(!done.contains("<svg id=\"e2e\""));
}

#[test]
fn delivery_bounds_follow_what_the_drivers_protocol_promises() {
    let mut a = built_in_fixture(100, 0);
    let keys = |a: &Artifact| -> Vec<String> {
        Report::new(a)
            .checks
            .iter()
            .map(|c| c.key.clone())
            .collect()
    };
    for key in [
        "checks.max_lost",
        "checks.max_reordered",
        "checks.max_duplicated",
    ] {
        assert!(keys(&a).iter().any(|k| k == key), "{key} is built in");
    }
    // MQTT QoS 0: at most once, no order across reconnects.
    a.unpromised = vec![CheckMetric::Lost, CheckMetric::Reordered];
    let k = keys(&a);
    assert!(!k
        .iter()
        .any(|k| k == "checks.max_lost" || k == "checks.max_reordered"));
    assert!(k.iter().any(|k| k == "checks.max_duplicated"));
    // A scenario may still ask for them.
    a.checks.push(crate::artifact::CheckSpec {
        key: "checks.max_lost".to_owned(),
        metric: CheckMetric::Lost,
        op: Op::AtMost,
        value: 0.0,
    });
    assert!(keys(&a).iter().any(|k| k == "checks.max_lost"));
}

#[test]
fn a_running_run_leaves_the_sends_made_of_those_due_to_its_end() {
    // 100 of the 10,000 sends the schedule makes due are made: most are not due yet.
    let mut a = built_in_fixture(100, 0);
    a.metrics.add(0, Counter::Due, 10_000);
    let done = Report::new(&a);
    assert!(done.generator_fell_behind(), "{:?}", done.checks);
    let progress = super::live::Progress {
        phase: "traffic".to_owned(),
        running: crate::ledger::Running::default(),
        overdue: 0,
        elapsed: std::time::Duration::from_secs(1),
    };
    let live = super::live::report(&a, &progress);
    assert!(!live.generator_fell_behind(), "{:?}", live.checks);
    let pending = &live.live.as_ref().expect("a live view").pending;
    assert!(
        pending.iter().any(|k| k == "checks.min_offered"),
        "{pending:?}"
    );
}

#[test]
fn built_in_checks_bound_their_metric_in_the_catalogs_direction() {
    for b in &super::checks::BUILT_IN {
        let better = match b.op {
            Op::AtMost => crate::vocab::Better::Lower,
            Op::AtLeast => crate::vocab::Better::Higher,
        };
        assert_eq!(b.metric.entry().better, better, "{}", b.key);
    }
}

/// A message lost by a server that acknowledged every send is one it lost after telling its
/// sender it had it: the failed loss check says so.
#[test]
fn a_loss_after_every_send_was_acknowledged_says_so() {
    let mut a = fixture();
    three_sent_to_user_5(&mut a);
    let sent = a.metrics.count(Counter::Sent);
    let accepted = a.metrics.count(Counter::Accepted);
    a.metrics.add(0, Counter::Accepted, sent - accepted);
    let report = Report::new(&a);
    let c = report
        .checks
        .iter()
        .find(|c| c.key == "checks.max_lost")
        .expect("the fixture checks max_lost");
    assert!(!c.passed, "{c:?}");
    let text = text::render(&report);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains("3 lost") && first.contains("the server acknowledged every send"),
        "{first}"
    );
}
