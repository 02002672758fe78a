//! Mode `uring`: one io_uring (single issuer, deferred task work: completions are
//! processed only when this thread enters the kernel), a multishot receive
//! (`IORING_OP_RECV` with `IORING_RECV_MULTISHOT`) armed once per connection, its data
//! landing in buffers the kernel picks from one provided buffer ring
//! (`IORING_REGISTER_PBUF_RING`). Due bursts go out as `Send` entries submitted with the
//! next wait: one `io_uring_enter` per wake-up submits and waits. With ticks, that wait
//! asks for more completions than can come, so it sleeps to the tick (with deferred task
//! work the kernel does not wake the thread per completion).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Instant;

use io_uring::types::{BufRingEntry, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};

use crate::frames::{FrameReader, Tally};
use crate::pace::send_due;
use crate::{BoxError, Lap};

/// The buffer group of the ring.
const GROUP: u16 = 0;
/// Buffers in the ring (a power of two, at most 32,768).
const BUFFERS: u16 = 4096;
/// Bytes per buffer: a burst of 16 pushes fits one.
const BUFFER_SIZE: usize = 4096;
/// Submission queue entries: every connection armed at once fits.
const SQ: u32 = 4096;
/// Completion queue entries.
const CQ: u32 = 16_384;
/// Marks a send's completion in its user data (its length in bits 32..62).
const SEND: u64 = 1 << 63;
/// Completions a tick's wait asks for: more than can come, so it lasts to the tick.
const TICK_WANT: usize = 1 << 20;

/// Receives (and sends, with a `pacer`) until the goal is reached or its deadline passes.
pub fn run(mut lap: Lap<'_>) -> Result<Tally, BoxError> {
    // Declared before the ring, so it is dropped after it (the kernel holds its address).
    let mut bufs = BufRing::new()?;
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(CQ)
        .build(SQ)?;
    // SAFETY: the ring of entries is valid for `BUFFERS` entries and outlives `ring`.
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(bufs.entries as u64, BUFFERS, GROUP, 0)?;
    }
    for conn in 0..lap.conns.len() {
        push(&mut ring, &arm(lap.conns, conn))?;
    }
    let mut readers = vec![FrameReader::default(); lap.conns.len()];
    let (mut rearm, mut tally) = (Vec::new(), Tally::default());
    loop {
        let now = Instant::now();
        let send = |conn: usize, bytes: &[u8]| {
            let len = u32::try_from(bytes.len())?;
            let fd = Fd(lap.conns[conn].as_raw_fd());
            let entry = opcode::Send::new(fd, bytes.as_ptr(), len)
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(SEND | u64::from(len) << 32 | conn as u64);
            push(&mut ring, &entry)
        };
        let mut wait = send_due(lap.pacer.as_deref_mut(), now, lap.progress, send)?;
        if lap.goal.over(lap.progress, &tally, now) {
            return Ok(tally);
        }
        let mut want = 1;
        if let Some(tick) = lap.ticks.next(now) {
            (want, wait) = (TICK_WANT, tick.saturating_duration_since(Instant::now()));
        }
        let ts = Timespec::from(wait);
        match ring
            .submitter()
            .submit_with_args(want, &SubmitArgs::new().timespec(&ts))
        {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(e) => return Err(format!("io_uring_enter: {e}").into()),
        }
        tally.waits += 1;
        for cqe in ring.completion() {
            complete(&cqe, &mut bufs, &mut readers, &mut tally, &mut rearm)?;
        }
        bufs.publish();
        for conn in rearm.drain(..) {
            push(&mut ring, &arm(lap.conns, conn))?;
        }
    }
}

/// Handles one completion: a send's (checked whole), or a receive's (its buffer read and
/// given back; the connection noted for re-arming when its multishot ended).
fn complete(
    cqe: &cqueue::Entry,
    bufs: &mut BufRing,
    readers: &mut [FrameReader],
    tally: &mut Tally,
    rearm: &mut Vec<usize>,
) -> Result<(), BoxError> {
    let (data, res) = (cqe.user_data(), cqe.result());
    if data & SEND != 0 {
        let want = (data & !SEND) >> 32;
        if res < 0 || res as u64 != want {
            return Err(format!("send: {res} of {want} bytes went out").into());
        }
        return Ok(());
    }
    let conn = data as usize;
    if res == -libc::ENOBUFS {
        tally.empty_reads += 1;
    } else if res < 0 {
        let e = std::io::Error::from_raw_os_error(-res);
        return Err(format!("multishot recv: {e}").into());
    } else if res == 0 {
        return Err("a connection was closed by the server".into());
    } else {
        let bid = cqueue::buffer_select(cqe.flags()).ok_or("a receive without a buffer")?;
        let len = res as usize;
        tally.reads += 1;
        tally.bytes += len as u64;
        readers[conn].feed(bufs.get(bid, len), tally)?;
        bufs.give(bid);
    }
    if !cqueue::more(cqe.flags()) {
        rearm.push(conn);
    }
    Ok(())
}

/// The multishot receive of connection `conn`, its completions tagged with `conn`.
fn arm(conns: &[TcpStream], conn: usize) -> squeue::Entry {
    opcode::RecvMulti::new(Fd(conns[conn].as_raw_fd()), GROUP)
        .build()
        .user_data(conn as u64)
}

/// Queues `entry`, submitting what is queued first when the queue is full.
fn push(ring: &mut IoUring, entry: &squeue::Entry) -> Result<(), BoxError> {
    loop {
        // SAFETY: what entries point at (the pacer's bursts, the buffer ring) outlives the
        // ring; sockets stay open until the run returns.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// The provided buffer ring: `BUFFERS` entries the kernel takes buffers from, and the
/// buffers themselves, both allocated once and page-aligned.
struct BufRing {
    entries: *mut BufRingEntry,
    data: *mut u8,
    tail: u16,
}

impl BufRing {
    fn new() -> Result<Self, BoxError> {
        // SAFETY: both layouts have a non-zero size; the results are checked for null.
        let (entries, data) = unsafe {
            (
                alloc_zeroed(Self::entries_layout()?).cast::<BufRingEntry>(),
                alloc_zeroed(Self::data_layout()?),
            )
        };
        if entries.is_null() || data.is_null() {
            return Err("out of memory for the buffer ring".into());
        }
        let mut ring = Self {
            entries,
            data,
            tail: 0,
        };
        for bid in 0..BUFFERS {
            ring.give(bid);
        }
        ring.publish();
        Ok(ring)
    }

    fn entries_layout() -> Result<Layout, BoxError> {
        let size = usize::from(BUFFERS) * std::mem::size_of::<BufRingEntry>();
        Ok(Layout::from_size_align(size, 4096)?)
    }

    fn data_layout() -> Result<Layout, BoxError> {
        Ok(Layout::from_size_align(
            usize::from(BUFFERS) * BUFFER_SIZE,
            4096,
        )?)
    }

    /// Puts buffer `bid` back at the tail; the kernel sees it after [`Self::publish`].
    fn give(&mut self, bid: u16) {
        let slot = usize::from(self.tail & (BUFFERS - 1));
        // SAFETY: `slot` < BUFFERS, inside the entries' allocation; the kernel reads only
        // slots between its head and the published tail, and this one is past the tail.
        let entry = unsafe { &mut *self.entries.add(slot) };
        // SAFETY: `bid` < BUFFERS, so the buffer lies inside the data allocation.
        entry.set_addr(unsafe { self.data.add(usize::from(bid) * BUFFER_SIZE) } as u64);
        entry.set_len(BUFFER_SIZE as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers given back so far visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail field lies inside the first entry, is 2-aligned, and is shared
        // with the kernel only through atomic access.
        let tail = unsafe { AtomicU16::from_ptr(BufRingEntry::tail(self.entries).cast_mut()) };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which the kernel just filled and handed over.
    fn get(&self, bid: u16, len: usize) -> &[u8] {
        let len = len.min(BUFFER_SIZE);
        let bid = usize::from(bid % BUFFERS);
        // SAFETY: inside the data allocation; the kernel does not write this buffer until
        // it is given back.
        unsafe { std::slice::from_raw_parts(self.data.add(bid * BUFFER_SIZE), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts (which were valid then, so they
        // are now); the ring that used them is gone (dropped first).
        unsafe {
            if let (Ok(e), Ok(d)) = (Self::entries_layout(), Self::data_layout()) {
                dealloc(self.entries.cast(), e);
                dealloc(self.data, d);
            }
        }
    }
}
