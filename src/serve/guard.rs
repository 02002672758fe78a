//! The guard in front of every accepted TCP connection, against clients that hold
//! connections without ever logging in (slowloris):
//!
//! - the HTTP request (for `/ws`, the upgrade) must arrive within `--handshake-timeout`
//!   of the accept, or the connection is closed; a plain HTTP connection (`/metrics`)
//!   lives at most that long;
//! - at most `--max-unauthenticated` connections are not yet logged in. At the cap the
//!   server stops accepting (new connections wait in the listen backlog) until one of them
//!   logs in or goes, or until the oldest has been pending longer than the handshake
//!   timeout: then a new one evicts it. So a storm of real clients is admitted as fast as
//!   they log in, none evicted, while idle ones that fill the cap are pushed out after the
//!   timeout, and every such connection is bounded in count and time.
//!
//! [`GatedListener`] wraps each accepted stream in a [`Guarded`] stream; the session
//! learns of its guard through the [`Pass`] (axum's connect info) and calls
//! [`Pass::upgraded`] and [`Pass::logged_in`]. After login the guard costs one relaxed
//! load per read or write.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::metrics::Metrics;

const PENDING: u8 = 0;
const LOGGED_IN: u8 = 1;
const EVICTED: u8 = 2;

/// The guard state of one connection, shared by its stream and its session.
#[derive(Debug)]
struct Slot {
    id: u64,
    admitted: Instant,
    state: AtomicU8,
    upgraded: AtomicBool,
    waker: AtomicWaker,
}

/// The connections not yet logged in, oldest first, and the cap on their number.
#[derive(Debug)]
pub struct Gate {
    pending: Mutex<BTreeMap<u64, Arc<Slot>>>,
    next: AtomicU64,
    cap: usize,
    handshake_timeout: Duration,
    metrics: Arc<Metrics>,
    /// Woken when a pending connection leaves (logged in or gone).
    freed: Notify,
}

impl Gate {
    /// A gate holding at most `cap` connections that are not logged in, each of which
    /// must send its HTTP request within `handshake_timeout`.
    pub fn new(cap: usize, handshake_timeout: Duration, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Gate {
            pending: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
            cap: cap.max(1),
            handshake_timeout,
            metrics,
            freed: Notify::new(),
        })
    }

    /// How long to wait before accepting another connection: `None` when there is room, or
    /// the oldest pending connection may be evicted (it has been pending longer than the
    /// handshake timeout); otherwise until it may.
    fn wait_for_room(&self) -> Option<Duration> {
        let pending = self.lock();
        if pending.len() < self.cap {
            return None;
        }
        let age = pending.first_key_value()?.1.admitted.elapsed();
        self.handshake_timeout
            .checked_sub(age)
            .filter(|w| !w.is_zero())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Slot>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a new connection, evicting the oldest pending ones past the cap.
    fn admit(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            admitted: Instant::now(),
            state: AtomicU8::new(PENDING),
            upgraded: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        let mut pending = self.lock();
        while pending.len() >= self.cap {
            let Some((_, old)) = pending.pop_first() else {
                break;
            };
            old.state.store(EVICTED, Ordering::Release);
            old.waker.wake();
            self.metrics.unauthenticated_evicted.inc();
        }
        pending.insert(slot.id, slot.clone());
        self.metrics.unauthenticated.set(gauge(pending.len()));
        slot
    }

    /// Forgets `slot` (logged in or gone); true when it was still pending.
    fn release(&self, slot: &Slot) -> bool {
        let mut pending = self.lock();
        let was = pending.remove(&slot.id).is_some();
        self.metrics.unauthenticated.set(gauge(pending.len()));
        if was {
            self.freed.notify_one();
        }
        was
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A TCP listener whose streams are [`Guarded`] by a [`Gate`] (and have `TCP_NODELAY`:
/// latency of small frames matters more than packet count on this server).
#[derive(Debug)]
pub struct GatedListener {
    inner: TcpListener,
    gate: Arc<Gate>,
}

impl GatedListener {
    /// Guards the connections of `inner` with `gate`.
    pub fn new(inner: TcpListener, gate: Arc<Gate>) -> Self {
        GatedListener { inner, gate }
    }
}

impl Listener for GatedListener {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        while let Some(wait) = self.gate.wait_for_room() {
            tokio::select! {
                () = self.gate.freed.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
        let (tcp, addr) = Listener::accept(&mut self.inner).await;
        let _ = tcp.set_nodelay(true);
        let slot = self.gate.admit();
        let deadline = Box::pin(tokio::time::sleep(self.gate.handshake_timeout));
        let stream = Guarded {
            tcp,
            slot,
            gate: self.gate.clone(),
            deadline: Some(deadline),
            settled: false,
        };
        (stream, addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An accepted TCP stream that fails once its connection is evicted or its handshake
/// timed out (so hyper or the session closes it), until the connection logs in.
#[derive(Debug)]
pub struct Guarded {
    tcp: TcpStream,
    slot: Arc<Slot>,
    gate: Arc<Gate>,
    deadline: Option<Pin<Box<Sleep>>>,
    /// Logged in: nothing more to check.
    settled: bool,
}

impl Guarded {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.settled {
            return Ok(());
        }
        self.slot.waker.register(cx.waker());
        match self.slot.state.load(Ordering::Acquire) {
            LOGGED_IN => {
                self.settled = true;
                self.deadline = None;
                return Ok(());
            }
            EVICTED => {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "evicted: too many connections are not logged in",
                ))
            }
            _ => {}
        }
        if self.slot.upgraded.load(Ordering::Acquire) {
            self.deadline = None;
        }
        if let Some(d) = &mut self.deadline {
            if d.as_mut().poll(cx).is_ready() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no complete HTTP request within the handshake timeout",
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if !self.settled {
            self.gate.release(&self.slot);
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// What a request handler learns of its connection's guard (axum connect info).
#[derive(Debug, Clone)]
pub struct Pass {
    slot: Arc<Slot>,
    gate: Arc<Gate>,
}

impl Pass {
    /// The upgrade completed: the handshake timeout no longer applies (the session's
    /// login timeout does).
    pub fn upgraded(&self) {
        self.slot.upgraded.store(true, Ordering::Release);
    }

    /// The connection logged in: it leaves the unauthenticated set and is never evicted.
    /// False when it was evicted first (the connection is closing).
    pub fn logged_in(&self) -> bool {
        let ok = self
            .slot
            .state
            .compare_exchange(PENDING, LOGGED_IN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if ok {
            self.gate.release(&self.slot);
        }
        ok
    }
}

impl Connected<IncomingStream<'_, GatedListener>> for Pass {
    fn connect_info(stream: IncomingStream<'_, GatedListener>) -> Self {
        let io = stream.io();
        Pass {
            slot: io.slot.clone(),
            gate: io.gate.clone(),
        }
    }
}
