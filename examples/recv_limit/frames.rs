//! The minimal WebSocket frame reader of the measured phase: per connection, the header
//! and the first payload bytes (enough to tell a push from an ack), then the rest of the
//! payload skipped. Server frames are unmasked; no UTF-8 check, no JSON.

/// Payload bytes read to name a text frame: `{"type":"msg"` is 12.
const PEEK: usize = 12;
/// Longest header (2 + 8 bytes of length) plus the peeked payload.
const HEAD: usize = 10 + PEEK;

/// What the frames read so far were.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    /// Waits in the kernel (`epoll_pwait2` or `io_uring_enter` calls).
    pub waits: u64,
    /// Successful reads (a `recv` or a completion that returned bytes).
    pub reads: u64,
    /// `recv` calls that found nothing (`EAGAIN`).
    pub empty_reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Frames of any kind.
    pub frames: u64,
    /// `msg` pushes: the deliveries.
    pub msgs: u64,
    /// `ack` replies to this process's sends.
    pub acks: u64,
    /// `error` frames.
    pub errors: u64,
}

/// A connection's place in its byte stream: the header being collected, or the payload
/// bytes still to skip.
#[derive(Debug, Default, Clone)]
pub struct FrameReader {
    head: [u8; HEAD],
    have: usize,
    skip: u64,
}

impl FrameReader {
    /// Reads `buf`, the next bytes of the connection, counting the frames it completes.
    /// A close frame or a masked frame from the server is an error.
    pub fn feed(&mut self, mut buf: &[u8], tally: &mut Tally) -> Result<(), String> {
        while !buf.is_empty() {
            if self.skip > 0 {
                let n = buf
                    .len()
                    .min(usize::try_from(self.skip).unwrap_or(usize::MAX));
                self.skip -= n as u64;
                buf = &buf[n..];
                continue;
            }
            let (want, layout) = self.want()?;
            let n = (want - self.have).min(buf.len());
            self.head[self.have..self.have + n].copy_from_slice(&buf[..n]);
            self.have += n;
            buf = &buf[n..];
            if let Some((header, len)) = layout {
                if self.have == want {
                    self.complete(header, len, tally)?;
                }
            }
        }
        Ok(())
    }

    /// Bytes of `head` wanted now, and once the header is known, its length and the
    /// payload's.
    fn want(&self) -> Result<(usize, Option<(usize, u64)>), String> {
        if self.have < 2 {
            return Ok((2, None));
        }
        if self.head[1] & 0x80 != 0 {
            return Err("the server sent a masked frame".into());
        }
        let header = match self.head[1] & 0x7f {
            126 => 4,
            127 => 10,
            _ => 2,
        };
        if self.have < header {
            return Ok((header, None));
        }
        let len = match header {
            4 => u64::from(u16::from_be_bytes([self.head[2], self.head[3]])),
            10 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.head[2..10]);
                u64::from_be_bytes(b)
            }
            _ => u64::from(self.head[1] & 0x7f),
        };
        let peek = usize::try_from(len).unwrap_or(PEEK).min(PEEK);
        Ok((header + peek, Some((header, len))))
    }

    /// Counts the frame whose header and peeked payload are in `head`.
    fn complete(&mut self, header: usize, len: u64, tally: &mut Tally) -> Result<(), String> {
        let opcode = self.head[0] & 0x0f;
        if opcode == 0x8 {
            return Err("the server closed a connection".into());
        }
        tally.frames += 1;
        let payload = &self.head[header..self.have];
        if opcode == 0x1 && payload.starts_with(b"{\"type\":\"") {
            match &payload[9..] {
                b"msg" => tally.msgs += 1,
                b"ack" => tally.acks += 1,
                b"err" => tally.errors += 1,
                _ => {}
            }
        }
        self.skip = len - (self.have - header) as u64;
        self.have = 0;
        Ok(())
    }
}
