//! The ledger against the reference server's fault log: for each fault kind, a run against
//! a server injecting only that kind (seeded, logged) reports exactly as many faults of
//! that kind as the server's JSONL fault log lists — and nothing else goes wrong.
//!
//! The traffic is shaped so each injected fault shows exactly once in one stream ×
//! recipient: direct traffic, so every push belongs to the recipient's conversation with
//! one sender; for `reorder` a single sender, so the push that overtakes a held one is in
//! the same conversation, sent fast enough that holds are released by the next push, not
//! by the server's hold timeout; for `delay` the next message of a stream is due long after
//! the delayed one arrives, so a delay makes a message late but never reordered.

use std::collections::BTreeMap;

use msgstorm::artifact::Artifact;
use msgstorm::ledger::Delivery;
use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::ServeConfig;
use serde_json::Value;

use crate::common::run::{run_text, scenario, Ran, Work};
use crate::common::{config, fault_log, start};

/// A finished run against a faulty server.
struct FaultRun {
    ran: Ran,
    artifact: Artifact,
    d: Delivery,
    log: Vec<Value>,
}

impl FaultRun {
    /// Log records of `kind`.
    fn logged(&self, kind: &str) -> Vec<&Value> {
        self.log.iter().filter(|r| r["kind"] == kind).collect()
    }

    /// Log record counts by kind, for messages.
    fn kinds(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for r in &self.log {
            *m.entry(r["kind"].as_str().unwrap_or("?").to_owned())
                .or_default() += 1;
        }
        m
    }
}

impl std::fmt::Display for FaultRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "fault log {:?}\nledger {:?}\n{}",
            self.kinds(),
            self.d,
            self.ran
        )
    }
}

/// Runs `traffic` (the `[population]` and `[[traffic]]` tables) against a server injecting
/// `faults` with a fixed seed, with the given ledger options.
async fn run_with_faults(faults: &str, ledger: &str, traffic: &str) -> FaultRun {
    let work = Work::new();
    let log = work.path("faults.jsonl");
    let server = start(ServeConfig {
        faults: FaultSpec::parse(faults).expect("valid fault spec"),
        fault_seed: Some(20_240_601),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    let text = scenario(
        "name = \"faults\"\nseed = 11\ndrain = \"2s\"",
        &server,
        &format!("{traffic}\n[ledger]\n{ledger}\n"),
    );
    let (ran, artifact) = run_text(&work, &text).await;
    // Stopping the server releases anything still held; every record is then written.
    server.shutdown().await.expect("server stops");
    let d = artifact.ledger.summary();
    FaultRun {
        log: fault_log(&log),
        ran,
        artifact,
        d,
    }
}

/// One sender to 12 receivers, 50 messages each, one send every millisecond: each
/// recipient has exactly one stream and gets a push every ~12 ms.
const ONE_TO_MANY: &str = r#"
[population]
users = 13
login_rate = 500

[[traffic]]
name = "fan"
kind = "direct"
senders = 1
receivers = 12
messages = 50
interval = "1ms"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_faults_are_repaired_by_sync_not_lost() {
    let r = run_with_faults("drop=0.1", "verify_sync = true", ONE_TO_MANY).await;
    let drops = r.logged("drop").len() as u64;
    assert!(drops >= 5, "too few drops to prove anything:\n{r}");
    assert_eq!(r.d.expected, 600, "{r}");
    assert_eq!(r.d.repaired, drops, "repaired != dropped pushes\n{r}");
    assert_eq!(
        r.d.lost, 0,
        "a drop the server stored was reported lost\n{r}"
    );
    assert_eq!(r.d.delivered, r.d.expected, "{r}");
    assert_eq!(r.d.via_push, r.d.expected - drops, "{r}");
    assert_eq!(
        (r.d.duplicated, r.d.reordered, r.d.corrupted),
        (0, 0, 0),
        "{r}"
    );
    // Stored but not pushed is a server defect: the built-in check fails the run.
    r.ran.expect_code(1);
    assert!(
        r.ran.verdict().starts_with(&format!(
            "FAIL: checks.max_repaired_rate: {drops} of 600 deliveries arrived only through \
             the final verification sync"
        )),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_faults_are_lost_without_verification_sync() {
    let r = run_with_faults("drop=0.1", "verify_sync = false", ONE_TO_MANY).await;
    let drops = r.logged("drop").len() as u64;
    assert!(drops >= 5, "too few drops to prove anything:\n{r}");
    assert_eq!(r.d.expected, 600, "{r}");
    assert_eq!(r.d.lost, drops, "lost != dropped pushes\n{r}");
    assert_eq!(r.d.repaired, 0, "{r}");
    assert_eq!(r.d.delivered, r.d.expected - drops, "{r}");
    // Every lost example names a (recipient, seq) the server dropped.
    assert!(r.d.examples.iter().any(|e| e.kind.name() == "lost"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dup_faults_count_as_duplicates_exactly() {
    let r = run_with_faults("dup=0.1", "verify_sync = true", ONE_TO_MANY).await;
    let dups = r.logged("dup").len() as u64;
    assert!(dups >= 5, "too few dups to prove anything:\n{r}");
    assert_eq!(r.d.duplicated, dups, "{r}");
    assert_eq!((r.d.lost, r.d.reordered, r.d.corrupted), (0, 0, 0), "{r}");
    assert_eq!(r.d.delivered, r.d.expected, "{r}");
    // Nothing was dropped, so every message came by push: none needed the repair sync.
    assert_eq!(
        r.d.repaired, 0,
        "pushes still in flight were not waited for\n{r}"
    );
    assert_eq!(r.d.via_push, r.d.expected, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorder_faults_count_as_reordered_exactly() {
    let r = run_with_faults("reorder=0.1", "verify_sync = true", ONE_TO_MANY).await;
    // A hold released by a later push of the same conversation is visible as one message
    // arriving after a later one; a hold released by the server's timeout is not.
    let overtaken: Vec<&Value> = r
        .logged("reorder")
        .into_iter()
        .filter(|rec| rec["after_conv"] == rec["conv"])
        .collect();
    assert_eq!(
        overtaken.len(),
        r.logged("reorder").len(),
        "each recipient has one conversation: every overtaking push is in it\n{r}"
    );
    assert!(overtaken.len() >= 5, "too few reorders:\n{r}");
    for rec in &overtaken {
        assert_eq!(
            rec["after_seq"].as_u64(),
            rec["seq"].as_u64().map(|s| s + 1)
        );
    }
    assert_eq!(r.d.reordered, overtaken.len() as u64, "{r}");
    assert_eq!((r.d.lost, r.d.duplicated, r.d.corrupted), (0, 0, 0), "{r}");
    assert_eq!(r.d.delivered, r.d.expected, "{r}");
    assert_eq!(r.d.via_push, r.d.expected, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_faults_count_as_corrupted_exactly() {
    let r = run_with_faults("corrupt=0.1", "verify_sync = true", ONE_TO_MANY).await;
    let bad = r.logged("corrupt").len() as u64;
    assert!(bad >= 5, "too few corruptions:\n{r}");
    assert_eq!(r.d.corrupted, bad, "{r}");
    // A corrupted copy is received (not lost) but not delivered; nothing else is wrong.
    assert_eq!(r.d.delivered, r.d.expected - bad, "{r}");
    assert_eq!((r.d.lost, r.d.duplicated, r.d.reordered), (0, 0, 0), "{r}");
    assert_eq!(
        r.d.damaged, 0,
        "corruption at the end of the body hits the padding\n{r}"
    );
    // A corrupted delivery breaks the promise: a built-in check fails the run.
    r.ran.expect_code(1);
    assert!(
        r.ran.verdict().starts_with("FAIL: checks.max_corrupted: "),
        "{r}"
    );
}

/// With 40-byte bodies (as the W4 scenario sends) the body is all envelope header,
/// so the server's corruption hits the header: still every corrupted copy counts as
/// corrupted — attributed to its message, neither damaged nor lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_faults_in_small_bodies_count_as_corrupted_exactly() {
    let traffic = format!("{ONE_TO_MANY}size = 40\n");
    let r = run_with_faults("corrupt=0.1", "verify_sync = true", &traffic).await;
    let bad = r.logged("corrupt").len() as u64;
    assert!(bad >= 5, "too few corruptions:\n{r}");
    assert_eq!(r.d.corrupted, bad, "{r}");
    assert_eq!(r.d.delivered, r.d.expected - bad, "{r}");
    assert_eq!(
        (r.d.lost, r.d.damaged, r.d.duplicated, r.d.reordered),
        (0, 0, 0, 0),
        "{r}"
    );
    r.ran.expect_code(1);
    assert!(
        r.ran.verdict().starts_with("FAIL: checks.max_corrupted: "),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_faults_count_as_late_exactly() {
    // 4 senders × 20 receivers, a send every 200 ms per sender: the next message of a
    // stream is due 4 s after the previous one, long after a 1.5 s delay; 1 s is late —
    // far above what a loaded machine adds to an undelayed message (a few hundred ms).
    let traffic = r#"
[population]
users = 24
login_rate = 500

[[traffic]]
name = "slow"
kind = "direct"
senders = 4
receivers = 20
interval = "200ms"
duration = "6s"
"#;
    let r = run_with_faults("delay=1500ms@0.15", "late_after = \"1s\"", traffic).await;
    let delays = r.logged("delay");
    assert!(delays.len() >= 5, "too few delays:\n{r}");
    assert!(delays.iter().all(|rec| rec["delay_ms"] == 1500), "{r}");
    assert_eq!(r.d.late, delays.len() as u64, "{r}");
    assert_eq!(
        (r.d.lost, r.d.duplicated, r.d.reordered, r.d.corrupted),
        (0, 0, 0, 0),
        "{r}"
    );
    assert_eq!(
        r.d.via_push, r.d.expected,
        "delayed pushes still arrive\n{r}"
    );
    assert_eq!(r.artifact.ledger.summary(), r.d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_waits_for_delayed_pushes_although_duplicates_arrived() {
    // Duplicates must not stand in for deliveries still on their way: the drain waits
    // until every expected message arrived once. Without the verification sync, a message
    // that arrives after the drain gave up would be reported lost although nothing was
    // dropped.
    let r = run_with_faults(
        "dup=0.4,delay=700ms@0.2",
        "verify_sync = false\nlate_after = \"5s\"",
        ONE_TO_MANY,
    )
    .await;
    let (dups, delays) = (r.logged("dup").len() as u64, r.logged("delay").len() as u64);
    assert!(dups >= 5 && delays >= 5, "{r}");
    assert!(r.logged("drop").is_empty());
    assert_eq!(r.d.duplicated, dups, "{r}");
    assert_eq!(
        r.d.lost, 0,
        "delayed pushes were not waited for: the drain counted duplicates as deliveries\n{r}"
    );
    assert_eq!(r.d.via_push, r.d.expected, "{r}");
}
