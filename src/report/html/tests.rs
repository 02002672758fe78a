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
