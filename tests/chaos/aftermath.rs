//! What a step leaves behind, told truly: a bandwidth limit ends with its window (what it
//! queued passes at once), and what a restart destroyed — acknowledged, not yet delivered —
//! shows on the restart's own row and fails its `max_lost`.

use msgstorm::metrics::Hist;
use msgstorm::report::Report;

use crate::common::run::{run_text, Work, BIN};
use crate::common::{ChildServer, SECRET};

/// Direct traffic at 100/s for `secs` seconds among 40 users against `target` (the
/// embedded server when empty), then `rest`.
fn scenario(target: &str, secs: u32, rest: &str) -> String {
    format!(
        "name = \"aftermath\"\nseed = 5\ndrain = \"3s\"\n\n{target}\n\
         [population]\nusers = 40\nlogin_rate = 400\n\n\
         [[traffic]]\nname = \"chat\"\nkind = \"direct\"\nsenders = 20\nreceivers = 20\n\
         rate = 100\nduration = \"{secs}s\"\n\n{rest}"
    )
}

/// 300 B/s per connection for 2 s queues more than it lets through (each sender writes
/// ~750 B/s); when the window ends the link runs at full speed again, so no delivery waits
/// much longer than the window, traffic after it has its normal latency, and the run
/// passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bandwidth_limit_ends_with_its_window() {
    let work = Work::new();
    let text = scenario(
        "",
        7,
        "[[chaos]]\naction = \"bandwidth\"\nat = \"2s\"\nduration = \"2s\"\n\
         bandwidth = \"300B/s\"\n\n[checks]\nmax_lost = 0\n",
    );
    let (ran, artifact) = run_text(&work, &text).await;
    ran.expect_code(0);
    let r = Report::new(&artifact);
    assert!(r.chaos[0].step.ok, "{ran}");
    let max_ms = artifact.metrics.hist(Hist::EndToEnd).max() as f64 / 1000.0;
    assert!(
        max_ms < 3_000.0,
        "the longest delivery waited about the window (2 s), not a queue paced on after it: \
         {max_ms:.0} ms\n{ran}"
    );
    let after_from = r.chaos[0].effect.to_s + 1.0;
    let late: Vec<(u32, u64)> = r
        .series
        .iter()
        .filter(|p| f64::from(p.sec) >= after_from && p.e2e.count > 0)
        .map(|p| (p.sec, p.e2e.p50))
        .collect();
    assert!(
        !late.is_empty(),
        "seconds of traffic after the window\n{ran}"
    );
    assert!(
        late.iter().all(|&(_, p50)| p50 < 100_000),
        "traffic after the window has its normal latency: {late:?}\n{ran}"
    );
}

/// The reference server, on its `--data` store, pushing every message 1.5 s after it
/// acknowledged it, killed and started again on an empty store: the messages it had
/// acknowledged in the last 1.5 s and not yet pushed are gone. All were due before the
/// kill, yet they are charged to the restart — the step in whose instant they were last
/// seen safe — so its row shows them and its `max_lost = 0` fails the run; by due time
/// alone they would sit before the step, on no step's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_restart_destroyed_is_charged_to_the_restart() {
    let data = tempfile::tempdir().expect("data dir");
    let data_arg = data.path().display().to_string();
    let server = ChildServer::start(&["--data", &data_arg, "--faults", "delay=1500ms@1"]);
    let work = Work::new();
    let target = format!(
        "[target]\nurl = \"{}\"\n\n[target.auth]\nsecret = \"{SECRET}\"\n",
        server.ws_url()
    );
    // Started again without `--data`: an empty temporary store, as a node whose disk was
    // replaced.
    let start = format!("{BIN} serve --listen {} --secret {SECRET}", server.addr);
    let rest = format!(
        "[[chaos]]\naction = \"restart\"\npid = {}\nat = \"3s\"\nstart = \"{start}\"\n\
         max_lost = 0\n",
        server.pid()
    );
    let (ran, artifact) = run_text(&work, &scenario(&target, 6, &rest)).await;
    let r = Report::new(&artifact);
    if let Some(&new) = r.chaos.first().and_then(|c| c.step.pids.get(1)) {
        let _ = std::process::Command::new("kill")
            .arg(new.to_string())
            .status();
    }
    ran.expect_code(1);
    assert!(r.chaos[0].step.ok, "{ran}");
    assert!(ran.verdict().contains("chaos[0].max_lost"), "{ran}");
    let lost = artifact.ledger.summary().lost;
    let row = &r.chaos[0];
    assert!(
        lost >= 50,
        "about 1.5 s × 100/s acknowledged and destroyed\n{ran}"
    );
    assert!(
        row.during.lost + row.after.lost >= lost * 9 / 10,
        "the restart's row shows what it destroyed: {} of {lost}\n{ran}",
        row.after.lost
    );
    let by_due = artifact.ledger.spans(&[]);
    assert!(
        by_due[0].lost >= lost / 2,
        "by due time alone, most would be before the step: {by_due:?}\n{ran}"
    );
    assert!(
        ran.stdout.contains(&format!(
            "/ {}, ",
            msgstorm::report::present::thousands(row.after.lost)
        )),
        "the text row gives the loss\n{ran}"
    );
}
