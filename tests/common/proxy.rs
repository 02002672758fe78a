//! A TCP proxy between msgstorm and a real peer, for the two things a peer does not do on
//! cue: closing every connection at once from the server's side, and sending bytes its
//! protocol does not allow.
//!
//! [`WireProxy::start`] listens on a free loopback port and relays each connection to the
//! peer. It watches both directions for message bodies (the envelope's `ms1:` magic), so a
//! test can wait until every user's connection carries traffic ([`WireProxy::wait_traffic`])
//! and then close them all ([`WireProxy::close_all`]: the client sees the server end the
//! connection). With [`Garbage`], the first connections get the garbage bytes from the
//! "server" at a frame boundary the garbage names (after the WebSocket upgrade response,
//! the first MQTT packet, …), exactly once each.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The envelope's magic, which every message body starts with.
const MAGIC: &[u8] = b"ms1:";

/// The longest a test waits for connections to carry traffic.
const TRAFFIC_WAIT: Duration = Duration::from_secs(30);

/// Bytes a peer's protocol does not allow, and where in a connection they go.
#[derive(Debug, Clone, Copy)]
pub struct Garbage {
    /// The end of the first frame the garbage follows, in what the server sent so far
    /// (`None`: not all of it yet).
    pub after: fn(&[u8]) -> Option<usize>,
    /// The bytes.
    pub bytes: &'static [u8],
}

impl Garbage {
    /// After a WebSocket upgrade response (its empty line).
    pub const fn after_http_head(bytes: &'static [u8]) -> Garbage {
        Garbage {
            after: http_head_end,
            bytes,
        }
    }
}

/// The end of an HTTP response head.
fn http_head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// One relayed connection.
struct Conn {
    client: TcpStream,
    server: TcpStream,
    /// A message body went through it (either way).
    traffic: AtomicBool,
    /// Either side ended it.
    ended: AtomicBool,
}

/// What the proxy's threads share.
#[derive(Default)]
struct State {
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Signalled whenever a connection opens, carries its first body or ends.
    changed: Condvar,
    /// Connections still to get garbage, and the garbage.
    garbage: Mutex<Option<(Garbage, usize)>>,
    /// Garbage sent so far (connections).
    injected: Mutex<usize>,
}

impl State {
    /// Whether this connection gets the garbage (counted when it does).
    fn take_turn(&self) -> bool {
        let mut g = self.garbage.lock().expect("proxy lock");
        match g.as_mut() {
            Some((_, left @ 1..)) => {
                *left -= 1;
                *self.injected.lock().expect("proxy lock") += 1;
                true
            }
            _ => false,
        }
    }

    fn notify(&self) {
        let _guard = self.conns.lock().expect("proxy lock");
        self.changed.notify_all();
    }
}

/// A running proxy; it runs until the test process ends.
pub struct WireProxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    state: Arc<State>,
}

impl WireProxy {
    /// A proxy to `upstream` (`HOST:PORT`); with `garbage`, its first `connections`
    /// connections get the garbage.
    pub fn start(upstream: &str, garbage: Option<(Garbage, usize)>) -> WireProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let state = Arc::new(State {
            garbage: Mutex::new(garbage),
            ..State::default()
        });
        let shared = Arc::clone(&state);
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                relay(&shared, client, server);
            }
        });
        WireProxy { port, state }
    }

    /// `url` with its `HOST:PORT` (the peer's) replaced by the proxy's.
    pub fn url(&self, url: &str, upstream: &str) -> String {
        assert!(url.contains(upstream), "{url} is not at {upstream}");
        url.replacen(upstream, &format!("127.0.0.1:{}", self.port), 1)
    }

    /// Waits until `n` open connections have each carried a message body; panics after
    /// 30 s with what it saw.
    pub fn wait_traffic(&self, n: usize) {
        let deadline = Instant::now() + TRAFFIC_WAIT;
        let mut conns = self.state.conns.lock().expect("proxy lock");
        loop {
            let busy = conns
                .iter()
                .filter(|c| c.traffic.load(Ordering::SeqCst) && !c.ended.load(Ordering::SeqCst))
                .count();
            if busy >= n {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{busy} of {n} connections carried traffic within {TRAFFIC_WAIT:?} ({} opened)",
                conns.len()
            );
            conns = self
                .state
                .changed
                .wait_timeout(conns, left)
                .expect("lock")
                .0;
        }
    }

    /// Ends every open connection on both sides, as a server closing them; returns how
    /// many.
    pub fn close_all(&self) -> usize {
        let conns = self.state.conns.lock().expect("proxy lock");
        let open: Vec<&Arc<Conn>> = conns
            .iter()
            .filter(|c| !c.ended.swap(true, Ordering::SeqCst))
            .collect();
        for c in &open {
            let _ = c.client.shutdown(Shutdown::Both);
            let _ = c.server.shutdown(Shutdown::Both);
        }
        open.len()
    }

    /// How many connections got the garbage.
    pub fn injected(&self) -> usize {
        *self.state.injected.lock().expect("proxy lock")
    }
}

/// Relays one connection on two threads, the garbage going to the client if its turn.
fn relay(state: &Arc<State>, client: TcpStream, server: TcpStream) {
    let garbage = state.garbage.lock().expect("proxy lock").map(|(g, _)| g);
    let clone = |s: &TcpStream| s.try_clone().expect("clone a socket");
    let up = (clone(&client), clone(&server));
    let down = (clone(&server), clone(&client));
    let conn = Arc::new(Conn {
        client,
        server,
        traffic: AtomicBool::new(false),
        ended: AtomicBool::new(false),
    });
    state
        .conns
        .lock()
        .expect("proxy lock")
        .push(Arc::clone(&conn));
    state.notify();
    let (s, c) = (Arc::clone(state), Arc::clone(&conn));
    std::thread::spawn(move || pipe(up.0, up.1, &s, &c, None));
    let s = Arc::clone(state);
    std::thread::spawn(move || pipe(down.0, down.1, &s, &conn, garbage));
}

/// Copies `from` to `to` until either side ends, noting the first message body; with
/// `garbage`, it goes to `to` once, at its boundary, while connections are still to get
/// it (a connection that ends before, such as msgstorm's probe of the target, gets none).
fn pipe(
    mut from: TcpStream,
    mut to: TcpStream,
    state: &State,
    conn: &Conn,
    mut garbage: Option<Garbage>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    // What came before the garbage's boundary was found.
    let mut head = Vec::new();
    // The end of the previous read, for a magic split between two reads.
    let mut tail = Vec::new();
    while let Ok(n @ 1..) = from.read(&mut buf) {
        let data = &buf[..n];
        tail.extend_from_slice(data);
        if !conn.traffic.load(Ordering::SeqCst) && tail.windows(MAGIC.len()).any(|w| w == MAGIC) {
            conn.traffic.store(true, Ordering::SeqCst);
            state.notify();
        }
        tail.drain(..tail.len().saturating_sub(MAGIC.len() - 1));
        let out = match garbage {
            None => data.to_vec(),
            Some(g) => {
                head.extend_from_slice(data);
                let Some(at) = (g.after)(&head) else {
                    continue;
                };
                garbage = None;
                let mut out = head[..at].to_vec();
                if state.take_turn() {
                    out.extend_from_slice(g.bytes);
                }
                out.extend_from_slice(&head[at..]);
                out
            }
        };
        if to.write_all(&out).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
    if !conn.ended.swap(true, Ordering::SeqCst) {
        state.notify();
    }
}
