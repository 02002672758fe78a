//! `[[chaos]]` steps against real targets: msgstorm's proxy slowing the network by a known
//! delay, the reference server paused, killed and restarted on its data, and connections
//! cut under traffic — each measured from the ledger and the per-second series, as the
//! report states it.

use msgstorm::artifact::Artifact;
use msgstorm::metrics::{Counter, Hist};
use msgstorm::report::present::thousands;
use msgstorm::report::series::SecondPoint;
use msgstorm::report::Report;

use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::ServeConfig;

use crate::common::run::{msgstorm, run_text, target as run_target, Ran, Work, BIN};
use crate::common::{config, start, ChildServer, SECRET};

/// Direct traffic at `rate` for `secs` seconds among 40 users, then `rest`.
fn scenario(target: &str, rate: u32, secs: u32, rest: &str) -> String {
    format!(
        "name = \"chaos\"\nseed = 3\ndrain = \"3s\"\n\n{target}\n\
         [population]\nusers = 40\nlogin_rate = 400\n\n\
         [[traffic]]\nname = \"chat\"\nkind = \"direct\"\nsenders = 20\nreceivers = 20\n\
         rate = {rate}\nduration = \"{secs}s\"\n\n{rest}"
    )
}

/// The target tables of a child server.
fn target(server: &ChildServer) -> String {
    format!(
        "[target]\nurl = \"{}\"\n\n[target.auth]\nsecret = \"{SECRET}\"\n",
        server.ws_url()
    )
}

/// The seconds of the series entirely inside `from..to` (seconds from the run's start).
fn inside(series: &[SecondPoint], from: f64, to: f64) -> Vec<&SecondPoint> {
    series
        .iter()
        .filter(|p| f64::from(p.sec) >= from && f64::from(p.sec) + 1.0 <= to && p.e2e.count > 0)
        .collect()
}

/// The run's report, its one chaos step checked to have done its work.
fn report(ran: &Ran, artifact: &Artifact) -> Report {
    let r = Report::new(artifact);
    assert_eq!(r.chaos.len(), 1, "{ran}");
    assert!(
        r.chaos[0].step.ok,
        "the step did its work: {:?}\n{ran}",
        r.chaos[0].step
    );
    assert!(
        ran.stdout.contains("| chaos step"),
        "the text report lists the step\n{ran}"
    );
    let d = &r.chaos[0].during;
    let line = format!(
        "chaos[0]: due during it delivered {}, lost {}, duplicated {}, reordered {}, late {}",
        thousands(d.delivered),
        thousands(d.lost),
        thousands(d.duplicated),
        thousands(d.reordered),
        thousands(d.late)
    );
    assert!(
        d.delivered + r.chaos[0].after.delivered > 0 && ran.stdout.contains(&line),
        "the text report gives what was due during the step: {line}\n{ran}"
    );
    r
}

/// 100 ms of delay through msgstorm's proxy for 10 s: end-to-end latency rises by 100 ms
/// (half each way, so a message through the server takes 100 ms longer) inside the window,
/// and falls back after it; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_step_adds_its_delay_inside_its_window_only() {
    let work = Work::new();
    let text = scenario(
        "",
        100,
        15,
        "[[chaos]]\naction = \"delay\"\nat = \"2s\"\nduration = \"10s\"\ndelay = \"100ms\"\n\n\
         [checks]\nmax_lost = 0\nmax_recovery = \"2s\"\n",
    );
    let (ran, artifact) = run_text(&work, &text).await;
    ran.expect_code(0);
    let r = report(&ran, &artifact);
    let (c, traffic) = (&r.chaos[0], artifact.traffic_started_s.expect("traffic"));
    let median = |secs: Vec<&SecondPoint>| {
        let mut v: Vec<u64> = secs.iter().map(|p| p.e2e.p50).collect();
        v.sort_unstable();
        assert!(!v.is_empty(), "seconds with deliveries\n{ran}");
        v[v.len() / 2] as f64 / 1000.0
    };
    let before = median(inside(&r.series, traffic, c.effect.from_s));
    let during = median(inside(&r.series, c.effect.from_s, c.effect.to_s));
    let after = median(inside(&r.series, c.effect.to_s + 0.5, traffic + 15.0));
    assert!(
        (during - before - 100.0).abs() <= 10.0,
        "e2e p50 {before:.1} ms before, {during:.1} ms during: +100 ms ± 10\n{ran}"
    );
    assert!(
        after < before + 10.0,
        "back after the window: {after:.1} ms\n{ran}"
    );
    assert_eq!(artifact.ledger.summary().lost, 0, "{ran}");
    assert!(c.effect.recovery_s.is_some(), "{ran}");
    let html = std::fs::read_to_string(work.path("out").join("report.html")).expect("report.html");
    assert!(
        html.matches("<rect class=\"mark\"").count() >= 3
            && html.contains("<title>chaos[0] delay</title>"),
        "the step is marked on the time charts"
    );
    // `compare` puts each step's figures side by side.
    let result = work.path("out").join("result.json").display().to_string();
    let compared = msgstorm(&["compare", &result, &result, "--format", "json"]).await;
    compared.expect_code(0);
    for row in [
        "\"chaos[0].e2e_p99\"",
        "\"chaos[0].recovery\"",
        "\"chaos[0].lost\"",
    ] {
        assert!(compared.stdout.contains(row), "{row}\n{compared}");
    }
}

/// The target paused (SIGSTOP) for 2 s: the longest delivery took about 2 s, and about
/// rate × 2 s messages waited — counted from their due times, open loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_target_delays_what_was_due_while_it_slept() {
    let server = ChildServer::start(&[]);
    let work = Work::new();
    // Named through its `[monitor]` entry: the report shows the paused server's CPU too.
    let rest = format!(
        "[monitor]\npids = [{pid}]\n\n\
         [[chaos]]\naction = \"pause\"\nmonitor = {pid}\nat = \"2s\"\nduration = \"2s\"\n\n\
         [checks]\nmax_lost = 0\n",
        pid = server.pid()
    );
    let (ran, artifact) = run_text(&work, &scenario(&target(&server), 100, 6, &rest)).await;
    ran.expect_code(0);
    let r = report(&ran, &artifact);
    assert_eq!(r.chaos[0].step.pids, vec![server.pid()], "{ran}");
    assert!(
        artifact.processes.iter().any(|p| p.pid == server.pid()),
        "the monitor watched the paused server\n{ran}"
    );
    let e2e = artifact.metrics.hist(Hist::EndToEnd);
    let max_ms = e2e.max() as f64 / 1000.0;
    assert!(
        (1_900.0..2_600.0).contains(&max_ms),
        "the longest delivery waited the pause: {max_ms:.0} ms\n{ran}"
    );
    // The sends due in the pause (~200) waited; so do a few due just after it, while the
    // woken server works off the backlog (up to ~1 s of them on a loaded machine: 254 in one
    // CI run with both cores busy).
    let waited = e2e.count_between(50_000, u64::MAX);
    assert!(
        (150..=300).contains(&waited),
        "about 100/s × 2 s messages waited: {waited}\n{ran}"
    );
}

/// The reference server killed (-9) and restarted on its data directory mid-run: no
/// acknowledged message is lost, every send is counted exactly (delivered, or refused and
/// expected nowhere), and the time to recover is stated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_and_restarted_server_loses_no_acknowledged_message() {
    let data = tempfile::tempdir().expect("data dir");
    let data_arg = data.path().display().to_string();
    let server = ChildServer::start(&["--data", &data_arg]);
    let work = Work::new();
    let start = format!(
        "{BIN} serve --listen {} --secret {SECRET} --data {data_arg}",
        server.addr
    );
    let rest = format!(
        "[[chaos]]\naction = \"restart\"\npid = {}\nat = \"2s\"\nstart = \"{start}\"\n\n\
         [checks]\nmax_lost = 0\nmax_duplicated = 0\nmax_recovery = \"20s\"\n\
         max_send_error_rate = 0.2\n",
        server.pid()
    );
    // The kill is the point: the sends in flight when the server dies fail (more of them on
    // a loaded machine), so the scenario allows them; none acknowledged may be lost. How
    // long recovery takes is stated, not judged tightly: a debug server's start and the
    // users' reconnect backoff (up to 3.2 s) took over 4 s on a loaded box, so the traffic
    // goes on 8 s past the kill for recovery to be seen.
    let (ran, artifact) = run_text(&work, &scenario(&target(&server), 100, 10, &rest)).await;
    let r = Report::new(&artifact);
    if let Some(&new) = r.chaos.first().and_then(|c| c.step.pids.get(1)) {
        let _ = std::process::Command::new("kill")
            .arg(new.to_string())
            .status();
    }
    ran.expect_code(0);
    let r = report(&ran, &artifact);
    let step = &r.chaos[0].step;
    assert_eq!(step.pids[0], server.pid(), "{ran}");
    assert!(step.back_after_s.is_some_and(|s| s < 20.0), "{step:?}");
    let d = artifact.ledger.summary();
    assert_eq!((d.lost, d.duplicated), (0, 0), "{ran}");
    // Every send delivered or refused, none unaccounted. A send whose acceptance the kill
    // cut off counts as refused, yet the server may have stored it before it died: then
    // it arrives by sync too, and counts in both.
    assert!(
        d.delivered + d.refused >= d.sent && d.delivered >= d.expected,
        "every send delivered or refused, none unaccounted\n{ran}"
    );
    assert!(
        artifact.metrics.count(Counter::Disconnects) > 0,
        "the kill dropped the users\n{ran}"
    );
    assert!(r.chaos[0].effect.recovery_s.is_some(), "{ran}");
}

/// 30% of the users' connections cut (reset) under traffic: each cut user reconnects and
/// fetches what it missed; nothing is lost; the storm's size is in the step's record and
/// in the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_users_reconnect_and_miss_nothing() {
    let work = Work::new();
    let text = scenario(
        "",
        100,
        6,
        "[[chaos]]\naction = \"cut\"\nat = \"2s\"\nfraction = 0.3\n\n\
         [checks]\nmax_lost = 0\nmax_duplicated = 0\n",
    );
    let (ran, artifact) = run_text(&work, &text).await;
    ran.expect_code(0);
    let r = report(&ran, &artifact);
    let step = &r.chaos[0].step;
    assert_eq!(step.cut, Some((12, 40)), "30% of 40: {ran}");
    assert!(
        step.back_after_s.is_some_and(|s| s < 5.0),
        "the storm's length is measured: {step:?}"
    );
    assert!(
        ran.stdout.contains("chaos[0]: a reconnect storm of 12")
            || ran.stdout.contains("(a reconnect storm of 12)"),
        "the storm is told, also when the users were back within the second\n{ran}"
    );
    assert_eq!(artifact.metrics.count(Counter::Disconnects), 12, "{ran}");
    assert_eq!(
        artifact.metrics.count(Counter::LoginOk),
        52,
        "40 logins, then the 12 cut users again\n{ran}"
    );
    let d = artifact.ledger.summary();
    assert_eq!((d.lost, d.duplicated), (0, 0), "{ran}");
}

/// Against a server that drops and duplicates pushes throughout, every loss and duplicate
/// is counted once in the span its message was due in: the spans add up to the run's
/// totals, each step's row shows its share, and a per-step bound fails the run naming the
/// step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losses_are_counted_in_the_step_they_were_due_in() {
    let server = start(ServeConfig {
        faults: FaultSpec::parse("drop=0.05,dup=0.05").expect("fault spec"),
        fault_seed: Some(7),
        ..config()
    })
    .await;
    let work = Work::new();
    let text = scenario(
        &run_target(&server),
        100,
        6,
        "[ledger]\nverify_sync = false\n\n\
         [[chaos]]\naction = \"delay\"\nat = \"2s\"\nduration = \"2s\"\ndelay = \"20ms\"\n\
         max_lost = 0\n",
    );
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    ran.expect_code(1);
    assert!(ran.verdict().contains("chaos[0].max_lost"), "{ran}");
    let d = artifact.ledger.summary();
    let spans = artifact.ledger.spans(&[2_000_000]);
    assert_eq!(spans.len(), 3, "before, during, after the step");
    let sum = |f: fn(&msgstorm::ledger::SpanDelivery) -> u64| spans.iter().map(f).sum::<u64>();
    assert!(d.lost > 0 && d.duplicated > 0, "{ran}");
    assert_eq!(sum(|s| s.lost), d.lost, "{ran}");
    assert_eq!(sum(|s| s.duplicated), d.duplicated, "{ran}");
    assert_eq!(sum(|s| s.delivered), d.delivered, "{ran}");
    let r = Report::new(&artifact);
    let row = &r.chaos[0];
    assert_eq!(
        (row.during.lost, row.after.lost),
        (spans[1].lost, spans[2].lost),
        "{ran}"
    );
    assert!(
        row.during.lost > 0,
        "5% of 200 messages due in the window: {ran}"
    );
}

/// An `exec` step keeps its command's exit code and output; a command that fails is a step
/// that did not do its work, and the run cannot pass (`run.chaos`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_exec_step_is_kept_and_fails_the_run() {
    let work = Work::new();
    let text = scenario(
        "",
        50,
        3,
        "[[chaos]]\naction = \"exec\"\nat = \"1s\"\ncommand = \"echo from-the-step; exit 3\"\n\n\
         [checks]\nmax_lost = 0\n",
    );
    let (ran, artifact) = run_text(&work, &text).await;
    ran.expect_code(1);
    assert!(ran.verdict().contains("run.chaos"), "{ran}");
    let step = &artifact.chaos[0];
    assert_eq!(step.exit_code, Some(3), "{step:?}");
    assert_eq!(step.output.as_deref(), Some("from-the-step\n"), "{step:?}");
    assert!(
        !step.ok && step.outcome.starts_with("exit code 3"),
        "{step:?}"
    );
    assert!(ran.stdout.contains("FAILED: exit code 3"), "{ran}");
}

/// An `exec` step whose command never ends (`sleep 300`) does not hold a stopped run: the
/// first SIGTERM ends the run within its drain plus 2 s, the command is killed with its
/// process group, and the step says so in the interrupted result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_run_whose_exec_step_never_ends() {
    use crate::cli::signals::{interrupt, sigterm, SLACK};
    let work = Work::new();
    let file = work.path("exec.pid");
    let text = scenario(
        "",
        50,
        60,
        &format!(
            "[[chaos]]\naction = \"exec\"\nat = \"1s\"\ncommand = \"echo $$ > {}; exec sleep 300\"\n",
            file.display()
        ),
    );
    let started = async {
        super::process::pid_in(&file).await;
    };
    let (code, took, out, a) = interrupt(&text, &[], started, false, sigterm).await;
    assert_eq!(code, 1, "an interrupted run fails\n{out}");
    assert!(
        took < std::time::Duration::from_secs(3 + 2) + SLACK,
        "exit {took:?} after SIGTERM, drain is 3 s\n{out}"
    );
    assert!(a.interrupted, "{out}");
    let step = &a.chaos[0];
    assert!(
        step.output
            .as_deref()
            .is_some_and(|o| o.contains("when the run ended")),
        "{step:?}"
    );
}
