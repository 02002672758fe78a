//! The engine over the loopback driver, on tokio's paused clock: whole runs in virtual time,
//! checked against the schedule and against the faults the hub injected.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::shared::Shared;
use super::{run, Conductor, Outcome, Progress, RunOptions};
use crate::driver::loopback::{Injected, LoopbackDriver, LoopbackOptions, LoopbackSession};
use crate::driver::{
    Caps, Config, Connected, Dest, Driver, Event, Failure, OptionError, Session, Spec, UserCtx,
};
use crate::ledger::{Delivery, Problem};
use crate::metrics::{Counter, ErrorKind, Hist, Metrics};
use crate::scenario::{self, Plan, Shard, TrafficShape};

/// The plan of a scenario text.
pub(super) fn plan(text: &str) -> Plan {
    scenario::parse(text, Path::new("t.toml"), &[], Shard::WHOLE).expect("test scenario")
}

/// Runs `plan` over a loopback hub with `opts`; returns the outcome, its delivery verdict
/// and what the hub injected.
pub(super) async fn run_loopback(
    plan: &Plan,
    opts: LoopbackOptions,
) -> (Outcome, Delivery, Injected) {
    let driver = LoopbackDriver::with_options(opts);
    let hub = driver.hub();
    let (_signal_tx, signals) = watch::channel(0u32);
    let opts = RunOptions {
        run_id: 7,
        traffic_at: None,
        barrier: None,
        clock: crate::clock::Clock::default(),
        traffic_seen: None,
        live: None,
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

/// A scenario of 10 users: 4 senders to the 6 others, `messages` per pair every 100 ms,
/// plus `extra` lines in `[population]`.
fn direct(messages: u32, extra: &str) -> Plan {
    plan(&format!(
        r#"
seed = 3
drain = "1s"
[population]
users = 10
login_rate = 100
{extra}
[[traffic]]
kind = "direct"
senders = 4
receivers = 6
interval = "100ms"
messages = {messages}
size = 100
"#
    ))
}

/// µs of a duration, for latency asserts.
fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// True when `value` is `want` within the histograms' precision.
fn about(value: u64, want: u64) -> bool {
    value.abs_diff(want) <= want / 500 + 1
}

#[tokio::test(start_paused = true)]
async fn open_loop_sends_go_out_at_their_due_times() {
    let latency = Duration::from_millis(5);
    let opts = LoopbackOptions {
        latency,
        ..LoopbackOptions::default()
    };
    let (out, d, _) = run_loopback(&direct(5, ""), opts).await;
    // 4 senders × 6 receivers × 5 messages.
    assert_eq!(out.metrics.count(Counter::Sent), 120);
    assert_eq!((d.expected, d.via_push, d.lost), (120, 120, 0));
    // Never late: every send left at its due time, so every latency is the hub's.
    let lag = out.metrics.hist(Hist::SendLag);
    assert_eq!((lag.len(), lag.max()), (120, 0));
    for h in [Hist::EndToEnd, Hist::SendAck] {
        let hist = out.metrics.hist(h);
        assert!(about(hist.min(), us(latency)), "{h:?} min {}", hist.min());
        assert!(about(hist.max(), us(latency)), "{h:?} max {}", hist.max());
    }
    // 30 sends per sender every 100 ms, staggered over 100 ms: done 3 s after traffic start.
    let traffic = out.traffic_started.expect("traffic started");
    let sending = out.duration - traffic;
    assert!(sending >= Duration::from_millis(2975), "{sending:?}");
}

/// A driver whose sessions take `stall` for their first send: the generator falls behind.
struct Stall {
    inner: LoopbackDriver,
    stall: Duration,
}

/// A session of [`Stall`].
struct Stalled {
    inner: LoopbackSession,
    stall: Option<Duration>,
}

impl Driver for Stall {
    const SPEC: Spec = LoopbackDriver::SPEC;

    type Session = Stalled;

    fn new(config: &Config) -> Result<Self, OptionError> {
        Ok(Stall {
            inner: LoopbackDriver::new(config)?,
            stall: Duration::ZERO,
        })
    }

    fn caps(&self) -> Caps {
        self.inner.caps()
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: (),
    ) -> Result<Connected<Stalled>, (Failure, ())> {
        let c = self.inner.connect(user, resume).await?;
        Ok(Connected {
            session: Stalled {
                inner: c.session,
                stall: Some(self.stall),
            },
            handshake: c.handshake,
            login: c.login,
            account: c.account,
            no_resume_point: c.no_resume_point,
        })
    }
}

impl Session for Stalled {
    type Resume = ();

    async fn send(&mut self, tag: u64, dest: Dest<'_>, body: &str) -> Result<(), Failure> {
        if let Some(stall) = self.stall.take() {
            tokio::time::sleep(stall).await;
        }
        self.inner.send(tag, dest, body).await
    }

    async fn request(&mut self, tag: u64, name: &'static str) -> Result<(), Failure> {
        self.inner.request(tag, name).await
    }

    async fn heartbeat(&mut self) -> Result<(), Failure> {
        self.inner.heartbeat().await
    }

    async fn flush(&mut self) -> Result<(), Failure> {
        self.inner.flush().await
    }

    async fn join(&mut self, group: &str) -> Result<(), Failure> {
        self.inner.join(group).await
    }

    async fn fetch_missed(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        self.inner.fetch_missed(out).await
    }

    async fn next_event(&mut self) -> Event {
        self.inner.next_event().await
    }

    async fn close(self) {
        self.inner.close().await
    }

    fn into_resume(self) {}
}

#[tokio::test(start_paused = true)]
async fn a_late_generator_still_counts_latency_from_the_due_time() {
    let latency = Duration::from_millis(5);
    let driver = Stall {
        inner: LoopbackDriver::with_options(LoopbackOptions {
            latency,
            ..LoopbackOptions::default()
        }),
        stall: Duration::from_millis(250),
    };
    let (_signal_tx, signals) = watch::channel(0u32);
    let opts = RunOptions {
        run_id: 7,
        traffic_at: None,
        barrier: None,
        clock: crate::clock::Clock::default(),
        traffic_seen: None,
        live: None,
    };
    let out = run(&direct(5, ""), driver, opts, signals, |_| {}).await;
    let d = out.ledger.summary();
    assert_eq!((d.expected, d.via_push, d.lost), (120, 120, 0));
    // Each sender's first send takes 250 ms to write, so it is written 250 ms late (issue
    // 24: the time a write blocks counts); its next two, due 100 and 200 ms after the
    // first, go out 150 and 50 ms late; the rest on time.
    let lag = out.metrics.hist(Hist::SendLag);
    assert!(about(lag.max(), 250_000), "lag max {}", lag.max());
    for late in [250_000, 150_000, 50_000] {
        let n = lag.count_between(late - 1_000, late + 1_000);
        assert_eq!(n, 4, "one send per sender written {late} µs late");
    }
    assert_eq!(
        lag.count_between(1, 300_000),
        12,
        "three late sends per sender"
    );
    // Latency counts from the due time: the stalled send reaches its recipient 250 ms
    // after it was due, the two late ones 150 and 50 ms late, plus the hub's latency.
    let e2e = out.metrics.hist(Hist::EndToEnd);
    let l = us(latency);
    assert!(about(e2e.max(), 250_000 + l), "e2e max {}", e2e.max());
    for late in [250_000, 150_000, 50_000] {
        let n = e2e.count_between(late + l - 1_000, late + l + 1_000);
        assert_eq!(n, 4, "one delivery per sender {late} µs late");
    }
    assert_eq!(e2e.count_between(0, l + 1_000), 120 - 12);
    let ack = out.metrics.hist(Hist::SendAck);
    assert!(about(ack.max(), 250_000 + l), "ack max {}", ack.max());
}

#[tokio::test(start_paused = true)]
async fn late_users_log_in_late_and_sync_what_they_missed() {
    let plan = direct(10, r#"late = { count = 2, at = "600ms" }"#);
    let (out, d, _) = run_loopback(&plan, LoopbackOptions::default()).await;
    // Late users are never senders, so they are among the 6 receivers.
    assert_eq!(d.expected, 4 * 6 * 10);
    assert_eq!((d.delivered, d.lost), (d.expected, 0));
    assert!(d.via_sync > 0, "{d:?}");
    // What they missed is exactly what was sent to them before they logged in.
    assert!(d.via_sync < 2 * 4 * 10, "{d:?}");
    assert_eq!(d.via_push + d.via_sync, d.expected);
    assert!(out.metrics.count(Counter::Syncs) >= 2);
    assert_eq!(out.metrics.errors().count(), 0);
}

#[tokio::test(start_paused = true)]
async fn churning_users_go_offline_and_catch_up_when_back() {
    let plan = direct(
        20,
        r#"churn = { count = 3, offline_at = "700ms", back_at = "1200ms" }"#,
    );
    let (out, d, _) = run_loopback(&plan, LoopbackOptions::default()).await;
    assert_eq!(d.expected, 4 * 6 * 20);
    assert_eq!((d.delivered, d.lost, d.duplicated), (d.expected, 0, 0));
    assert!(d.via_sync > 0, "{d:?}");
    assert!(out.metrics.count(Counter::Syncs) >= 3);
    assert!(out.metrics.count(Counter::ConnectAttempts) >= 10 + 3);
    assert_eq!(out.metrics.errors().count(), 0);
}

/// Runs 25 messages per pair with `opts` and checks that the ledger reports exactly what
/// the hub injected, and nothing else.
async fn ledger_matches_injected(opts: LoopbackOptions) -> Injected {
    let (out, d, inj) = run_loopback(&direct(25, ""), opts).await;
    assert_eq!(d.expected, 4 * 6 * 25);
    assert_eq!(d.lost, inj.lost, "{d:?} {inj:?}");
    assert_eq!(d.repaired, inj.dropped, "{d:?} {inj:?}");
    assert_eq!(d.duplicated, inj.duplicated, "{d:?} {inj:?}");
    assert_eq!(d.reordered, inj.reordered, "{d:?} {inj:?}");
    assert_eq!(d.corrupted, inj.corrupted, "{d:?} {inj:?}");
    assert_eq!((d.damaged, d.unexpected, d.late, d.via_sync), (0, 0, 0, 0));
    assert_eq!(d.delivered + d.corrupted + d.lost, d.expected, "{d:?}");
    assert_eq!(out.metrics.errors().count(), 0);
    inj
}

#[tokio::test(start_paused = true)]
async fn true_loss_is_reported_lost_exactly() {
    let inj = ledger_matches_injected(LoopbackOptions {
        loss: 0.05,
        ..LoopbackOptions::default()
    })
    .await;
    assert!(inj.lost > 0);
}

#[tokio::test(start_paused = true)]
async fn dropped_but_stored_pushes_are_repaired_exactly() {
    let inj = ledger_matches_injected(LoopbackOptions {
        drop: 0.05,
        ..LoopbackOptions::default()
    })
    .await;
    assert!(inj.dropped > 0);
}

#[tokio::test(start_paused = true)]
async fn duplicates_are_reported_exactly() {
    let inj = ledger_matches_injected(LoopbackOptions {
        duplicate: 0.05,
        ..LoopbackOptions::default()
    })
    .await;
    assert!(inj.duplicated > 0);
}

#[tokio::test(start_paused = true)]
async fn reorders_are_reported_exactly() {
    let inj = ledger_matches_injected(LoopbackOptions {
        reorder: 0.05,
        ..LoopbackOptions::default()
    })
    .await;
    assert!(inj.reordered > 0);
}

#[tokio::test(start_paused = true)]
async fn corruption_is_reported_exactly() {
    let inj = ledger_matches_injected(LoopbackOptions {
        corrupt: 0.05,
        ..LoopbackOptions::default()
    })
    .await;
    assert!(inj.corrupted > 0);
}

#[tokio::test(start_paused = true)]
async fn every_fault_at_once_with_latency_and_jitter_is_reported_exactly() {
    let inj = ledger_matches_injected(LoopbackOptions {
        latency: Duration::from_millis(3),
        jitter: Duration::from_millis(20),
        loss: 0.02,
        drop: 0.02,
        duplicate: 0.02,
        reorder: 0.02,
        corrupt: 0.02,
        seed: 11,
        ..LoopbackOptions::default()
    })
    .await;
    assert!(inj.lost > 0 && inj.dropped > 0 && inj.duplicated > 0);
    assert!(inj.reordered > 0 && inj.corrupted > 0);
}

/// Members who send into their group while its pushes keep arriving: every send still
/// leaves on time, whatever the deliveries in between (a wake-up by the socket
/// takes its events without looking at the timer, and keeps the next due time it knew).
#[tokio::test(start_paused = true)]
async fn sends_stay_on_time_among_a_steady_stream_of_deliveries() {
    let plan = plan(
        r#"
seed = 9
drain = "1s"
[population]
users = 8
login_rate = 100
[[traffic]]
kind = "group"
groups = 1
group_size = 8
senders_per_group = 8
interval = "30ms"
messages = 40
size = 100
"#,
    );
    let opts = LoopbackOptions {
        latency: Duration::from_millis(7),
        ..LoopbackOptions::default()
    };
    let (out, d, _) = run_loopback(&plan, opts).await;
    // 8 senders × 40 messages, each to the 7 other members.
    assert_eq!(out.metrics.count(Counter::Sent), 320);
    assert_eq!((d.expected, d.via_push, d.lost), (2240, 2240, 0), "{d:?}");
    // On time: at the first 1 ms tick of the timer at or after the due time.
    let lag = out.metrics.hist(Hist::SendLag);
    assert_eq!(lag.len(), 320);
    assert!(lag.max() < 1_000, "a send {} µs late", lag.max());
}

#[tokio::test(start_paused = true)]
async fn a_panicking_user_is_an_engine_error_not_server_loss() {
    let plan = plan(
        r#"
seed = 5
drain = "1s"
[population]
users = 6
login_rate = 100
[[traffic]]
kind = "group"
groups = 1
group_size = 6
senders_per_group = 2
interval = "100ms"
messages = 10
size = 100
"#,
    );
    let TrafficShape::Group(g) = &plan.traffic[0].kind else {
        unreachable!("a group pattern");
    };
    let victim = g.groups[0].senders[0];
    let opts = LoopbackOptions {
        panic_user: Some(victim),
        ..LoopbackOptions::default()
    };
    let (out, d, _) = run_loopback(&plan, opts).await;
    let engine: Vec<_> = out
        .metrics
        .errors()
        .filter(|e| e.0 == ErrorKind::Engine)
        .collect();
    assert_eq!(engine.len(), 1);
    let (_, n, examples) = engine[0];
    assert_eq!(n, 1);
    assert!(examples[0].contains("injected panic"), "{examples:?}");
    assert!(
        examples[0].starts_with(&format!("user {victim}:")),
        "{examples:?}"
    );
    // The other sender's 10 messages reach the 4 members left; the victim's own track is
    // not expected any more, so nothing is lost.
    assert_eq!((d.expected, d.delivered, d.lost), (40, 40, 0), "{d:?}");
    assert!(
        out.notes.iter().any(|n| n.contains("panicked")),
        "{:?}",
        out.notes
    );
    assert!(!out.interrupted);
}

/// Runs [`DIRECT`] with the first receiver's first `refused` logins refused.
async fn direct_with_refused_logins(refused: u32) -> (Outcome, Delivery) {
    let plan = plan(DIRECT);
    let TrafficShape::Direct(d) = &plan.traffic[0].kind else {
        unreachable!("a direct pattern");
    };
    let victim = d.receivers[0];
    let opts = LoopbackOptions {
        refuse_logins: Some((victim, refused)),
        ..LoopbackOptions::default()
    };
    let (out, d, _) = run_loopback(&plan, opts).await;
    (out, d)
}

#[tokio::test(start_paused = true)]
async fn a_recipient_never_reached_is_unverified_not_lost() {
    let (out, d) = direct_with_refused_logins(u32::MAX).await;
    // 4 senders × 5 messages were meant for the victim; the server's storage of them can't
    // be checked, so they are neither delivered nor lost.
    assert_eq!(
        (d.expected, d.delivered, d.lost, d.unverified),
        (80, 60, 0, 20),
        "{d:?}"
    );
    assert!(
        d.examples.iter().any(|e| e.kind == Problem::Unverified),
        "{:?}",
        d.examples
    );
    assert!(out.metrics.errors().any(|e| e.0 == ErrorKind::AuthFailed));
}

#[tokio::test(start_paused = true)]
async fn a_recipient_whose_first_login_failed_is_verified_at_the_end() {
    let (_, d) = direct_with_refused_logins(1).await;
    // The final verification logs the victim in and finds its 20 messages stored.
    assert_eq!(
        (d.expected, d.delivered, d.repaired, d.lost, d.unverified),
        (80, 80, 20, 0, 0),
        "{d:?}"
    );
}

/// A connection lost while writing is one error of kind `closed_by_peer`, however
/// many calls (send, flush, the next read) find it gone; the user reconnects, and the send
/// that never arrived is a failed send, not a loss.
#[tokio::test(start_paused = true)]
async fn a_connection_lost_while_writing_is_one_error() {
    let plan = plan(DIRECT);
    let TrafficShape::Direct(d) = &plan.traffic[0].kind else {
        unreachable!("a direct pattern");
    };
    let opts = LoopbackOptions {
        cut_user: Some(d.senders[0]),
        ..LoopbackOptions::default()
    };
    let (out, d, _) = run_loopback(&plan, opts).await;
    let errors: Vec<_> = out.metrics.errors().map(|(k, n, _)| (k, n)).collect();
    assert_eq!(errors, [(ErrorKind::ClosedByPeer, 1)]);
    assert_eq!(out.metrics.count(Counter::Disconnects), 1);
    assert_eq!(
        out.metrics.count(Counter::LoginOk),
        10 + 1,
        "it reconnected"
    );
    assert_eq!(
        (
            out.metrics.count(Counter::SendErrors),
            out.metrics.count(Counter::Unconfirmed)
        ),
        (0, 1),
        "the send cut off: written (buffered), never confirmed"
    );
    assert_eq!((d.expected, d.delivered, d.lost), (79, 79, 0), "{d:?}");
}

/// Each progress tick moves the seconds that are over out of every recorder into
/// one merged series, so a recorder holds the last second or two however long the run (a
/// 24-hour soak used to keep each slot's own series, ~9 bytes a latency), and the result
/// is exactly that of recorders that kept everything.
#[tokio::test(start_paused = true)]
async fn recorders_hold_only_the_seconds_not_yet_over() {
    const SLOTS: usize = 4;
    let ledger = plan(DIRECT).ledger;
    let shared = Arc::new(Shared::new(
        7,
        crate::clock::Clock::default(),
        SLOTS,
        &ledger,
        &[],
        Vec::new(),
        foldhash::HashMap::default(),
    ));
    let (_signal_tx, signals) = watch::channel(0u32);
    let mut c = Conductor {
        shared: shared.clone(),
        signals,
        on_progress: |_: &Progress| {},
        interrupted: false,
        last_tick: Instant::now(),
        held: super::held::Held::new(super::held::PlannedOnline::of(
            &plan(DIRECT).population,
            0..0,
            Duration::ZERO,
        )),
    };
    let mut want = Metrics::new();
    let mut record = |slot: usize, sec: u32, h: Hist, us: u64| {
        shared.recorder(slot).metrics.record(sec, h, us);
        want.record(sec, h, us);
    };
    for sec in 0..600u32 {
        for slot in 0..SLOTS {
            for k in 0..40 {
                let us = 200 + u64::from(sec * 7 + k * 101) % 5_000 + slot as u64 * 13;
                record(slot, sec, Hist::EndToEnd, us);
                record(slot, sec, Hist::SendAck, us / 2);
            }
            // A user that applies what it recorded after the tick moved its second.
            if sec > 0 {
                record(slot, sec - 1, Hist::EndToEnd, 9_000);
            }
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        c.tick();
        for slot in 0..SLOTS {
            let held = shared.recorder(slot).metrics.seconds().count();
            assert!(
                held <= 1,
                "slot {slot} holds {held} seconds at second {sec}"
            );
        }
    }
    // The tick's online gauge (0 users) opened the second it ran in.
    want.gauge_online(600, 0);
    assert_eq!(shared.collect(&ledger).metrics, want);
}

/// 200 users who come and go over a 20 s day and talk to their contacts.
pub(super) const DAY: &str = r#"
seed = 3
drain = "2s"
[population]
users = 200
[population.sessions]
day = "20s"
length = { lognormal = "3s", spread = 1.0 }
gap = { exponential = "3s" }
[population.contacts]
mean = 6
[population.groups]
count = 10
min = 3
max = 80
[[traffic]]
kind = "chat"
rate = 100
group_rate = 20
size = 100
"#;

#[tokio::test(start_paused = true)]
async fn users_who_come_and_go_get_every_message_of_their_contacts_exactly_once() {
    let plan = plan(DAY);
    let (out, d, _) = run_loopback(&plan, LoopbackOptions::default()).await;
    let sent = out.metrics.count(Counter::Sent);
    // 120 msgs/s over 20 s, a Poisson count: within 10% of 2400.
    assert!((2160..2640).contains(&sent), "{sent} sent");
    assert_eq!(
        out.metrics.count(Counter::Dropped),
        0,
        "sends only while online"
    );
    assert!(
        d.expected > sent + 400,
        "group messages reach every member: {d:?}"
    );
    assert_eq!(
        (d.delivered, d.lost, d.duplicated),
        (d.expected, 0, 0),
        "{d:?}"
    );
    assert!(d.via_sync > 100 && d.via_push > 100, "{d:?}");
    assert!(!out.interrupted);
    assert_eq!(out.metrics.errors().count(), 0, "{:?}", out.metrics);
}

#[test]
fn shards_plan_the_same_users_contacts_and_sends_as_one_process() {
    let whole = plan(DAY);
    let all = super::schedule::build(&whole, 0..200);
    let mut planned = 0;
    let mut tracks = Vec::new();
    let mut due = Vec::new();
    for index in 0..4 {
        let shard = Shard { index, count: 4 };
        let p = scenario::parse(DAY, Path::new("t.toml"), &[], shard).expect("test scenario");
        assert_eq!(p.population.sessions, whole.population.sessions);
        assert_eq!(p.population.contacts, whole.population.contacts);
        assert_eq!(p.traffic, whole.traffic);
        let s = super::schedule::build(&p, shard.range(200));
        planned += s.planned;
        tracks.extend(s.expect.tracks);
        due.extend(s.expect.due);
    }
    let (mut whole_tracks, mut whole_due) = (all.expect.tracks, all.expect.due);
    for v in [&mut tracks, &mut whole_tracks] {
        v.sort_unstable();
    }
    // Every shard counts the sends of every group stream (as for `group` patterns).
    for v in [&mut due, &mut whole_due] {
        v.sort_unstable();
        v.dedup();
    }
    assert_eq!(planned, all.planned);
    assert!(planned > 1000, "{planned}");
    assert_eq!(tracks, whole_tracks);
    assert_eq!(due, whole_due);
}

/// The engine numbers the run's groups as the plan lists them, so a typing notice's group
/// number names the same members in the report.
#[test]
fn the_schedule_numbers_groups_as_the_plan_lists_them() {
    let text = format!(
        "{DAY}\n[[traffic]]\nname = \"rooms\"\nkind = \"group\"\ngroups = 3\ngroup_size = 4\nrate = 1\n\
         messages = 1\n"
    );
    let plan = plan(&text);
    let sched = super::schedule::build(&plan, 0..200);
    let names: Vec<&str> = plan.groups().map(|g| g.name.as_str()).collect();
    assert_eq!(names.len(), 13);
    let numbered: Vec<&str> = sched.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(numbered, names);
    assert!(sched.groups.iter().enumerate().all(|(i, g)| g.index == i));
}

/// The phase and the traffic start every user reads at every wake-up follow the run as it
/// moves on, and never go back: a later phase stays, a second traffic start changes nothing.
#[tokio::test(start_paused = true)]
async fn the_phase_and_traffic_start_users_read_follow_the_run_and_never_go_back() {
    use super::shared::EngineState;
    let shared = Shared::new(
        7,
        crate::clock::Clock::default(),
        1,
        &plan(DIRECT).ledger,
        &[],
        Vec::new(),
        foldhash::HashMap::default(),
    );
    let mut phases = shared.phase_changes();
    assert_eq!(
        (shared.phase(), shared.traffic_start()),
        (EngineState::Running, None)
    );
    assert_eq!(shared.traffic_start_us(), None);
    let at = Instant::now() + Duration::from_secs(2);
    shared.start_traffic(at);
    shared.start_traffic(at + Duration::from_secs(5));
    assert_eq!(shared.traffic_start(), Some(at));
    assert_eq!(shared.traffic_start_us(), Some(shared.wall_of(at)));
    for (to, want) in [
        (EngineState::Draining, EngineState::Draining),
        (EngineState::Running, EngineState::Draining),
        (EngineState::Closing, EngineState::Closing),
        (EngineState::Abort, EngineState::Abort),
        (EngineState::Closing, EngineState::Abort),
    ] {
        shared.advance(to);
        assert_eq!(shared.phase(), want, "after advancing to {to:?}");
        assert_eq!(*phases.borrow_and_update(), want, "the watch agrees");
    }
}
