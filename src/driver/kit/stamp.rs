//! Kernel receive times (`SO_TIMESTAMPNS`): when the bytes a read returned reached this
//! machine, not when the generator got round to reading them.
//!
//! Under a wake tick ([`crate::runtime`]) a thread sleeps up to a tick before it reads, so
//! the time of the read would add up to a tick to every latency. A socket that stamps
//! arrivals is read with `recvmsg`, which returns the receive time of the last packet the
//! read took: a frame is never given a time before it arrived, and at most the rest of its
//! read's packets' spread after. tokio reads sockets with `recv` and offers no control
//! messages, so this read is written here, the way tokio's own is: a short read clears the
//! socket's readiness, so the next read waits for the kernel instead of asking it.

use std::io::{self, IoSliceMut};
use std::os::fd::AsRawFd;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::TcpStream;

/// An arrival older than this when it is asked for is taken for a stepped clock, not a
/// time: the wake tick is at most 10 ms.
const OLDEST: Duration = Duration::from_secs(10);

/// Room for one `SO_TIMESTAMPNS` control message (a `cmsghdr` and a `timespec`), aligned
/// as a `cmsghdr` must be.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Whether a connection's socket stamps arrivals, and the last read's stamp.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stamp {
    /// The socket was asked to stamp arrivals and agreed.
    on: bool,
    /// The last read's receive time, ns since the Unix epoch (0: it had none).
    last_ns: u64,
}

impl Stamp {
    /// Asks `tcp` to stamp arrivals when the run has a wake tick; a socket that refuses
    /// is read as any other (its receive times are the reads').
    pub fn for_socket(tcp: &TcpStream) -> Stamp {
        let on = crate::runtime::wake_tick().is_some()
            && setsockopt(tcp, sockopt::ReceiveTimestampns, &true).is_ok();
        Stamp { on, last_ns: 0 }
    }

    /// When the bytes of the last read reached the kernel, on this process's monotonic
    /// clock; `None` when the socket does not stamp, the kernel gave that read no time, or
    /// the wall clock was stepped since.
    pub fn arrived(&self) -> Option<Instant> {
        if self.last_ns == 0 {
            return None;
        }
        let now = Instant::now();
        let wall = u64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .ok()?
                .as_nanos(),
        )
        .ok()?;
        let age = Duration::from_nanos(wall.checked_sub(self.last_ns)?);
        (age <= OLDEST).then(|| now.checked_sub(age)).flatten()
    }

    /// Reads from `tcp` into `buf` as `TcpStream::poll_read` does, taking the stamp along
    /// when the socket stamps.
    pub fn poll_read(
        &mut self,
        tcp: &mut TcpStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.on {
            return std::pin::Pin::new(tcp).poll_read(cx, buf);
        }
        let fd = tcp.as_raw_fd();
        loop {
            ready!(tcp.poll_read_ready(cx))?;
            let dst = buf.initialize_unfilled();
            let room = dst.len();
            let mut short = None;
            // A short read is handed out as `WouldBlock` so that `try_io` clears the
            // readiness it saw before the read (a newer one stays), as tokio's read does.
            let read = tcp.try_io(Interest::READABLE, || {
                let got = recv_stamped(fd, dst)?;
                if got.0 > 0 && got.0 < room {
                    short = Some(got);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(got)
            });
            let (n, at) = match read {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => match short {
                    Some(got) => got,
                    None => continue,
                },
                Err(e) => return Poll::Ready(Err(e)),
            };
            // A read the kernel gave no time (the first packets after the machine's first
            // socket asked for stamps: the kernel turns them on in deferred work) has none,
            // never the read before it's, which would be too early.
            self.last_ns = at;
            buf.advance(n);
            return Poll::Ready(Ok(()));
        }
    }
}

/// One `recvmsg` into `dst`: the bytes read and the receive time of the last packet they
/// came from (ns since the Unix epoch; 0 when the kernel gave none).
fn recv_stamped(fd: i32, dst: &mut [u8]) -> io::Result<(usize, u64)> {
    let mut control = Control([0; 64]);
    let mut iov = [IoSliceMut::new(dst)];
    let msg = recvmsg::<()>(fd, &mut iov, Some(&mut control.0), MsgFlags::empty())?;
    let at = msg
        .cmsgs()
        .ok()
        .into_iter()
        .flatten()
        .find_map(|c| match c {
            ControlMessageOwned::ScmTimestampns(ts) => {
                let secs = u64::try_from(ts.tv_sec()).ok()?;
                let nanos = u64::try_from(ts.tv_nsec()).ok()?;
                Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
            }
            _ => None,
        })
        .unwrap_or(0);
    Ok((msg.bytes, at))
}
