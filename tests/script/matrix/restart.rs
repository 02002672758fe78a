//! Synapse killed (-9) mid-run and started again on the same port and database (a chaos
//! `restart` step): users reconnect with the token and since token they kept and catch up,
//! and the run's ledger agrees with Synapse's `events` table message by message.

use msgstorm::metrics::Counter;
use msgstorm::report::Report;

use super::synapse::Synapse;
use super::{distinct, target};
use crate::common::run::{run_text, Work};

/// A few seconds of 1:1 traffic with Synapse killed at 5 s and started again (it listens
/// 2–10 s later; its users are offline meanwhile, so `min_online` is relaxed, and so are
/// `min_verified` for the sends the kill refused, and `max_repaired_rate` for a message
/// Synapse stored as it died and a receiver got only from the final verification). What the
/// ledger counts accepted is in the database; what it counts refused is either not there
/// or there and delivered (Synapse stored it but died before answering); every stored
/// message reached its receiver exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_synapse),
    ignore = "Synapse (peers/synapse/venv) is not installed (scripts/test installs it)"
)]
async fn a_killed_and_restarted_synapse_holds_what_the_ledger_counts() {
    let synapse = Synapse::start();
    let work = Work::new();
    let text = format!(
        "name = \"matrix-restart\"\nseed = 13\ndrain = \"10s\"\n\n{}\n\
         [population]\nusers = 8\nprefix = \"k\"\nlogin_rate = 50\n\n\
         [[traffic]]\nname = \"dm\"\nkind = \"direct\"\nsenders = 3\nreceivers = 3\n\
         rate = 10\nduration = \"18s\"\n\n\
         [[chaos]]\naction = \"restart\"\nat = \"5s\"\nstart = \"{}\"\n\n\
         [checks]\nmax_lost = 0\nmax_duplicated = 0\nmax_send_error_rate = 0.5\n\
         min_online = 0.3\nmin_verified = 0.5\nmax_repaired_rate = 0.1\n",
        target(&synapse),
        synapse.start_command()
    );
    let (ran, a) = run_text(&work, &text).await;
    assert_eq!(ran.code, 0, "{ran}\n--- Synapse\n{}", synapse.log());
    let r = Report::new(&a);
    let step = &r.chaos[0].step;
    assert_eq!(
        step.pids.len(),
        2,
        "killed, then started again: {step:?}\n{ran}"
    );
    assert!(
        a.metrics.count(Counter::Disconnects) > 0,
        "the kill dropped the users\n{ran}\n{}",
        synapse.log()
    );
    let d = a.ledger.summary();
    assert_eq!((d.lost, d.duplicated), (0, 0), "{d:?}\n{ran}");
    let accepted = a.metrics.count(Counter::Accepted);
    let bodies = synapse.messages("k");
    let stored = bodies.len() as u64;
    assert_eq!(
        distinct(&bodies),
        (bodies.len(), 0),
        "each message stored once, all of this run\n{ran}"
    );
    // 1:1 traffic: a message has one receiver, so deliveries count messages.
    assert_eq!(
        stored, d.delivered,
        "every message Synapse stored reached its receiver once: {d:?}\n{ran}"
    );
    let refused_but_stored = d.delivered - d.expected;
    assert!(
        refused_but_stored <= d.refused,
        "what arrived beyond the accepted ones was refused: {d:?}\n{ran}"
    );
    assert_eq!(
        stored,
        accepted + refused_but_stored,
        "the database holds the accepted messages and the refused ones it stored: {d:?}\n{ran}"
    );
}
