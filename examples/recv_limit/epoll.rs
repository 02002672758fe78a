//! Mode `epoll`: level-triggered `epoll_pwait2` (nanosecond timeouts, so the pacing is
//! exact) over every connection, then `recv` into one 64 KiB buffer per ready connection
//! until a read comes back short (the socket is drained; a further `recv` would only say
//! `EAGAIN`) — libc directly, no mio. Due bursts go out with one `send` each. With ticks,
//! the loop sleeps (`nanosleep`) to the next tick and takes what is ready without waiting.

use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::frames::{FrameReader, Tally};
use crate::pace::{send_all, send_due};
use crate::{BoxError, Lap};

/// Events taken per wait.
const EVENTS: usize = 1024;
/// Bytes per `recv`.
const READ_BUF: usize = 64 * 1024;

/// Receives (and sends, with a `pacer`) until the goal is reached or its deadline passes.
pub fn run(mut lap: Lap<'_>) -> Result<Tally, BoxError> {
    let ep = epoll_for(lap.conns)?;
    let fds: Vec<RawFd> = lap.conns.iter().map(AsRawFd::as_raw_fd).collect();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    let (mut buf, mut tally) = (vec![0u8; READ_BUF], Tally::default());
    let mut readers = vec![FrameReader::default(); lap.conns.len()];
    loop {
        let now = Instant::now();
        let send = |conn: usize, bytes: &[u8]| send_all(fds[conn], bytes);
        let mut wait = send_due(lap.pacer.as_deref_mut(), now, lap.progress, send)?;
        if lap.goal.over(lap.progress, &tally, now) {
            return Ok(tally);
        }
        if let Some(tick) = lap.ticks.next(now) {
            std::thread::sleep(tick.saturating_duration_since(Instant::now()));
            wait = Duration::ZERO;
        }
        let ready = wait_ready(&ep, &mut events, wait)?;
        tally.waits += 1;
        for ev in &events[..ready] {
            let conn = ev.u64 as usize;
            drain(fds[conn], &mut buf, &mut readers[conn], &mut tally)?;
        }
    }
}

/// An epoll instance watching every connection for input, its data the connection's index.
fn epoll_for(conns: &[TcpStream]) -> Result<OwnedFd, BoxError> {
    // SAFETY: plain syscall; the result is checked before use.
    let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if raw < 0 {
        return Err(format!("epoll_create1: {}", std::io::Error::last_os_error()).into());
    }
    // SAFETY: `raw` is a new epoll fd nobody else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(raw) };
    for (i, c) in conns.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: both fds are open; `ev` is a valid event for the call to read.
        let r = unsafe { libc::epoll_ctl(raw, libc::EPOLL_CTL_ADD, c.as_raw_fd(), &mut ev) };
        if r < 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()).into());
        }
    }
    Ok(ep)
}

/// Waits up to `wait` for ready connections; how many `events` holds.
fn wait_ready(
    ep: &OwnedFd,
    events: &mut [libc::epoll_event],
    wait: Duration,
) -> Result<usize, BoxError> {
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    let max = libc::c_int::try_from(events.len())?;
    // SAFETY: `events` is writable for `max` entries; `ts` lives across the call; a null
    // signal mask means none is changed.
    let n = unsafe {
        libc::epoll_pwait2(
            ep.as_raw_fd(),
            events.as_mut_ptr(),
            max,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(format!("epoll_pwait2: {e}").into());
    }
    Ok(n as usize)
}

/// Reads `fd` until a short read or `EAGAIN`, feeding its frame reader.
fn drain(
    fd: RawFd,
    buf: &mut [u8],
    reader: &mut FrameReader,
    tally: &mut Tally,
) -> Result<(), BoxError> {
    loop {
        // SAFETY: `buf` is writable for its length; `fd` is an open socket.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n > 0 {
            let n = n as usize;
            tally.reads += 1;
            tally.bytes += n as u64;
            reader.feed(&buf[..n], tally)?;
            if n < buf.len() {
                return Ok(());
            }
            continue;
        }
        if n == 0 {
            return Err("a connection was closed by the server".into());
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::WouldBlock => {
                tally.empty_reads += 1;
                return Ok(());
            }
            std::io::ErrorKind::Interrupted => {}
            _ => return Err(format!("recv: {e}").into()),
        }
    }
}
