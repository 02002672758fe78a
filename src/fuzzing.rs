//! The bodies of the `cargo fuzz` targets in `fuzz/` (issue 10), kept in the library so the
//! fuzz targets are one line each and a normal test replays the committed corpus
//! (`fuzz/corpus/<target>/`) through the same functions on stable Rust.
//!
//! Each function takes arbitrary bytes and panics only when it finds a bug: a panic inside
//! the code under test, or a broken invariant, which it checks with `assert!`. Inputs are
//! decoded by hand rather than with `arbitrary`, so the committed corpus means the same
//! thing whatever that crate's version, and the library needs no extra dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::artifact::Artifact;
use crate::envelope::{self, Decoded, Envelope};
use crate::ledger::{Ledger, Via};
use crate::scenario::{self, LedgerOpts, Shard, StreamId, UserIx};
use crate::wire::{ClientFrame, ServerFrame};

/// The body of a fuzz target: panics only on a bug.
pub type Target = fn(&[u8]);

/// Every fuzz target by its name in `fuzz/` (and its corpus folder), with its body.
pub const TARGETS: [(&str, Target); 5] = [
    ("scenario", scenario),
    ("wire", wire),
    ("envelope", envelope),
    ("ledger", ledger),
    ("artifact", artifact),
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
