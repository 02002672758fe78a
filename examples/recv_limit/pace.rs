//! The senders: a paced schedule of bursts (each one `send` of `burst` pre-built masked
//! frames), the group's first `senders_per_group` members sending, groups taken in turn.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use msgstorm::wire::{DestRef, SendRef};

use crate::setup::Shape;
use crate::BoxError;

/// Longest sleep when no burst is due: how late the end of the run is noticed.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// The masking key of every client frame (any key is valid; the server unmasks each).
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// How far the senders are; shared with the receiving loop when they run in a thread of
/// their own.
#[derive(Debug, Default)]
pub struct Progress {
    sent: AtomicU64,
    finished: AtomicBool,
}

impl Progress {
    /// Messages sent so far, and whether the schedule is over.
    pub fn get(&self) -> (u64, bool) {
        let finished = self.finished.load(Ordering::Acquire);
        (self.sent.load(Ordering::Relaxed), finished)
    }
}

/// How the measured loop sleeps: until a connection is ready (so each push may be a
/// wake-up of its own), or to the next tick of a fixed clock, then takes whatever is ready:
/// one wake-up per tick, each push delayed up to a tick (tokio's timer wheel ticks every
/// millisecond too).
#[derive(Debug, Clone, Copy)]
pub struct Ticks {
    every: Option<Duration>,
    start: Instant,
}

impl Ticks {
    /// Ticks `every` so long from now on; `None` sleeps until readiness.
    pub fn new(every: Option<Duration>) -> Self {
        Self {
            every,
            start: Instant::now(),
        }
    }

    /// The first tick after `now`; `None` when the loop sleeps until readiness.
    pub fn next(&self, now: Instant) -> Option<Instant> {
        let every = self.every?.as_nanos().max(1);
        let n = now.saturating_duration_since(self.start).as_nanos() / every + 1;
        Some(self.start + Duration::from_nanos(u64::try_from(n * every).ok()?))
    }
}

/// The schedule of bursts and the bytes of each sender's burst.
#[derive(Debug)]
pub struct Pacer {
    bursts: Vec<Vec<u8>>,
    conns: Vec<usize>,
    per_burst: u64,
    interval: Duration,
    start: Instant,
    next: u64,
    total: u64,
}

impl Pacer {
    /// `rate` messages per second over `duration`, in bursts of `burst` messages of a
    /// `body`-byte body, from the first `per_group` members of each group.
    pub fn new(
        shape: Shape,
        per_group: usize,
        rate: u64,
        duration: Duration,
        burst: u64,
        body: usize,
    ) -> Result<Self, BoxError> {
        let body = "x".repeat(body);
        let (mut bursts, mut conns) = (Vec::new(), Vec::new());
        for k in 0..per_group {
            for g in 0..shape.groups {
                let group = format!("g{g}");
                let frame = SendRef {
                    r#ref: conns.len() as u64,
                    to: DestRef::Group(&group),
                    body: &body,
                };
                let one = masked_text(serde_json::to_string(&frame)?.as_bytes());
                bursts.push(one.repeat(usize::try_from(burst)?));
                conns.push(g * shape.size + k);
            }
        }
        Ok(Self {
            bursts,
            conns,
            per_burst: burst,
            interval: Duration::from_secs_f64(burst as f64 / rate as f64),
            start: Instant::now(),
            next: 0,
            total: (rate as f64 * duration.as_secs_f64()) as u64 / burst,
        })
    }

    /// Starts the schedule now.
    pub fn start(&mut self) {
        self.start = Instant::now();
    }

    /// When the next burst is due; `None` once all are sent.
    pub fn next_due(&self) -> Option<Instant> {
        (self.next < self.total).then(|| self.start + self.interval.mul_f64(self.next as f64))
    }

    /// The next burst if it is due at `now`: the connection it goes out on and its bytes,
    /// counted as sent in `progress`.
    pub fn due(&mut self, now: Instant, progress: &Progress) -> Option<(usize, &[u8])> {
        if self.next_due()? > now {
            return None;
        }
        let sender = usize::try_from(self.next).ok()? % self.bursts.len();
        self.next += 1;
        progress.sent.fetch_add(self.per_burst, Ordering::Relaxed);
        if self.next == self.total {
            progress.finished.store(true, Ordering::Release);
        }
        Some((self.conns[sender], &self.bursts[sender]))
    }

    /// Sends the whole schedule from this thread on `fds` (indexed by connection),
    /// sleeping until each burst is due.
    pub fn run_blocking(&mut self, fds: &[RawFd], progress: &Progress) -> Result<(), BoxError> {
        self.start();
        while let Some(at) = self.next_due() {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            while let Some((conn, bytes)) = self.due(Instant::now(), progress) {
                send_all(fds[conn], bytes)?;
            }
        }
        Ok(())
    }
}

/// Hands each burst due at `now` to `send` (its connection and bytes); how long the loop
/// may sleep before the next one is due.
pub fn send_due(
    pacer: Option<&mut Pacer>,
    now: Instant,
    progress: &Progress,
    mut send: impl FnMut(usize, &[u8]) -> Result<(), BoxError>,
) -> Result<Duration, BoxError> {
    let Some(p) = pacer else {
        return Ok(IDLE_WAIT);
    };
    while let Some((conn, bytes)) = p.due(now, progress) {
        send(conn, bytes)?;
    }
    let next = p.next_due().map(|at| at.saturating_duration_since(now));
    Ok(next.map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT)))
}

/// One `send` of all of `bytes` on a non-blocking socket; anything short of that (the
/// server stopped reading) is an error.
pub fn send_all(fd: RawFd, bytes: &[u8]) -> Result<(), BoxError> {
    // SAFETY: `bytes` is a live slice of `bytes.len()` bytes; `fd` is a socket the caller
    // keeps open.
    let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(format!("send: {}", std::io::Error::last_os_error()).into());
    }
    if n as usize != bytes.len() {
        return Err(format!("send: {n} of {} bytes went out", bytes.len()).into());
    }
    Ok(())
}

/// A client text frame (masked, as RFC 6455 wants from a client) of `payload`.
fn masked_text(payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x81];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= usize::from(u16::MAX) => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&MASK);
    frame.extend(payload.iter().zip(MASK.iter().cycle()).map(|(b, m)| b ^ m));
    frame
}
