//! msgstorm's own TCP proxy between the users and the target, for the network steps of
//! `[[chaos]]` (`tc netem` is not on every host) and for `cut`.
//!
//! Each connection is carried by one task: two directions, each a reader that stamps
//! every chunk with its arrival time and a writer that releases it when the current fault
//! allows — at once when there is none, after the delay (order kept), after a
//! retransmission timeout for a "lost" one, paced to a bandwidth, or not at all while the
//! network is a black hole (what was held passes afterwards, as TCP would retransmit it).
//! When a bandwidth limit ends, what it still holds goes at once: the link is back to full
//! speed, not paced on at the old rate long after the step.
//! A cut drops connections with a reset, no close handshake, on both sides.
//!
//! Written by hand: proxies in crates (e.g. toxiproxy's ports) are whole servers with
//! their own control API; this is the few hundred lines the steps need.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastrand::Rng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::scenario::{NetFault, RETRANSMIT_TIMEOUT};

/// The largest chunk read at once.
const CHUNK: usize = 16 * 1024;
/// Chunks a direction holds before it stops reading (back pressure, as a full TCP window).
const HELD: usize = 256;

/// The connections being carried, by id, each with what cuts it.
type Carried = Arc<Mutex<BTreeMap<u64, Arc<Notify>>>>;

/// A listening proxy to one upstream address.
#[derive(Debug)]
pub struct Proxy {
    /// Where the users connect.
    pub addr: SocketAddr,
    fault: watch::Sender<Option<NetFault>>,
    carried: Carried,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free loopback port to `upstream` (`host:port`); `seed` drives its
    /// random choices (jitter, loss).
    pub async fn start(upstream: String, seed: u64) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (fault, _) = watch::channel(None);
        let carried: Carried = Arc::default();
        let accept = tokio::spawn(accept(
            listener,
            upstream,
            fault.clone(),
            Arc::clone(&carried),
            seed,
        ));
        Ok(Proxy {
            addr,
            fault,
            carried,
            accept,
        })
    }

    /// What the network does from now on (`None`: nothing).
    pub fn set(&self, fault: Option<NetFault>) {
        self.fault.send_replace(fault);
    }

    /// How many connections it carries now.
    pub fn carried(&self) -> usize {
        self.carried.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Drops `fraction` of the connections carried now (chosen by `rng`) with a reset;
    /// returns how many it cut and how many there were.
    pub fn cut(&self, fraction: f64, rng: &mut Rng) -> (usize, usize) {
        let carried = self.carried.lock().unwrap_or_else(|p| p.into_inner());
        let all: Vec<&Arc<Notify>> = carried.values().collect();
        let n = ((all.len() as f64) * fraction).round() as usize;
        let mut chosen: Vec<usize> = (0..all.len()).collect();
        rng.shuffle(&mut chosen);
        for &i in &chosen[..n] {
            all[i].notify_one();
        }
        (n, all.len())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Accepts users' connections and carries each to `upstream` in a task of its own.
async fn accept(
    listener: TcpListener,
    upstream: String,
    fault: watch::Sender<Option<NetFault>>,
    carried: Carried,
    seed: u64,
) {
    let mut next = 0u64;
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        next += 1;
        let (id, upstream, fault, carried) = (
            next,
            upstream.clone(),
            fault.subscribe(),
            Arc::clone(&carried),
        );
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                // The target refuses: so does the proxy (the user sees its connection end).
                return;
            };
            let cut = Arc::new(Notify::new());
            carried
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, Arc::clone(&cut));
            carry(client, server, fault, &cut, seed ^ id).await;
            carried
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        });
    }
}

/// Carries one connection both ways until both sides closed, or a cut resets both.
async fn carry(
    mut client: TcpStream,
    mut server: TcpStream,
    fault: watch::Receiver<Option<NetFault>>,
    cut: &Notify,
    seed: u64,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let was_cut = {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let up = pump(cr, sw, fault.clone(), Rng::with_seed(seed));
        let down = pump(sr, cw, fault, Rng::with_seed(seed.rotate_left(32)));
        tokio::select! {
            _ = async { tokio::join!(up, down) } => false,
            () = cut.notified() => true,
        }
    };
    if was_cut {
        // A reset, not a close handshake: what a dead link or a crashed peer looks like.
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
}

/// One direction: chunks read from `r` released to `w` as the fault allows; `w` is shut
/// down after `r`'s end. With no fault and nothing held, a chunk is written as soon as it
/// is read (no hop through a queue: the proxy costs a read and a write); otherwise each
/// chunk is given its release time when it arrives (as netem decides a packet's delay when
/// it is queued) and waits in order while reading goes on — except that the end of a
/// bandwidth limit releases everything it paced at once.
async fn pump<R, W>(mut r: R, mut w: W, mut fault: watch::Receiver<Option<NetFault>>, mut rng: Rng)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    let mut held: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    // The latest release time given: a stream's bytes keep their order.
    let mut last = Instant::now();
    let mut open = true;
    // False once the proxy is gone: its last condition stays.
    let mut watching = true;
    // The condition of the previous turn: a bandwidth limit that ends releases its queue.
    let mut before: Option<NetFault> = None;
    loop {
        let now_fault = *fault.borrow_and_update();
        if matches!(before, Some(NetFault::Bandwidth(_))) && now_fault != before {
            let now = Instant::now();
            for h in &mut held {
                h.0 = h.0.min(now);
            }
            last = now;
        }
        before = now_fault;
        if held.is_empty() && now_fault.is_none() {
            if !open {
                break;
            }
            tokio::select! {
                n = r.read(&mut buf) => match n {
                    Ok(0) | Err(_) => open = false,
                    Ok(n) => {
                        if w.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                },
                c = fault.changed(), if watching => watching = c.is_ok(),
            }
            continue;
        }
        let blackhole = matches!(now_fault, Some(NetFault::Blackhole));
        let due = held.front().filter(|_| !blackhole).map(|h| h.0);
        let reading = open && held.len() < HELD;
        tokio::select! {
            n = r.read(&mut buf), if reading => match n {
                Ok(0) | Err(_) => open = false,
                Ok(n) => {
                    let at = stamp(now_fault, n, &mut last, &mut rng);
                    held.push_back((at, buf[..n].to_vec()));
                }
            },
            () = sleep_until_some(due) => {
                if let Some((_, chunk)) = held.pop_front() {
                    if w.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            }
            c = fault.changed(), if watching => watching = c.is_ok(),
        }
        if !open && held.is_empty() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

/// The release time of a chunk of `len` bytes arriving now under `fault`, after `last`
/// (the previous chunk's; moved on, by the chunk's transmission time under a bandwidth).
fn stamp(fault: Option<NetFault>, len: usize, last: &mut Instant, rng: &mut Rng) -> Instant {
    let now = Instant::now();
    let due = match fault {
        None | Some(NetFault::Blackhole) | Some(NetFault::Bandwidth(_)) => now,
        Some(NetFault::Delay { delay, jitter }) => {
            let extra = if jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_nanos(rng.u64(0..=jitter.as_nanos() as u64))
            };
            // Half each way: a round trip, and a message through the target, take `delay`
            // longer (as `tc netem delay` on one side would).
            now + delay / 2 + extra / 2
        }
        Some(NetFault::Loss(p)) if rng.f64() < p => now + RETRANSMIT_TIMEOUT,
        Some(NetFault::Loss(_)) => now,
    }
    .max(*last);
    *last = match fault {
        Some(NetFault::Bandwidth(bytes_per_s)) => {
            due + Duration::from_secs_f64(len as f64 / bytes_per_s as f64)
        }
        _ => due,
    };
    due
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on a free port: what it reads it writes back.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn round_trip(c: &mut TcpStream, bytes: &[u8]) -> Duration {
        let t = Instant::now();
        c.write_all(bytes).await.expect("write");
        let mut back = vec![0; bytes.len()];
        c.read_exact(&mut back).await.expect("read");
        assert_eq!(back, bytes, "bytes pass unchanged and in order");
        t.elapsed()
    }

    #[tokio::test]
    async fn carries_bytes_and_adds_the_delay_to_a_round_trip_while_a_step_lasts() {
        let proxy = Proxy::start(echo().await.to_string(), 1)
            .await
            .expect("proxy");
        let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
        let idle = round_trip(&mut c, b"hello").await;
        proxy.set(Some(NetFault::Delay {
            delay: Duration::from_millis(100),
            jitter: Duration::ZERO,
        }));
        let slowed = round_trip(&mut c, b"slow").await;
        assert!(
            slowed >= Duration::from_millis(100),
            "half of 100 ms each way: {slowed:?}"
        );
        proxy.set(None);
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        round_trip(&mut c, &big).await;
        assert!(idle < Duration::from_millis(100), "{idle:?}");
    }

    #[tokio::test]
    async fn loss_holds_a_chunk_one_retransmission_timeout_and_bandwidth_paces() {
        let proxy = Proxy::start(echo().await.to_string(), 4)
            .await
            .expect("proxy");
        let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
        round_trip(&mut c, b"up").await;
        proxy.set(Some(NetFault::Loss(1.0)));
        let lost = round_trip(&mut c, b"lost").await;
        assert!(
            lost >= RETRANSMIT_TIMEOUT * 2,
            "held one timeout each way: {lost:?}"
        );
        proxy.set(Some(NetFault::Bandwidth(100_000)));
        let big: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
        let paced = round_trip(&mut c, &big).await;
        assert!(
            paced >= Duration::from_millis(450),
            "50 kB at 100 kB/s takes half a second: {paced:?}"
        );
        proxy.set(None);
        assert!(round_trip(&mut c, b"free").await < Duration::from_millis(200));
    }

    #[tokio::test]
    async fn what_a_bandwidth_limit_queued_passes_at_once_when_it_ends() {
        let proxy = Proxy::start(echo().await.to_string(), 5)
            .await
            .expect("proxy");
        let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
        round_trip(&mut c, b"up").await;
        proxy.set(Some(NetFault::Bandwidth(1_000)));
        // 20 kB at 1 kB/s: 20 s each way if the limit outlived its step.
        let big: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        c.write_all(&big).await.expect("write");
        let mut first = [0u8; 1];
        c.read_exact(&mut first)
            .await
            .expect("the first byte passes, paced");
        proxy.set(None);
        let mut rest = vec![0u8; big.len() - 1];
        let ended = Instant::now();
        tokio::time::timeout(Duration::from_secs(8), c.read_exact(&mut rest))
            .await
            .expect("the queue passes once the limit ends")
            .expect("read");
        // Far under the 20 s a paced queue would take, with room for a loaded machine.
        assert!(
            ended.elapsed() < Duration::from_secs(4),
            "{:?}",
            ended.elapsed()
        );
        assert_eq!((first[0], &rest[..]), (big[0], &big[1..]), "in order");
    }

    #[tokio::test]
    async fn a_black_hole_holds_everything_until_it_ends() {
        let proxy = Proxy::start(echo().await.to_string(), 2)
            .await
            .expect("proxy");
        let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
        round_trip(&mut c, b"up").await;
        proxy.set(Some(NetFault::Blackhole));
        c.write_all(b"held").await.expect("write");
        let mut back = [0u8; 4];
        let early = tokio::time::timeout(Duration::from_millis(200), c.read_exact(&mut back)).await;
        assert!(early.is_err(), "nothing passes a black hole");
        proxy.set(None);
        c.read_exact(&mut back).await.expect("read after");
        assert_eq!(&back, b"held", "what was held passes afterwards");
    }

    #[tokio::test]
    async fn a_cut_resets_the_chosen_share_of_connections() {
        let proxy = Proxy::start(echo().await.to_string(), 3)
            .await
            .expect("proxy");
        let mut conns = Vec::new();
        for _ in 0..10 {
            let mut c = TcpStream::connect(proxy.addr).await.expect("connect");
            round_trip(&mut c, b"x").await;
            conns.push(c);
        }
        let (cut, of) = proxy.cut(0.3, &mut Rng::with_seed(7));
        assert_eq!((cut, of), (3, 10));
        let mut ended = 0;
        for c in &mut conns {
            let mut b = [0u8; 1];
            let _ = c.write_all(b"y").await;
            match c.read(&mut b).await {
                Ok(1) => {}
                _ => ended += 1,
            }
        }
        assert_eq!(ended, 3, "exactly the cut connections ended");
    }
}
