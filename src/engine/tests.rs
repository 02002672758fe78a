//! The engine over the loopback driver, on tokio's paused clock: whole runs in virtual time,
//! checked against the schedule and against the faults the hub injected.

use std::path::Path;

use tokio::sync::watch;

use super::{run, Outcome, RunOptions};
use crate::driver::loopback::{Injected, LoopbackDriver, LoopbackOptions};
use crate::ledger::Delivery;
use crate::metrics::{Counter, Hist};
use crate::scenario::{self, Plan, Shard};

/// The plan of a scenario text.
fn plan(text: &str) -> Plan {
    scenario::parse(text, Path::new("t.toml"), &[], Shard::WHOLE).expect("test scenario")
}

/// Runs `plan` over a loopback hub with `opts`; returns the outcome, its delivery verdict
/// and what the hub injected.
async fn run_loopback(plan: &Plan, opts: LoopbackOptions) -> (Outcome, Delivery, Injected) {
    let driver = LoopbackDriver::new(opts);
    let hub = driver.hub();
    let (_signal_tx, signals) = watch::channel(0u32);
    let opts = RunOptions {
        run_id: 7,
        traffic_at: None,
    };
    let outcome = run(plan, driver, opts, signals, |_| {}).await;
    let delivery = outcome.ledger.summary();
    (outcome, delivery, hub.injected())
}

/// 10 users, 4 senders × 4 receivers, 5 messages per pair every 100 ms.
const DIRECT: &str = r#"
seed = 1
drain = "1s"
[population]
users = 10
login_rate = 100
[[traffic]]
kind = "direct"
senders = 4
receivers = 4
interval = "100ms"
messages = 5
size = 100
"#;

#[tokio::test(start_paused = true)]
async fn clean_run_delivers_everything_by_push() {
    let (out, d, injected) = run_loopback(&plan(DIRECT), LoopbackOptions::default()).await;
    assert_eq!(injected, Injected::default());
    assert_eq!(out.metrics.count(Counter::Sent), 80);
    assert_eq!(out.metrics.count(Counter::Accepted), 80);
    assert_eq!(
        (d.expected, d.delivered, d.via_push, d.lost),
        (80, 80, 80, 0)
    );
    assert_eq!(out.metrics.errors().count(), 0, "{:?}", out.metrics);
    assert!(!out.interrupted);
    assert_eq!(out.metrics.hist(Hist::EndToEnd).len(), 80);
}
