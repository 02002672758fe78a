//! `msgstorm new FAMILY DIR`: every family's starting scenario validates as written, those
//! for the reference server's protocol pass a run against the embedded server as they are,
//! and nothing already there is overwritten.

use crate::common::run::{msgstorm, Work};

const FAMILIES: [&str; 7] = [
    "native",
    "ws-json",
    "socketio",
    "mqtt",
    "xmpp",
    "script-ws",
    "script-tcp",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_familys_starting_scenario_validates_and_the_embedded_ones_pass_a_run() {
    let work = Work::new();
    for family in FAMILIES {
        let dir = work.path(family);
        let dir = dir.display().to_string();
        let ran = msgstorm(&["new", family, &dir]).await;
        ran.expect_code(0);
        assert!(ran.stdout.contains("next: "), "{ran}");
        let scenario = format!("{dir}/scenario.toml");
        msgstorm(&["validate", &scenario]).await.expect_code(0);
        if family.starts_with("script") {
            let ran = msgstorm(&["validate", &scenario, "--frames"]).await;
            ran.expect_code(0);
            assert!(ran.stdout.contains("login of u0:"), "{ran}");
        }
    }
    for family in ["native", "ws-json", "script-ws"] {
        let scenario = work
            .path(family)
            .join("scenario.toml")
            .display()
            .to_string();
        let out = work.path(family).join("out").display().to_string();
        let ran = msgstorm(&["run", "-q", &scenario, "--out", &out]).await;
        ran.expect_code(0);
        assert!(ran.verdict().starts_with("PASS"), "{family}: {ran}");
    }
}

#[tokio::test]
async fn new_never_overwrites_a_scenario() {
    let work = Work::new();
    let dir = work.path("mine").display().to_string();
    msgstorm(&["new", "native", &dir]).await.expect_code(0);
    let ran = msgstorm(&["new", "mqtt", &dir]).await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("scenario.toml: already there"), "{ran}");
    let ran = msgstorm(&["new", "carrier-pigeon", &dir]).await;
    ran.expect_code(2);
}
