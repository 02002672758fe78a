//! The bodies of the `cargo fuzz` targets in `fuzz/`, kept in the library so the
//! fuzz targets are one line each and a normal test replays the committed corpus
//! (`fuzz/corpus/<target>/`) through the same functions on stable Rust.
//!
//! Each function takes arbitrary bytes and panics only when it finds a bug: a panic inside
//! the code under test, or a broken invariant, which it checks with `assert!`. Inputs are
//! decoded by hand rather than with `arbitrary`, so the committed corpus means the same
//! thing whatever that crate's version, and the library needs no extra dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use crate::artifact::Artifact;
use crate::envelope::{self, Decoded, Envelope};
use crate::ledger::{Ledger, Via};
use crate::scenario::{self, LedgerOpts, Shard, StreamId, UserIx};
use crate::wire::{ClientFrame, ServerFrame};

/// The body of a fuzz target: panics only on a bug.
pub type Target = fn(&[u8]);

/// Every fuzz target by its name in `fuzz/` (and its corpus folder), with its body. The
/// drivers' targets need their driver's feature (`fuzz/Cargo.toml` enables them).
pub const TARGETS: &[(&str, Target)] = &[
    ("scenario", scenario),
    ("wire", wire),
    ("envelope", envelope),
    ("ledger", ledger),
    ("artifact", artifact),
    ("ws_frames", ws_frames),
    ("ws_json_path", ws_json_path),
    #[cfg(feature = "mqtt")]
    ("mqtt_client", mqtt_client),
    #[cfg(feature = "socketio")]
    ("socketio_packet", socketio_packet),
    #[cfg(feature = "xmpp")]
    ("xmpp_framer", xmpp_framer),
];

/// The scenario loader: the input is the TOML text, then up to four `--set KEY=VALUE`
/// overrides, separated by NUL bytes; its length picks the shard. Loading must return
/// `Ok` or `Err`, never panic.
pub fn scenario(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let toml = parts.next().unwrap_or_default();
    let overrides: Vec<String> = parts.take(4).map(str::to_owned).collect();
    let count = 1 + (data.len() % 4) as u32;
    let shard = Shard {
        index: (data.len() / 4) as u32 % count,
        count,
    };
    let _ = scenario::parse(toml, Path::new("fuzz.toml"), &overrides, shard);
}

/// The native wire decoder: the input as a client and as a server frame. A frame that
/// decodes must encode and decode back to itself.
pub fn wire(data: &[u8]) {
    if let Ok(frame) = serde_json::from_slice::<ClientFrame>(data) {
        let text = serde_json::to_vec(&frame).expect("a client frame encodes");
        let again: ClientFrame = serde_json::from_slice(&text).expect("a client frame re-decodes");
        assert_eq!(again, frame);
    }
    if let Ok(frame) = serde_json::from_slice::<ServerFrame>(data) {
        let text = serde_json::to_vec(&frame).expect("a server frame encodes");
        let again: ServerFrame = serde_json::from_slice(&text).expect("a server frame re-decodes");
        assert_eq!(again, frame);
    }
}

/// The envelope decoder: the input as a body (any text must decode without panicking; an
/// intact one re-encodes to an intact body of the same envelope), then as an envelope, a
/// body size and a one-byte change: the encoded body must decode intact, and changed in
/// that one byte must decode as corrupt, attributed to the same envelope.
pub fn envelope(data: &[u8]) {
    if let Ok(body) = std::str::from_utf8(data) {
        if let Decoded::Intact(env) = envelope::decode(body) {
            let mut out = String::new();
            envelope::encode(&env, body.len(), &mut out);
            assert_eq!(envelope::decode(&out), Decoded::Intact(env));
        }
    }
    let mut r = Reader(data);
    let env = Envelope {
        run: r.u32(),
        stream: r.u32(),
        seq: r.u64(),
        due_us: r.u64(),
    };
    let size = usize::from(r.u16() % 4096);
    let mut body = String::new();
    envelope::encode(&env, size, &mut body);
    assert!(body.len() >= size && body.len() <= size.max(envelope::MAX_HEADER_LEN));
    assert_eq!(envelope::decode(&body), Decoded::Intact(env));
    let at = usize::from(r.u16()) % body.len();
    // Any printable ASCII byte but the one there.
    let old = body.as_bytes()[at];
    let new = 0x20 + (old - 0x20 + 1 + r.u8() % 94) % 95;
    let mut bytes = body.into_bytes();
    bytes[at] = new;
    let changed = String::from_utf8(bytes).expect("ASCII");
    assert_eq!(
        envelope::decode(&changed),
        Decoded::Corrupt(env),
        "{changed}"
    );
}

/// The ledger fed an arbitrary event sequence, checked three ways: its summary against a
/// model built on plain sets; the ledger against the merge, in either order, of two
/// ledgers that each saw part of the events (every event of one recipient in one of them,
/// as the ledger's merge contract asks); and against its own serialized form read back.
pub fn ledger(data: &[u8]) {
    let mut r = Reader(data);
    let opts = LedgerOpts {
        sample: [1.0, 0.5, 0.25, 0.0][usize::from(r.u8() % 4)],
        late_after: Duration::from_micros(u64::from(r.u8()) * 100),
        examples: usize::from(r.u8() % 5),
        verify_sync: false,
        bounds_us: Vec::new(),
        wave_us: Vec::new(),
    };
    let flip = r.u8();
    let mut whole = Ledger::new(&opts);
    let mut halves = [Ledger::new(&opts), Ledger::new(&opts)];
    let mut model = Model::default();
    while let Some(op) = r.next() {
        // Recipient events go to the half of their recipient, sender events anywhere.
        let stream = StreamId::from(r.u8() % 8);
        let recipient = UserIx::from(r.u8() % 4);
        let side = usize::from(((recipient as u8) ^ flip) & 1);
        let anywhere = usize::from(op >> 7);
        // Senders number their messages densely from 0; received numbers are anything.
        let sent_seq = u64::from(r.u8() % 64);
        let got_seq = match r.u8() {
            b @ 0..=239 => u64::from(b % 64),
            b => u64::MAX - u64::from(b - 240),
        };
        let sampled = whole.sampled(stream);
        match op % 7 {
            0 => {
                for l in [&mut whole, &mut halves[side]] {
                    l.expect(stream, recipient);
                }
                if sampled {
                    model.tracks.entry((stream, recipient)).or_default().0 = true;
                }
            }
            1 => {
                whole.sent(stream, sent_seq);
                halves[anywhere].sent(stream, sent_seq);
                if sampled {
                    let s = model.streams.entry(stream).or_default();
                    s.0 = s.0.max(sent_seq + 1);
                }
            }
            2 => {
                whole.refused(stream, sent_seq);
                halves[anywhere].refused(stream, sent_seq);
                if sampled {
                    let s = model.streams.entry(stream).or_default();
                    s.0 = s.0.max(sent_seq + 1);
                    s.1.insert(sent_seq);
                }
            }
            3 => {
                let via = [Via::Push, Via::Sync, Via::Repair][usize::from(op / 6 % 3)];
                let corrupt = op & 0x40 != 0;
                let latency = u64::from(r.u8()) * 1000;
                let late = latency > u64::try_from(opts.late_after.as_micros()).unwrap_or(0);
                let a = whole.received(recipient, stream, got_seq, latency, via, corrupt);
                let b = halves[side].received(recipient, stream, got_seq, latency, via, corrupt);
                assert_eq!(a, b);
                if got_seq == u64::MAX {
                    model.counts.damaged += 1;
                } else if sampled {
                    model.received(stream, recipient, got_seq, via, corrupt, late);
                }
            }
            4 => {
                whole.abandon(recipient);
                halves[side].abandon(recipient);
                for ((_, u), t) in model.tracks.iter_mut() {
                    if *u == recipient {
                        t.0 = false;
                    }
                }
            }
            5 => {
                whole.unreached(recipient);
                halves[side].unreached(recipient);
                model.unreached.insert(recipient);
            }
            _ => {
                whole.damaged();
                halves[anywhere].damaged();
                model.counts.damaged += 1;
            }
        }
    }
    let d = whole.summary();
    assert_eq!(d.delivered, d.via_push + d.via_sync + d.repaired);
    assert!(d.refused <= d.sent && d.lost + d.unverified <= d.expected);
    let mut counts = d.clone();
    counts.examples.clear();
    assert_eq!(model.summary(), counts, "model");
    for kind in crate::ledger::Problem::ALL {
        let n = d.examples.iter().filter(|e| e.kind == kind).count();
        assert!(n <= opts.examples);
    }
    let [a, b] = halves;
    let mut ab = a.clone();
    ab.merge(&b);
    let mut ba = b;
    ba.merge(&a);
    assert_eq!(ab, whole, "a + b");
    assert_eq!(ba, whole, "b + a");
    let text = serde_json::to_string(&whole).expect("a ledger encodes");
    let back: Ledger = serde_json::from_str(&text).expect("a ledger reads back");
    assert_eq!(back, whole);
}

/// The artifact reader on arbitrary bytes; an artifact it accepts must render as a report
/// and read back from its own encoding.
pub fn artifact(data: &[u8]) {
    if let Ok(a) = Artifact::from_slice(data) {
        let _ = crate::report::render(&a);
        let text = serde_json::to_vec(&a).expect("an artifact encodes");
        if let Err(e) = Artifact::from_slice(&text) {
            panic!("an accepted artifact does not read back: {e}");
        }
    }
}

/// The WebSocket client's frame loop ([`crate::driver::kit::ws::Ws`]) reading a server's bytes:
/// the input after its first four bytes, read whole and read in pieces whose sizes those
/// four bytes give. Every read is ready at once (the loop never waits on a socket that
/// has bytes or has ended), nothing is read after an error or a close, and what the
/// client reads and writes back — pongs echoing the pings, one close last (the server's
/// code when allowed, 1002 otherwise; 1002, 1007 or 1009 after a bad frame) — is the same
/// however the bytes were cut.
pub fn ws_frames(data: &[u8]) {
    let (cuts, stream) = data.split_at(data.len().min(4));
    let whole = ws_session(stream, &[]);
    let pieces = ws_session(stream, cuts);
    assert_eq!(pieces, whole);
}

/// What a [`Ws`](crate::driver::kit::ws::Ws) reads from `stream` cut by `cuts` (see
/// [`Script`]), and the frames it writes back (opcode and unmasked payload), checked.
fn ws_session(stream: &[u8], cuts: &[u8]) -> (Vec<String>, Vec<(u8, Vec<u8>)>) {
    use std::task::{Context, Poll, Waker};
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::{Error, Message};
    let written = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let script = Script {
        input: stream,
        cuts,
        turn: 0,
        written: std::rc::Rc::clone(&written),
    };
    let mut ws = crate::driver::kit::ws::Ws::new(script, Vec::new());
    let mut cx = Context::from_waker(Waker::noop());
    let mut read = Vec::new();
    let mut pings = Vec::new();
    // The close the client owes: `None` none, `Some(None)` an empty one.
    let mut owed: Option<Option<u16>> = None;
    loop {
        let Poll::Ready(item) = std::pin::pin!(ws.next()).poll(&mut cx) else {
            panic!("a read waits on a socket that never blocks");
        };
        let Some(item) = item else { break };
        assert!(owed.is_none(), "read on after {read:?}");
        match &item {
            Ok(Message::Ping(p)) => pings.push(p.to_vec()),
            Ok(Message::Close(f)) => {
                owed = Some(f.as_ref().map(|f| match f.code.is_allowed() {
                    true => u16::from(f.code),
                    false => 1002,
                }));
            }
            Err(Error::Capacity(_)) => owed = Some(Some(1009)),
            Err(Error::Utf8(_)) => owed = Some(Some(1007)),
            Err(Error::Protocol(ProtocolError::ResetWithoutClosingHandshake)) => {}
            Err(_) => owed = Some(Some(1002)),
            Ok(_) => {}
        }
        read.push(format!("{item:?}"));
        assert!(read.len() <= stream.len() + 1, "more messages than bytes");
    }
    assert!(
        std::pin::pin!(ws.flush()).poll(&mut cx).is_ready(),
        "a flush waits on a socket that never blocks"
    );
    let frames = client_frames(&written.borrow());
    let (closes, pongs): (Vec<_>, Vec<_>) = frames.iter().partition(|(op, _)| *op == 0x8);
    assert!(pongs.iter().all(|(op, _)| *op == 0xA), "{frames:?}");
    assert_eq!(pongs.len(), pings.len(), "a pong for every ping");
    for ((_, pong), ping) in pongs.iter().zip(&pings) {
        assert_eq!(pong, ping);
    }
    match owed {
        None => assert!(closes.is_empty(), "{frames:?}"),
        Some(code) => {
            assert_eq!(closes.len(), 1, "{frames:?}");
            assert_eq!(frames.last().map(|f| f.0), Some(0x8));
            let payload = &closes[0].1;
            let sent = (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
            assert_eq!(sent, code, "{read:?}");
            assert!(sent.is_none_or(|c| CloseCode::from(c).is_allowed()));
        }
    }
    (read, frames)
}

/// The frames a client wrote: each masked and final, as opcode and unmasked payload.
fn client_frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let mut cursor = std::io::Cursor::new(bytes);
        let (header, len) = FrameHeader::parse(&mut cursor)
            .expect("a client frame")
            .expect("a whole client frame");
        let at = cursor.position() as usize;
        let mask = header.mask.expect("client frames are masked");
        assert!(header.is_final && !header.rsv1 && !header.rsv2 && !header.rsv3);
        assert!(len <= 125, "a control frame of {len} bytes");
        let end = at + len as usize;
        let payload = bytes[at..end]
            .iter()
            .zip(mask.iter().cycle())
            .map(|(b, m)| b ^ m)
            .collect();
        frames.push((u8::from(header.opcode), payload));
        bytes = &bytes[end..];
    }
    frames
}

/// A server played from bytes: reads give `input` in pieces of `1 + cut % 64` bytes for
/// the `cuts` in turn (all at once when there are none), then the end of the stream;
/// writes are all taken, into `written`.
#[derive(Debug)]
struct Script<'a> {
    input: &'a [u8],
    cuts: &'a [u8],
    turn: usize,
    written: std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
}

impl tokio::io::AsyncRead for Script<'_> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let n = match me.cuts.get(me.turn % me.cuts.len().max(1)) {
            Some(&c) => 1 + usize::from(c % 64),
            None => me.input.len(),
        };
        me.turn += 1;
        let n = n.min(me.input.len()).min(buf.remaining());
        let (piece, rest) = me.input.split_at(n);
        buf.put_slice(piece);
        me.input = rest;
        std::task::Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for Script<'_> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.written.borrow_mut().extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The MQTT client's packet handling (its state machine without a socket,
/// `driver::mqtt::conn::Machine`): the input's first byte picks the version (bit 0), the
/// QoS (bits 1–2, mod 3) and the in-flight limit (bits 3–5, plus one); the client has
/// published that many messages when the broker's bytes — the input after four more
/// bytes — arrive, read whole and in pieces whose sizes those four bytes give. Each
/// outcome is of a publish in flight, once; every message received is acknowledged; the
/// publishes in flight and the outcomes add up; and what the client reads and writes is
/// the same however the bytes were cut.
#[cfg(feature = "mqtt")]
pub fn mqtt_client(data: &[u8]) {
    let (&head, rest) = data.split_first().unwrap_or((&0, &[]));
    let (cuts, stream) = rest.split_at(rest.len().min(4));
    let whole = mqtt_session(head, stream, &[]);
    let pieces = mqtt_session(head, stream, cuts);
    assert_eq!(pieces, whole);
}

/// What the client set up by `head` reports reading `stream` cut by `cuts`, and the bytes
/// it writes back (see [`mqtt_client`]).
#[cfg(feature = "mqtt")]
fn mqtt_session(head: u8, stream: &[u8], cuts: &[u8]) -> (Vec<String>, Vec<u8>) {
    use crate::driver::mqtt::conn::{Incoming, Machine, Setup};
    let setup = Setup {
        v5: head & 1 != 0,
        qos: (head >> 1 & 3) % 3,
        keep_alive: Duration::from_secs(60),
        self_ping: false,
        max_packet: 1024,
        read_chunk: 1024,
        max_inflight: 1 + u16::from(head >> 3 & 7),
    };
    let mut m = Machine::new(&setup);
    let published = u64::from(setup.max_inflight);
    for tag in 0..published {
        m.publish(tag, format!("t/{tag}"), "ms1:body")
            .expect("a publish");
    }
    assert_eq!(m.full(), setup.qos > 0);
    let _ = m.take_written();
    let mut seen = Vec::new();
    let mut outcomes = BTreeSet::new();
    let mut sizes = cuts.iter().map(|&c| 1 + usize::from(c % 64)).cycle();
    let mut rest = stream;
    'read: while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (piece, after) = rest.split_at(n);
        rest = after;
        m.received(piece);
        loop {
            match m.step() {
                Ok(Some(w)) => {
                    match &w {
                        Incoming::Outcome { tag, .. } => {
                            assert!(setup.qos > 0 && *tag < published, "{w:?}");
                            assert!(outcomes.insert(*tag), "a second outcome: {w:?}");
                        }
                        Incoming::Message {
                            ack: Some((qos, pkid)),
                            ..
                        } => {
                            assert!(matches!(qos, 1 | 2), "{w:?}");
                            m.ack(*qos, *pkid).expect("an acknowledgement");
                        }
                        Incoming::Message { ack: None, .. } | Incoming::SubAck(_) => {}
                    }
                    seen.push(format!("{w:?}"));
                }
                Ok(None) => break,
                Err(f) => {
                    seen.push(format!("{f:?}"));
                    break 'read;
                }
            }
        }
    }
    if setup.qos > 0 {
        assert_eq!(m.in_flight() as u64 + outcomes.len() as u64, published);
    }
    (seen, m.take_written().to_vec())
}

/// The paths of `[target.ws-json]` over a frame: the input is up to four paths, one a
/// line, then a NUL and the frame. A path that compiles prints back as itself and its
/// parent is its text up to the last dot; on a frame that is JSON, every path finds the
/// same value walking from the root as through a [`Frame`](path::Frame) indexed by the
/// paths' first keys, and a value found reads as the string serde_json decodes, if any.
pub fn ws_json_path(data: &[u8]) {
    use crate::driver::kit::json_map::path::{self, Frame, Index, Path};
    let text = String::from_utf8_lossy(data);
    let (paths, frame) = text.split_once('\0').unwrap_or((&text, ""));
    let mut index = Index::default();
    let mut compiled = Vec::new();
    for line in paths.split('\n').take(4) {
        let Ok(mut p) = Path::parse(line) else {
            continue;
        };
        assert_eq!(p.to_string(), line);
        assert_eq!(Path::parse(line).as_ref(), Ok(&p));
        if let Some(parent) = p.parent() {
            assert_eq!(
                Some(parent.to_string().as_str()),
                line.rsplit_once('.').map(|(a, _)| a)
            );
        }
        index.add(&mut p);
        compiled.push(p);
    }
    let Ok(root) = path::parse(frame) else {
        return;
    };
    let indexed = Frame::new(root, &index);
    for p in &compiled {
        let found = p.with(root, |v| v.map(|v| v.get().to_owned()));
        let via_index = p.with(&indexed, |v| v.map(|v| v.get().to_owned()));
        assert_eq!(found, via_index, "{p}");
        assert_eq!(p.exists(root), found.is_some());
        let _ = p.u64(root);
        p.with_items(root, |items| assert_eq!(items.is_some(), found.is_some()));
        // serde_json checks a frame's strings only for their syntax (a lone surrogate such
        // as `\udc00` passes): a value serde_json cannot decode is no string either.
        if let Some(v) = found {
            let value = serde_json::from_str::<serde_json::Value>(&v).ok();
            let text = value.as_ref().and_then(|v| v.as_str());
            assert_eq!(p.string(root).as_deref(), text, "{p}");
        }
    }
}

/// The Socket.IO packet codec: any text decodes or fails without panicking, and a packet
/// that decodes encodes to text that decodes to the same packet.
#[cfg(feature = "socketio")]
pub fn socketio_packet(data: &[u8]) {
    use crate::driver::socketio::codec;
    let text = String::from_utf8_lossy(data);
    if let Ok(p) = codec::decode(&text) {
        let mut out = String::new();
        codec::encode(&p, &mut out);
        assert_eq!(codec::decode(&out), Ok(p), "{out}");
    }
}

/// The XMPP stream framer: the input after its first four bytes is an XML stream, read
/// in pieces whose sizes those four bytes give (as a socket cuts it, down to one byte at
/// a time); it must give the same elements, and fail or not alike, as read all at once.
#[cfg(feature = "xmpp")]
pub fn xmpp_framer(data: &[u8]) {
    let (cuts, stream) = data.split_at(data.len().min(4));
    let whole = xmpp_items(stream, &[]);
    let pieces = xmpp_items(stream, cuts);
    assert_eq!(pieces, whole);
}

/// The items a framer cuts from `stream` read in pieces of `1 + cut % 64` bytes for the
/// `cuts` in turn (all at once when there are none), and whether it failed.
#[cfg(feature = "xmpp")]
fn xmpp_items(stream: &[u8], cuts: &[u8]) -> (Vec<crate::driver::xmpp::codec::Item>, bool) {
    // Larger than any input: the size limit is not what is checked here.
    const MAX_BODY: usize = 1 << 20;
    let mut framer = crate::driver::xmpp::codec::Framer::default();
    let mut items = Vec::new();
    let mut rest = stream;
    let mut sizes = cuts.iter().map(|&c| 1 + usize::from(c % 64)).cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (piece, after) = rest.split_at(n);
        rest = after;
        framer.buffer().extend_from_slice(piece);
        loop {
            match framer.next(MAX_BODY) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(_) => return (items, true),
            }
        }
    }
    (items, false)
}

/// Fixed-width little-endian numbers from the front of the input, zero once it is used up.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    /// The next byte, if any.
    fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u8(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
}

/// A plain model of the ledger on sets, for the sampled streams only.
#[derive(Default)]
struct Model {
    /// Per stream: one past the highest seq sent, and the refused seqs.
    streams: BTreeMap<StreamId, (u64, BTreeSet<u64>)>,
    /// Per track: expected, and the seqs received.
    tracks: BTreeMap<(StreamId, UserIx), (bool, BTreeSet<u64>)>,
    /// Recipients without a session at the end.
    unreached: BTreeSet<UserIx>,
    counts: crate::ledger::Delivery,
}

impl Model {
    fn received(&mut self, s: StreamId, u: UserIx, seq: u64, via: Via, corrupt: bool, late: bool) {
        let (expected, got) = self.tracks.entry((s, u)).or_default();
        let highest = got.last().map_or(0, |&h| h.saturating_add(1));
        let new = got.insert(seq);
        let c = &mut self.counts;
        match (*expected, new, corrupt, via) {
            (false, true, _, _) => c.unexpected += 1,
            (false, false, _, _) | (true, false, _, Via::Repair) => {}
            (true, false, _, Via::Push | Via::Sync) => c.duplicated += 1,
            (true, true, true, _) => c.corrupted += 1,
            (true, true, false, Via::Sync) => c.via_sync += 1,
            (true, true, false, Via::Repair) => c.repaired += 1,
            (true, true, false, Via::Push) => {
                c.via_push += 1;
                c.reordered += u64::from(seq.saturating_add(1) < highest);
                c.late += u64::from(late);
            }
        }
    }

    /// The counts of the ledger's summary (examples left out).
    fn summary(&self) -> crate::ledger::Delivery {
        let mut d = self.counts.clone();
        d.delivered = d.via_push + d.via_sync + d.repaired;
        let mut streams: BTreeSet<StreamId> = self.streams.keys().copied().collect();
        for (sent, refused) in self.streams.values() {
            d.sent += sent;
            d.refused += refused.len() as u64;
        }
        let none = (0, BTreeSet::new());
        for ((s, u), (_, got)) in self.tracks.iter().filter(|(_, t)| t.0) {
            streams.insert(*s);
            let (sent, refused) = self.streams.get(s).unwrap_or(&none);
            let want = (0..*sent).filter(|q| !refused.contains(q));
            let lost = want.clone().filter(|q| !got.contains(q)).count() as u64;
            d.tracks += 1;
            d.planned += sent;
            d.expected += want.count() as u64;
            if self.unreached.contains(u) {
                d.unverified += lost;
            } else {
                d.lost += lost;
            }
        }
        d.streams = streams.len() as u64;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::TARGETS;

    /// Replays every committed corpus file (seeds and minimized crash inputs) through its
    /// target, so a regression on a known input fails `cargo test` without nightly.
    #[test]
    fn corpus_replays() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (name, run) in TARGETS {
            let dir = root.join(name);
            let mut files = 0;
            for entry in std::fs::read_dir(&dir).expect("a corpus folder per target") {
                let path = entry.expect("a corpus entry").path();
                let data = std::fs::read(&path).expect("a corpus file");
                let outcome = std::panic::catch_unwind(|| run(&data));
                assert!(outcome.is_ok(), "{name}: {} fails", path.display());
                files += 1;
            }
            assert!(files > 0, "{name}: empty corpus in {}", dir.display());
        }
    }
}
