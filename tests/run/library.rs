//! Running a scenario is a library function. These tests call
//! [`msgstorm::run::run`] (and [`msgstorm::run::shards::local`]) directly, with no target in
//! the plan (so the run starts the embedded reference server), and look at the events the
//! run reported to their sink and at the artifact it returned.

use std::path::Path;
use std::time::{Duration, Instant};

use msgstorm::artifact::{Artifact, ScenarioSource};
use msgstorm::launch::local::Local;
use msgstorm::run::shards::Split;
use msgstorm::run::{self, Event, Options, Sink, Stage};
use msgstorm::scenario::{self, Plan, Shard};
use tokio::sync::watch;

use crate::common::run::{Work, BIN, RUN_LIMIT};

/// A tiny scenario: 10 users, one direct pattern of `traffic` at 20 msg/s, no target.
fn scenario(traffic: &str) -> String {
    format!(
        r#"
name = "library"
seed = 7
drain = "2s"

[population]
users = 10
login_rate = 100

[[traffic]]
name = "chat"
kind = "direct"
senders = 4
receivers = 6
rate = 20
duration = "{traffic}"

[checks]
max_lost = 0
"#
    )
}

fn plan(text: &str) -> Plan {
    scenario::parse(text, Path::new("library.toml"), &[], Shard::WHOLE).expect("the scenario loads")
}

/// Options of a whole run, with the sender of its stop requests.
fn options(text: &str) -> (Options, watch::Sender<u32>) {
    let (stop, stops) = watch::channel(0u32);
    let options = Options {
        run_id: Some(0x25),
        traffic_at: None,
        rendezvous: None,
        source: Some(ScenarioSource {
            file: "library.toml".to_owned(),
            text: text.to_owned(),
            overrides: Vec::new(),
        }),
        stops,
        metrics_listen: None,
        metrics_push: None,
        viewer: None,
    };
    (options, stop)
}

/// The places of `stage`'s events among `events`.
fn positions(events: &[Event], stage: Stage) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Stage(s) if *s == stage))
        .map(|(i, _)| i)
        .collect()
}

/// The engine phases the progress snapshots named, in order, without repeats.
fn engine_phases(events: &[Event]) -> Vec<&'static str> {
    let mut phases: Vec<&'static str> = Vec::new();
    for e in events {
        if let Event::Progress(p) = e {
            if phases.last() != Some(&p.phase) {
                phases.push(p.phase);
            }
        }
    }
    phases
}

/// Every delivery the run asked for arrived, and the ledger says so.
fn assert_complete(a: &Artifact) {
    let d = a.ledger.summary();
    assert!(d.expected > 0, "no deliveries were expected: {d:?}");
    assert_eq!(
        (d.delivered, d.lost, d.duplicated),
        (d.expected, 0, 0),
        "{d:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reports_its_phases_and_progress_in_order_and_returns_a_complete_artifact() {
    let text = scenario("3s");
    let (options, _stop) = options(&text);
    let mut events: Vec<Event> = Vec::new();
    let artifact = tokio::time::timeout(RUN_LIMIT, run::run(plan(&text), options, &mut events))
        .await
        .expect("the run ends")
        .expect("the run succeeds");

    let (load, collect) = (
        positions(&events, Stage::Load),
        positions(&events, Stage::Collect),
    );
    assert_eq!((load.len(), collect.len()), (1, 1), "{events:?}");
    let progress: Vec<usize> = (0..events.len())
        .filter(|&i| matches!(events[i], Event::Progress(_)))
        .collect();
    assert!(
        progress.len() >= 2,
        "about one snapshot a second: {events:?}"
    );
    assert!(
        load[0] < progress[0] && progress[progress.len() - 1] < collect[0],
        "progress comes between the load's start and its end: {events:?}"
    );
    let phases = engine_phases(&events);
    let rank = |p: &str| {
        ["login", "traffic", "drain", "closing"]
            .iter()
            .position(|q| *q == p)
    };
    assert!(phases.contains(&"traffic"), "{phases:?}");
    assert!(
        phases.windows(2).all(|w| rank(w[0]) < rank(w[1])),
        "the engine's phases go forward: {phases:?}"
    );
    let Event::Progress(last) = &events[progress[progress.len() - 1]] else {
        panic!("not a progress event")
    };
    assert!(last.sent > 0 && last.received > 0, "{last:?}");

    assert_complete(&artifact);
    assert_eq!(artifact.run_id, "00000025");
    assert!(!artifact.interrupted);
    assert!(
        artifact.target.starts_with("embedded ws://127.0.0.1:"),
        "{}",
        artifact.target
    );
    assert!(
        artifact
            .notes
            .iter()
            .any(|n| n == msgstorm::report::findings::EMBEDDED_IN_GENERATOR),
        "{:?}",
        artifact.notes
    );
}

/// Asks the run to stop once its traffic flows, as Ctrl-C does.
struct StopAtTraffic {
    stop: watch::Sender<u32>,
    events: Vec<Event>,
}

impl Sink for StopAtTraffic {
    fn event(&mut self, event: Event) {
        if matches!(&event, Event::Progress(p) if p.phase == "traffic" && p.sent > 0) {
            self.stop.send_if_modified(|n| {
                let first = *n == 0;
                *n = 1;
                first
            });
        }
        self.events.push(event);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_request_through_the_options_drains_the_run_and_marks_it_interrupted() {
    let text = scenario("60s");
    let (options, stop) = options(&text);
    let mut sink = StopAtTraffic {
        stop,
        events: Vec::new(),
    };
    let start = Instant::now();
    let artifact = tokio::time::timeout(RUN_LIMIT, run::run(plan(&text), options, &mut sink))
        .await
        .expect("the run ends")
        .expect("the run succeeds");
    assert!(artifact.interrupted, "the stop request reached the engine");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "stopped long before its 60 s of traffic: {:?}",
        start.elapsed()
    );
    assert_eq!(positions(&sink.events, Stage::Collect).len(), 1);
    assert_eq!(
        artifact.ledger.summary().duplicated,
        0,
        "an interrupted run still has its ledger"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_on_this_host_note_the_run_then_merge_every_shard() {
    let work = Work::new();
    let out = work.path("out");
    std::fs::create_dir_all(&out).expect("out folder");
    let file = work.path("library.toml");
    let text = scenario("2s");
    std::fs::write(&file, &text).expect("scenario written");
    let split = Split {
        scenario: Some(file),
        sets: Vec::new(),
        count: 2,
        run_id: Some(0x25),
        out: out.clone(),
    };
    let (_stop, stops) = watch::channel(0u32);
    let mut events: Vec<Event> = Vec::new();
    let merged = tokio::time::timeout(
        RUN_LIMIT,
        run::shards::local(plan(&text), split, &Local::of(BIN), stops, &mut events),
    )
    .await
    .expect("the shards end")
    .expect("the shards succeed");

    let note = format!(
        "run 00000025: 10 users in 2 generator processes; shard logs in {}",
        out.display()
    );
    let at = |wanted: &dyn Fn(&Event) -> bool| events.iter().position(wanted);
    let noted = at(&|e| matches!(e, Event::Note(n) if *n == note));
    let load = at(&|e| matches!(e, Event::Stage(Stage::Load)));
    let collect = at(&|e| matches!(e, Event::Stage(Stage::Collect)));
    assert!(
        noted.is_some() && noted < load && load < collect,
        "the note, then the load, then collecting: {events:?}"
    );
    assert_eq!(merged.shards.len(), 2);
    assert!(
        merged.target.starts_with("embedded ws://"),
        "{}",
        merged.target
    );
    assert_complete(&merged);
}
