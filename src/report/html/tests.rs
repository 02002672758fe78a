//! The HTML report of the report's fixture (a real run's result).

use super::*;
use crate::artifact::Artifact;

fn fixture() -> Report {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report/testdata/result.json");
    Report::new(&Artifact::read(&path).expect("the fixture reads"))
}

#[test]
fn the_page_has_every_section_and_chart() {
    let html = render(&fixture());
    for id in [
        "id=\"checks\"",
        "id=\"timeline\"",
        "id=\"users\"",
        "id=\"messages\"",
        "id=\"e2e\"",
        "id=\"errors\"",
        "id=\"percentiles\"",
        "id=\"latency\"",
        "id=\"delivery\"",
        "id=\"traffic\"",
        "id=\"resources\"",
    ] {
        assert!(html.contains(id), "{id} missing");
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: nothing is loaded from anywhere.
    for outside in ["src=", "href=", "@import", "url("] {
        assert!(!html.contains(outside), "{outside} in the page");
    }
}

#[test]
fn text_is_escaped() {
    let mut r = fixture();
    r.scenario = "<script>alert(1)</script>".to_owned();
    let html = render(&r);
    assert!(!html.contains("<script>alert"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

/// The fixture stretched to a one-hour run: every second has traffic, latencies and errors,
/// and two monitored processes have a sample each second.
fn one_hour() -> Artifact {
    use crate::metrics::{Counter, ErrorKind, Hist, Metrics};
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report/testdata/result.json");
    let mut a = Artifact::read(&path).expect("the fixture reads");
    let mut m = Metrics::new();
    for sec in 0..3600u32 {
        m.gauge_online(sec, 10_000);
        m.add(sec, Counter::LoginOk, u64::from(sec % 7));
        m.add(sec, Counter::Sent, 5_000 + u64::from(sec % 100));
        m.add(sec, Counter::Accepted, 5_000);
        m.add(sec, Counter::Received, 9_000);
        for i in 0..50u64 {
            m.record(sec, Hist::EndToEnd, 1_000 + i * 37 + u64::from(sec));
            m.record(sec, Hist::SendAck, 500 + i * 11);
        }
        if sec % 10 == 0 {
            m.error(sec, ErrorKind::Timeout, || format!("timeout at {sec}"));
        }
    }
    a.metrics = m;
    a.duration_s = 3600.0;
    for p in &mut a.processes {
        p.series = (0..3600u32)
            .map(|s| (s, 50.0 + (s % 50) as f32, 100_000_000 + u64::from(s) * 1000))
            .collect();
    }
    let extra = a.processes[0].clone();
    a.processes.push(extra);
    a
}

#[test]
fn a_one_hour_run_stays_under_a_megabyte() {
    let html = render(&Report::new(&one_hour()));
    assert!(html.len() < 1_000_000, "{} bytes", html.len());
    // Downsampled, not cut: the time axis reaches the end of the hour.
    assert!(html.contains(">60:00<"), "the time axis ends at 60:00");
}

#[test]
fn every_request_patterns_sweep_has_its_own_section_and_charts() {
    let mut r = fixture();
    let Some(first) = r.sweeps.first().cloned() else {
        panic!("the fixture has a request sweep");
    };
    let mut second = first.clone();
    second.name = "kv".to_owned();
    second.kind = "kv_get".to_owned();
    r.sweeps = vec![first, second];
    let html = render(&r);
    for id in [
        "id=\"sweep\"",
        "id=\"sweep-1\"",
        "id=\"sweep-tps\"",
        "id=\"sweep-tps-1\"",
        "id=\"sweep-rt-1\"",
    ] {
        assert!(html.contains(id), "{id} missing");
    }
    assert!(html.contains("Request sweep: kv (kv_get)"));
}

/// The errors chart draws one line per kind that occurred, named by the kind; seconds of an
/// older result file without kinds show as "kind not recorded" rather than vanishing.
#[test]
fn errors_are_charted_by_kind() {
    use crate::metrics::ErrorKind;
    let errors_chart = |html: &str| {
        let start = html.find("id=\"errors\"").expect("an errors chart");
        let end = start + html[start..].find("</svg>").expect("the chart ends");
        html[start..end].to_owned()
    };
    let mut a = one_hour();
    for sec in (5..3600u32).step_by(60) {
        a.metrics
            .error(sec, ErrorKind::ClosedByPeer, || "closed".to_owned());
    }
    let chart = errors_chart(&render(&Report::new(&a)));
    assert!(chart.contains(">timeout<"), "timeout line missing");
    assert!(
        chart.contains(">closed_by_peer<"),
        "closed_by_peer line missing"
    );
    assert!(!chart.contains("kind not recorded"));

    let older = errors_chart(&render(&fixture()));
    assert!(older.contains(">kind not recorded<"), "{older}");
}
