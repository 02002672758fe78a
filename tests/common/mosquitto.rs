//! A real mosquitto broker for the MQTT tests.
//!
//! [`Mosquitto::start`] writes a config file into a temp dir, starts the broker on a free
//! loopback port and waits until it accepts connections; dropping it kills the broker.
//! Its tests are ignored when mosquitto is not installed (`cfg(peer_mosquitto)`, see
//! [`peers`](super::peers)).

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::peers::free_port;
pub use super::peers::required;

/// The longest a broker may take to start.
const START_WAIT: Duration = Duration::from_secs(5);

/// A running mosquitto; killed on drop.
pub struct Mosquitto {
    child: Child,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// Its temp dir (config, password file, log).
    pub dir: tempfile::TempDir,
}

impl Mosquitto {
    /// Starts mosquitto with `extra` appended to a config of one loopback listener with
    /// anonymous access (override with `allow_anonymous false`). A missing mosquitto fails
    /// the test.
    pub fn start(extra: &str) -> Mosquitto {
        Mosquitto::start_with(|_| extra.to_owned())
    }

    /// Like [`Mosquitto::start`], with the extra config returned by `prepare(dir)`, which
    /// may write files (a password file) into the broker's temp dir first.
    pub fn start_with(prepare: impl FnOnce(&Path) -> String) -> Mosquitto {
        let bin = required("mosquitto");
        let dir = tempfile::tempdir().expect("temp dir");
        let extra = prepare(dir.path());
        let port = free_port();
        let conf = dir.path().join("mosquitto.conf");
        let anonymous = if extra.contains("allow_anonymous") {
            ""
        } else {
            "allow_anonymous true\n"
        };
        std::fs::write(
            &conf,
            format!("listener {port} 127.0.0.1\n{anonymous}persistence false\n{extra}\n"),
        )
        .expect("write mosquitto.conf");
        let log = std::fs::File::create(dir.path().join("mosquitto.log")).expect("log file");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start mosquitto");
        let mut m = Mosquitto { child, port, dir };
        let deadline = Instant::now() + START_WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!("mosquitto exited ({status}): {}", m.log());
            }
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen within {START_WAIT:?}: {}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `mqtt://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A second publisher on a broker: it subscribes to `filter` and publishes every message
/// it sees there once more, to the same topic (a bridge, or a client retrying a publish
/// that had gone through). Subscribers get both copies; for a persistent session that is
/// offline, the broker queues both.
pub struct Republisher {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: std::thread::JoinHandle<u64>,
}

impl Republisher {
    /// Subscribes to `filter` on the broker at 127.0.0.1:`port`; returns once the broker
    /// has confirmed the subscription, so nothing published after is missed.
    pub fn start(port: u16, filter: &str) -> Republisher {
        use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let filter = filter.to_owned();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let mut o = MqttOptions::new("republisher", "127.0.0.1", port);
                o.set_keep_alive(Duration::from_secs(30));
                let (client, mut events) = AsyncClient::new(o, 10_000);
                client
                    .try_subscribe(filter, QoS::AtLeastOnce)
                    .expect("subscribe");
                let mut seen = std::collections::HashSet::new();
                let (mut again, mut acked, mut stopping) = (0u64, 0u64, false);
                let work = async {
                    while !(stopping && acked == again) {
                        let ev = tokio::select! {
                            _ = &mut stopped, if !stopping => {
                                stopping = true;
                                continue;
                            }
                            ev = events.poll() => ev.expect("the republisher's connection"),
                        };
                        match ev {
                            Event::Incoming(Packet::SubAck(_)) => {
                                let _ = ready_tx.send(());
                            }
                            // Its own copies come back too: each body once.
                            Event::Incoming(Packet::Publish(p))
                                if seen.insert(p.payload.clone()) =>
                            {
                                let body = p.payload.to_vec();
                                client
                                    .try_publish(p.topic, QoS::AtLeastOnce, false, body)
                                    .expect("publish again");
                                again += 1;
                            }
                            Event::Incoming(Packet::PubAck(_)) => acked += 1,
                            _ => {}
                        }
                    }
                };
                tokio::time::timeout(Duration::from_secs(120), work)
                    .await
                    .expect("the republisher ended within 2 min");
                again
            })
        });
        ready_rx
            .recv_timeout(START_WAIT)
            .expect("the broker confirmed the republisher's subscription");
        Republisher {
            stop: Some(stop),
            thread,
        }
    }

    /// Stops once the broker has acknowledged every copy; returns how many it published.
    pub fn stop(mut self) -> u64 {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.thread.join().expect("the republisher's thread")
    }
}
