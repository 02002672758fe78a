//! `--live ADDR`: the page that follows a run, loaded in real headless Chromium while a
//! real run goes. Its own script refreshes it (the DOM Chromium dumps has been swapped in
//! place), two screenshots seconds apart differ, the counts in the DOM rise, and when the
//! run ends the page in place is the final report with the numbers of `result.json`.
//! Bad addresses are exit 2 naming the flag.
//!
//! Chromium is Debian's `chromium` package (`scripts/test` installs it); when it is missing
//! the Chromium test is ignored (`cfg(peer_chromium)`), except under `CI=true`, where it
//! fails.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::peers::free_port;
use crate::common::run::Running;
use crate::html::browser::{chromium, ink, pixels, run_chromium};
use crate::live::metrics::{get, scenario, RunJob};

/// The longest the run may take to show what a step waits for.
const LIMIT: Duration = Duration::from_secs(60);

/// The number in the element with id `id` (`n-sent`, `n-delivered`, …) of a page or DOM.
fn count(page: &str, id: &str) -> Option<u64> {
    let start = page.find(&format!("id=\"{id}\">"))? + id.len() + 6;
    let digits: String = page[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The run's page over plain HTTP, once `ready` holds for it (the run must not end
/// before).
async fn page_until(port: u16, run: &mut Running, ready: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        if let Some((_, body)) = get(port, "/").await {
            if ready(&body) {
                return body;
            }
        }
        assert!(!run.exited(), "the run ended before its page showed it");
        assert!(start.elapsed() < LIMIT, "the page never showed it");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Headless Chromium on `url` with `extra` flags, off the test's async workers:
/// (stdout, stderr).
async fn browse(profile: &Path, extra: &[&str], url: &str) -> (String, String) {
    let bin = chromium();
    let profile = profile.to_owned();
    let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        run_chromium(&bin, &profile, &extra, &url)
    })
    .await
    .expect("chromium ran")
}

/// The DOM after the page ran its script for 2.5 s of the browser's virtual time (its
/// refreshes fetch the page over the network meanwhile).
async fn dom(dir: &Path, name: &str, url: &str) -> String {
    let (dom, log) = browse(
        &dir.join(name),
        &["--virtual-time-budget=2500", "--dump-dom"],
        url,
    )
    .await;
    for line in log.lines() {
        assert!(
            !line.contains("Uncaught"),
            "the live page's script failed: {line}"
        );
    }
    dom
}

/// A screenshot of the page, 1200 × 1600.
async fn screenshot(dir: &Path, name: &str, url: &str) -> std::path::PathBuf {
    let shot = dir.join(format!("{name}.png"));
    browse(
        &dir.join(name),
        &[
            "--window-size=1200,1600",
            "--hide-scrollbars",
            &format!("--screenshot={}", shot.display()),
        ],
        url,
    )
    .await;
    shot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_chromium),
    ignore = "chromium is not installed (scripts/test installs it)"
)]
async fn the_live_page_follows_the_run_in_chromium_and_ends_on_the_final_report() {
    let port = free_port();
    let job = RunJob::new(&scenario(20), &["--live", &format!("127.0.0.1:{port}")]);
    let dir = job.out.with_file_name("browser");
    std::fs::create_dir_all(&dir).expect("a folder for the browser");
    let url = format!("http://127.0.0.1:{port}/");
    let mut run = job.start();
    page_until(port, &mut run, |p| {
        p.contains("<main data-live=\"traffic\">") && count(p, "n-sent").is_some_and(|n| n > 0)
    })
    .await;

    // Loaded in Chromium, the page refreshed itself in place: same renderer, same charts.
    let first = dom(&dir, "dom-1", &url).await;
    assert!(
        first.contains("data-refreshes=\""),
        "the page's refresh never swapped it"
    );
    assert!(first.contains("data-live=\"traffic\""), "not live");
    for chart in ["users", "messages", "e2e", "percentiles"] {
        assert!(
            first.contains(&format!("<svg id=\"{chart}\"")),
            "chart {chart} is not on the live page"
        );
    }
    assert!(first.contains("pending: judged when the run ends"));
    let sent_1 = count(&first, "n-sent").expect("a sent count in the DOM");
    let delivered = |d: &str| count(d, "n-delivered").expect("a delivered count");
    let delivered_1 = delivered(&first);
    let shot_1 = screenshot(&dir, "shot-1", &url).await;
    // What the run had when the screenshot was over (at least what it shows).
    let shot_1_sent = count(&page_until(port, &mut run, |_| true).await, "n-sent");

    // 400 more messages sent than the first DOM and the first screenshot show, and more
    // delivered: the counts rose and the picture changed.
    let floor = sent_1.max(shot_1_sent.unwrap_or(0)) + 400;
    page_until(port, &mut run, |p| {
        count(p, "n-sent").is_some_and(|n| n >= floor)
            && count(p, "n-delivered").is_some_and(|n| n > delivered_1)
    })
    .await;
    let second = dom(&dir, "dom-2", &url).await;
    let sent_2 = count(&second, "n-sent").expect("a sent count in the DOM");
    assert!(sent_2 >= floor, "sent {sent_1} then {sent_2}");
    assert!(delivered(&second) > delivered_1);
    let shot_2 = screenshot(&dir, "shot-2", &url).await;
    let ((a, _, w, h), (b, ..)) = (pixels(&shot_1), pixels(&shot_2));
    assert_eq!((w, h), (1200, 1600));
    assert!(ink(&shot_2).0 > 0.05, "the screenshot is nearly blank");
    assert!(a != b, "two screenshots seconds apart are the same");

    // When the run ends, the page in place is its final report (no longer live).
    let start = Instant::now();
    let last = loop {
        let d = dom(&dir, "dom-end", &url).await;
        if d.contains("<main>") && d.contains("id=\"n-lost\"") {
            break d;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the page never showed the final report"
        );
    };
    let ran = run.finish().await;
    ran.expect_code(0);
    assert!(ran.stderr.contains("shows the final report"), "{ran}");
    let result = msgstorm::report::Report::new(&job.result());
    assert!(
        last.contains("<h1>PASS"),
        "the final page is not the verdict"
    );
    use msgstorm::metrics::Counter;
    assert_eq!(count(&last, "n-sent"), Some(result.count(Counter::Sent)));
    assert_eq!(count(&last, "n-delivered"), Some(result.delivery.delivered));
    assert_eq!(count(&last, "n-lost"), Some(result.delivery.lost));
    assert_eq!(
        count(&last, "n-logins"),
        Some(result.count(Counter::LoginOk))
    );
    assert!(last.contains(&result.run_id), "not this run's report");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_address_in_use_or_unparsable_is_exit_2_naming_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("its address").to_string();
    let ran = RunJob::new(&scenario(1), &["--live", &addr]).run().await;
    ran.expect_code(2);
    assert!(
        ran.stderr
            .contains(&format!("--live {addr}: cannot listen")),
        "{ran}"
    );
    let ran = RunJob::new(&scenario(1), &["--live", "localhost:nine"])
        .run()
        .await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("--live"), "{ran}");
    // One process's page: several shards are refused, before anything runs.
    let ran = RunJob::new(&scenario(1), &["--live", "127.0.0.1:0", "--shards", "2"])
        .run()
        .await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains("--live") && ran.stderr.contains("--shards"),
        "{ran}"
    );
}
