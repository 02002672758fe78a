//! The generator's send lag (due → written) counts the time a write waits on a
//! socket the server does not read. The engine runs in this process (so a start barrier
//! of the test's can hold traffic until the server is stopped) against the real
//! `msgstorm serve` as a child process, stopped with SIGSTOP: the kernel keeps its socket
//! open but nothing reads it, so the sender's write blocks once the socket buffers are
//! full, until SIGCONT.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use msgstorm::driver::native::NativeDriver;
use msgstorm::driver::Driver;
use msgstorm::engine::{self, RunOptions, StartBarrier};
use msgstorm::metrics::{Counter, Hist};
use msgstorm::scenario::{self, Shard};
use tokio::sync::{watch, Notify};

use crate::common::{ChildServer, SECRET, WAIT};

/// One message far larger than what the socket buffers of a connection whose reader never
/// read much can hold (at most `tcp_wmem`'s 4 MiB on the sender's side plus the 128 KiB
/// `tcp_rmem` default on the server's: its receive buffer only grows as it reads), so its
/// write cannot finish while the server is stopped.
const SIZE: usize = 12 << 20;
/// How long the server reads nothing: the fault under test, not a wait for an event.
const STALL: Duration = Duration::from_secs(1);
/// The pattern's interval: the one send is due within it of the traffic start.
const INTERVAL: Duration = Duration::from_millis(10);

/// A start barrier the test holds shut: the engine says when its users are logged in, and
/// traffic starts when the test opens it and the engine has seen it open.
#[derive(Debug, Default)]
struct Gate {
    arrived: Notify,
    open: AtomicBool,
    passed: Notify,
}

impl StartBarrier for Gate {
    fn arrive(&self) -> std::io::Result<()> {
        self.arrived.notify_one();
        Ok(())
    }

    fn missing(&self) -> Vec<u32> {
        if self.open.load(Ordering::Acquire) {
            self.passed.notify_one();
            Vec::new()
        } else {
            vec![1]
        }
    }

    fn count(&self) -> u32 {
        2
    }
}

/// Wall-clock µs now.
fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_micros() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_blocked_on_a_full_socket_counts_in_send_lag() {
    let server = ChildServer::start(&[
        "--max-frame",
        "16MiB",
        "--max-body",
        "16MiB",
        "--durability",
        "normal",
    ]);
    let text = format!(
        r#"
seed = 24
drain = "20s"
[target]
url = "{url}"
[target.auth]
secret = "{SECRET}"
[population]
users = 2
login_rate = 100
[[traffic]]
kind = "direct"
senders = 1
receivers = 1
interval = "{interval}ms"
messages = 1
size = {SIZE}
[ledger]
verify_sync = false
"#,
        url = server.ws_url(),
        interval = INTERVAL.as_millis(),
    );
    let plan = scenario::parse(&text, "send_lag.toml".as_ref(), &[], Shard::WHOLE)
        .expect("the scenario is valid");
    let driver = NativeDriver::new(&plan.driver_config(24)).expect("the native driver builds");
    let gate = Arc::new(Gate::default());
    let opts = RunOptions {
        run_id: 24,
        traffic_at: None,
        barrier: Some(gate.clone()),
        clock: msgstorm::clock::Clock::default(),
        traffic_seen: None,
        live: None,
    };
    let (_signal_tx, signals) = watch::channel(0u32);
    let run = tokio::spawn(async move { engine::run(&plan, driver, opts, signals, |_| {}).await });

    tokio::time::timeout(WAIT, gate.arrived.notified())
        .await
        .expect("both users logged in");
    server.signal("STOP");
    gate.open.store(true, Ordering::Release);
    tokio::time::timeout(WAIT, gate.passed.notified())
        .await
        .expect("traffic started");
    tokio::time::sleep(STALL).await;
    // Taken before the server can read again: the write ends after this.
    let resumed_us = wall_us();
    server.signal("CONT");
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the run ends")
        .expect("the run does not panic");

    let m = &out.metrics;
    assert_eq!(
        (m.count(Counter::Sent), m.count(Counter::Accepted)),
        (1, 1),
        "{:?}",
        m.errors().collect::<Vec<_>>()
    );
    assert_eq!(out.ledger.summary().delivered, 1);
    let traffic_us =
        out.started_wall_us + out.traffic_started.expect("traffic started").as_micros() as u64;
    let due_by_us = traffic_us + INTERVAL.as_micros() as u64;
    // The message could not be written before the server read again.
    let blocked_at_least = resumed_us.saturating_sub(due_by_us);
    assert!(
        blocked_at_least >= STALL.as_micros() as u64 / 2,
        "the server was stopped {blocked_at_least} µs after the send was due"
    );
    let lag = m.hist(Hist::SendLag);
    assert_eq!(lag.len(), 1);
    // 1 ms for rounding to µs on two clocks.
    assert!(
        lag.max() + 1_000 >= blocked_at_least,
        "send lag {} µs, but the write waited at least {blocked_at_least} µs on the stopped \
         server",
        lag.max()
    );
    let ack = m.hist(Hist::SendAck);
    assert!(ack.max() >= lag.max(), "ack {} µs after due", ack.max());
}
