//! `report.html` in a real browser: a real short run writes it, headless Chromium loads it
//! from disk, and the charts are in the DOM after load, its script ran without a console
//! error, and a screenshot is not blank. `msgstorm report --html` writes the same page
//! again from the result file (beside it when no file is named).
//!
//! Chromium is Debian's `chromium` package (`scripts/test` installs it); when it is missing
//! the test is ignored (`cfg(peer_chromium)`), except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::detect;
use crate::common::peers::missing;
use crate::common::run::{msgstorm, Work};

/// The longest Chromium may take to load and render the page.
const BROWSER_LIMIT: Duration = Duration::from_secs(60);

/// Chromium (`chromium` or `chromium-browser`); a missing one fails the test.
pub fn chromium() -> PathBuf {
    detect::program("chromium")
        .or_else(|| detect::program("chromium-browser"))
        .unwrap_or_else(|| missing("chromium"))
}

/// What headless Chromium printed for `url` with the `extra` flags: (stdout, stderr).
pub fn run_chromium(bin: &Path, profile: &Path, extra: &[&str], url: &str) -> (String, String) {
    let out = profile.with_extension("out");
    let err = profile.with_extension("err");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait for chromium").is_some() {
            break;
        }
        if start.elapsed() > BROWSER_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (read(&out), read(&err))
}

/// A PNG's pixels: (samples, samples per pixel, width, height).
pub fn pixels(png_file: &Path) -> (Vec<u8>, usize, u32, u32) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_file).expect("the screenshot exists"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a sane PNG size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    buf.truncate(info.buffer_size());
    (buf, info.color_type.samples(), info.width, info.height)
}

/// The share of pixels that differ from the most common colour, and the image size.
pub fn ink(png_file: &Path) -> (f64, u32, u32) {
    let (bytes, px, width, height) = pixels(png_file);
    let mut counts = std::collections::HashMap::new();
    for p in bytes.chunks_exact(px) {
        *counts.entry(p.to_vec()).or_insert(0u64) += 1;
    }
    let total = (bytes.len() / px) as f64;
    let most = counts.values().copied().max().unwrap_or(0) as f64;
    (1.0 - most / total, width, height)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_chromium),
    ignore = "chromium is not installed (scripts/test installs it)"
)]
async fn a_real_runs_report_renders_in_chromium() {
    let work = Work::new();
    let file = work.write(
        "s.toml",
        r#"name = "browser"
drain = "2s"

[population]
users = 20
login_rate = 40

[[traffic]]
name = "chat"
kind = "direct"
senders = 10
receivers = 10
rate = 100
duration = "2s"

[checks]
max_lost = 0
"#,
    );
    let out = work.path("out");
    let ran = msgstorm(&[
        "run",
        file.to_str().expect("utf-8"),
        "-q",
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    ran.expect_code(0);
    let page = out.join("report.html");
    let html = std::fs::read_to_string(&page).expect("the run wrote report.html");
    assert!(
        ran.stderr.contains(&format!("report: {}", page.display())),
        "{ran}"
    );

    // `report --html` renders the same page from the result file.
    let again = work.path("again.html");
    let result = out.join("result.json");
    let html_arg = format!("--html={}", again.display());
    msgstorm(&["report", result.to_str().expect("utf-8"), &html_arg])
        .await
        .expect_code(0);
    assert_eq!(
        std::fs::read_to_string(&again).expect("report --html wrote the page"),
        html
    );
    // Without a file name: `report.html` beside the result file.
    std::fs::remove_file(&page).expect("remove report.html");
    msgstorm(&["report", result.to_str().expect("utf-8"), "--html"])
        .await
        .expect_code(0);
    assert_eq!(
        std::fs::read_to_string(&page).expect("report.html again"),
        html
    );

    let bin = chromium();

    // The DOM after load: every chart, with lines, and the script ran to its end.
    let (dom, log) = run_chromium(
        &bin,
        &work.path("profile-dom"),
        &["--virtual-time-budget=2000", "--dump-dom"],
        &format!("file://{}", page.display()),
    );
    for id in [
        "users",
        "messages",
        "e2e",
        "ack",
        "cpu",
        "memory",
        "percentiles",
    ] {
        assert!(
            dom.contains(&format!("<svg id=\"{id}\"")),
            "chart {id} is not in the DOM:\n{log}"
        );
    }
    assert!(
        dom.matches("class=\"series\"").count() >= 10,
        "too few chart lines in the DOM"
    );
    let time_charts = html.matches("class=\"chart tc\"").count();
    assert!(time_charts >= 6, "{time_charts} time charts");
    assert!(
        dom.contains("No errors occurred."),
        "a run without errors says so"
    );
    assert!(
        dom.contains(&format!("data-time-charts=\"{time_charts}\"")),
        "the page's script did not run to its end:\n{log}"
    );
    for line in log.lines() {
        assert!(
            !line.contains(":CONSOLE") && !line.contains("Uncaught"),
            "the page logged to the console: {line}"
        );
    }

    // A screenshot shows something.
    let shot = work.path("shot.png");
    let (_, log) = run_chromium(
        &bin,
        &work.path("profile-shot"),
        &[
            "--window-size=1200,3000",
            "--hide-scrollbars",
            &format!("--screenshot={}", shot.display()),
        ],
        &format!("file://{}", page.display()),
    );
    let (ink, w, h) = ink(&shot);
    assert_eq!((w, h), (1200, 3000), "{log}");
    assert!(
        ink > 0.05,
        "the screenshot is nearly blank: {ink:.3} of it inked"
    );
}
