//! Comparisons of the report's fixture with itself and with changed copies.

use super::gate::Gate;
use super::*;
use crate::artifact::Artifact;
use crate::metrics::Hist;

fn fixture() -> Report {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report/testdata/result.json");
    Report::new(&Artifact::read(&path).expect("the fixture reads"))
}

fn gate(c: &Comparison, text: &str) -> gate::Outcome {
    Gate::parse(text)
        .expect("the gate parses")
        .check(c)
        .expect("the metric exists")
}

#[test]
fn a_run_compared_with_itself_is_unchanged_everywhere() {
    let c = Comparison::new(fixture(), fixture());
    assert!(c.rows.len() > 30, "{} rows", c.rows.len());
    for row in &c.rows {
        assert!(
            matches!(row.change, Change::Unchanged | Change::NotComparable),
            "{row:?}"
        );
    }
    assert!(!gate(&c, "e2e_p99>+10%").failed);
    assert!(!gate(&c, "lost>0").failed);
}

#[test]
fn a_slower_tail_is_worse_and_fails_its_gate() {
    let mut new = fixture();
    let l = new.latency_us.get_mut(&Hist::EndToEnd).expect("e2e");
    let before = l.p99;
    l.p99 = before * 12 / 10 + 1000;
    new.rates.sent_per_s *= 1.5;
    new.delivery.lost = 3;
    let c = Comparison::new(fixture(), new);
    let row = c.row("e2e_p99").expect("e2e_p99");
    assert_eq!(row.change, Change::Worse);
    assert!(row.relative().expect("both measured") > 0.2);
    assert_eq!(c.row("sent_per_s").expect("rate").change, Change::Better);
    assert_eq!(c.row("lost").expect("lost").change, Change::Worse);
    let g = gate(&c, "e2e_p99>+10%");
    assert!(g.failed, "{g:?}");
    assert!(
        g.measured.starts_with("relative change +"),
        "{}",
        g.measured
    );
    assert!(!gate(&c, "e2e_p99>+50%").failed);
    assert!(gate(&c, "lost>0").failed);
    assert!(!gate(&c, "sent_per_s<-5%").failed);
    let text = render::text(&c, ["a.json", "b.json"], &[gate(&c, "e2e_p99>+10%")]);
    assert!(text.starts_with("FAIL: e2e_p99>+10%"), "{text}");
}

#[test]
fn small_changes_are_noise_and_zero_problems_have_none() {
    assert_eq!(
        verdict(Kind::Tail, Better::Lower, Some(10_000.0), Some(10_900.0)),
        Change::WithinNoise
    );
    assert_eq!(
        verdict(Kind::Latency, Better::Lower, Some(200.0), Some(290.0)),
        Change::WithinNoise,
        "below the 0.1 ms floor"
    );
    assert_eq!(
        verdict(Kind::Problem, Better::Lower, Some(0.0), Some(1.0)),
        Change::Worse
    );
    assert_eq!(
        verdict(Kind::Rate, Better::Higher, Some(100.0), None),
        Change::NotComparable
    );
}

#[test]
fn an_unknown_metric_is_named_with_the_known_ones() {
    let c = Comparison::new(fixture(), fixture());
    let err = Gate::parse("e2e_p42>1")
        .expect("parses")
        .check(&c)
        .expect_err("no such metric");
    assert!(
        err.contains("no metric `e2e_p42`") && err.contains("e2e_p99"),
        "{err}"
    );
}

#[test]
fn the_html_comparison_overlays_both_runs() {
    let c = Comparison::new(fixture(), fixture());
    let html = render::html(&c, ["a.json", "b.json"], &[]);
    assert!(html.contains("base: users online") && html.contains("new: users online"));
    assert!(html.contains("series dashed"));
    assert!(html.contains("id=\"percentiles\""));
}

#[test]
fn the_noise_sentence_states_the_bands_in_force() {
    for (kind, words) in [
        (Kind::Latency, "latencies ±"),
        (Kind::Tail, "p99 and p99.9 ±"),
        (Kind::Max, "max ±"),
        (Kind::Rate, "rates and volumes ±"),
        (Kind::Cpu, "CPU and memory ±"),
    ] {
        let said = format!("{words}{:.0}%", kind.noise() * 100.0);
        assert!(
            render::NOISE.contains(&said),
            "{said:?} not in {:?}",
            render::NOISE
        );
    }
    assert!(render::NOISE.contains(&format!("{:.2} ms", LATENCY_FLOOR_US / 1000.0)));
}

#[test]
fn every_check_built_in_or_written_is_a_row_and_a_gate() {
    let base = fixture();
    let mut new = fixture();
    let verified = new
        .checks
        .iter_mut()
        .find(|c| c.key == "checks.min_verified")
        .expect("the built-in check applies to the fixture");
    verified.value = Some(0.5);
    let c = Comparison::new(base, new);
    for key in [
        "checks.max_lost",
        "checks.max_send_error_rate",
        "checks.min_verified",
        "checks.max_protocol_errors",
        "checks.max_repaired_rate",
        "checks.max_foreign",
    ] {
        assert!(c.row(key).is_some(), "no row {key}");
    }
    let row = c.row("checks.min_verified").expect("row");
    assert_eq!(
        (row.base, row.new, row.change),
        (Some(1.0), Some(0.5), Change::Worse)
    );
    assert!(gate(&c, "checks.min_verified<-10%").failed);
}
