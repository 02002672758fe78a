//! The tracking marker carried in every test message body: run id, stream id, sequence
//! number, due time and checksums, padded to the configured body size.
//!
//! # Format
//!
//! ```text
//! ms1:<sum>:<run>:<stream>:<seq>:<due>:<hsum>:<padding…>
//! ```
//!
//! - `ms1:` is the magic; a body that does not start with it is [`Decoded::Foreign`].
//! - `<sum>` is the CRC-32 of every byte after `ms1:<sum>:` up to the end of the body
//!   (fields, `<hsum>` and padding), as 8 lowercase hex digits.
//! - `<run>` is 8 lowercase hex digits; `<stream>`, `<seq>` and `<due>` (microseconds since
//!   the Unix epoch when the send was due) are lowercase hex without leading zeros.
//! - `<hsum>` is the CRC-32 of `<run>:<stream>:<seq>:<due>:` alone, 8 lowercase hex digits.
//! - The padding cycles through `[0-9A-Za-z]`, starting at an offset given by the sequence
//!   number, up to the requested size. The header is never cut: a size smaller than the
//!   header gives a body exactly as long as the header.
//!
//! Only ASCII letters, digits and `:` appear, so a body survives JSON strings, MQTT payloads
//! and XMPP bodies unchanged. The checksum comes first and the padding last: a byte changed
//! anywhere in the padding (where fault injectors like to change it) still leaves a header
//! whose own `<hsum>` matches, so the damage is attributed to its stream and sequence as
//! [`Decoded::Corrupt`]. CRC-32 detects every single-byte change, so a body changed in one
//! byte never decodes as intact.
//!
//! A body too small for padding (below about 50 bytes the body *is* the header) takes any
//! change in its header. A header that does not parse or fails its `<hsum>` is repaired
//! when one byte is all that changed: every substitution of one header byte (by a hex
//! digit or `:`, or the magic's own byte) is tried, and one is accepted only when both
//! `<hsum>` and `<sum>` then match — 64 bits of check, so a repair does not misattribute in
//! practice. The copy is then [`Decoded::Corrupt`] and attributed to its stream and
//! sequence at every body size. Only a header changed in more than one byte is
//! [`Decoded::Damaged`] (unattributable). The search costs a few hundred checksums of the
//! header and runs only for such bodies, never for intact ones.

use crate::vocab::StreamId;

/// The magic every envelope starts with.
pub const MAGIC: &str = "ms1:";

/// The longest header an envelope can have, in bytes: a body of at least this size is
/// exactly the requested size whatever the field values.
pub const MAX_HEADER_LEN: usize = MAGIC.len() + 9 + 9 + 9 + 17 + 17 + 9;

/// Padding alphabet; text-safe everywhere.
const PAD: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Offset of the first byte covered by `<sum>`: after `ms1:` + 8 hex + `:`.
const SUM_COVERS_FROM: usize = MAGIC.len() + 9;

/// What a message body says about the message it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Run id, so bodies of an earlier run on the same server are recognised.
    pub run: u32,
    /// The stream (sender × conversation) the message belongs to.
    pub stream: StreamId,
    /// Position in the stream, dense from 0 in send order.
    pub seq: u64,
    /// Wall-clock microseconds since the Unix epoch when the send was due.
    pub due_us: u64,
}

/// The result of looking at a received body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// Header and checksum are right.
    Intact(Envelope),
    /// The header is intact but the body's checksum does not match: the message was
    /// changed in transit.
    Corrupt(Envelope),
    /// Starts with our magic but the header does not parse or fails its own checksum;
    /// the message cannot be attributed.
    Damaged,
    /// Not an envelope at all (someone else's message).
    Foreign,
}

/// Appends to `out` a body of exactly `max(size, header length)` bytes carrying `env`.
///
/// Only appends: it allocates nothing beyond the growth of `out` (reserve `size` up front
/// to avoid even that).
pub fn encode(env: &Envelope, size: usize, out: &mut String) {
    // `<run>:<stream>:<seq>:<due>:<hsum>:`, built on the stack.
    let mut fields = Ascii::default();
    fields.hex_fixed(env.run);
    fields.push(b':');
    fields.hex(u64::from(env.stream));
    fields.push(b':');
    fields.hex(env.seq);
    fields.push(b':');
    fields.hex(env.due_us);
    fields.push(b':');
    let hsum = crc32fast::hash(fields.bytes());
    fields.hex_fixed(hsum);
    fields.push(b':');
    let fields = fields.as_str();
    let header_len = SUM_COVERS_FROM + fields.len();
    let pad_len = size.saturating_sub(header_len);
    let offset = (env.seq % PAD.len() as u64) as usize;
    let mut sum = crc32fast::Hasher::new();
    sum.update(fields.as_bytes());
    for chunk in padding(offset, pad_len) {
        sum.update(chunk.as_bytes());
    }
    out.reserve(header_len + pad_len);
    out.push_str(MAGIC);
    let mut digits = Ascii::default();
    digits.hex_fixed(sum.finalize());
    digits.push(b':');
    out.push_str(digits.as_str());
    out.push_str(fields);
    for chunk in padding(offset, pad_len) {
        out.push_str(chunk);
    }
}

/// [`PAD`] twice, so every run of up to `PAD.len()` padding characters is one slice of it.
const PAD_TWICE: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\
                         0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The padding of `len` characters cycling through [`PAD`] from `offset`, as slices.
fn padding(offset: usize, len: usize) -> impl Iterator<Item = &'static str> {
    let n = PAD.len();
    let mut left = len;
    let mut at = offset % n;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let take = left.min(n);
        let chunk = &PAD_TWICE[at..at + take];
        left -= take;
        at = (at + take) % n;
        Some(chunk)
    })
}

/// A short ASCII string on the stack: the header fields of one envelope.
struct Ascii {
    buf: [u8; MAX_HEADER_LEN],
    len: usize,
}

impl Default for Ascii {
    fn default() -> Self {
        Ascii {
            buf: [0; MAX_HEADER_LEN],
            len: 0,
        }
    }
}

impl Ascii {
    fn push(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn hex_fixed(&mut self, v: u32) {
        for d in hex8(v) {
            self.push(d);
        }
    }

    /// Lowercase hex without leading zeros (`0` for zero).
    fn hex(&mut self, v: u64) {
        let digits = if v == 0 {
            1
        } else {
            (64 - v.leading_zeros()).div_ceil(4)
        };
        for i in (0..digits).rev() {
            self.push(hex_digit(((v >> (4 * i)) & 0xf) as u32));
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn as_str(&self) -> &str {
        // Only hex digits and `:` are ever pushed.
        std::str::from_utf8(self.bytes()).unwrap_or_default()
    }
}

/// Looks at a received body. Never allocates and never panics.
pub fn decode(body: &str) -> Decoded {
    let Some(rest) = body.as_bytes().strip_prefix(MAGIC.as_bytes()) else {
        // A magic changed in one byte is ours if the rest checks out.
        return repair(body.as_bytes()).map_or(Decoded::Foreign, Decoded::Corrupt);
    };
    match verify(rest, &[]) {
        Some((env, true)) => Decoded::Intact(env),
        Some((env, false)) => Decoded::Corrupt(env),
        None => repair(body.as_bytes()).map_or(Decoded::Damaged, Decoded::Corrupt),
    }
}

/// Bytes a header byte can be: what a one-byte repair tries.
const HEADER_BYTES: &[u8; 17] = b"0123456789abcdef:";

/// The envelope of a body whose header was changed in exactly one byte: tries every
/// substitution of one header byte and accepts the first after which both the header's
/// and the body's checksums match. `None` when none does (or the magic differs in more
/// than one byte).
fn repair(body: &[u8]) -> Option<Envelope> {
    let magic = MAGIC.as_bytes();
    if body.len() <= magic.len() {
        return None;
    }
    let n = body.len().min(MAX_HEADER_LEN);
    let mut head = [0u8; MAX_HEADER_LEN];
    head[..n].copy_from_slice(&body[..n]);
    let tail = &body[n..];
    let wrong_magic = (0..magic.len()).filter(|&i| head[i] != magic[i]).count();
    match wrong_magic {
        0 => {}
        1 => {
            head[..magic.len()].copy_from_slice(magic);
            return checked(&head[..n], tail);
        }
        _ => return None,
    }
    for at in magic.len()..n {
        let was = head[at];
        for &b in HEADER_BYTES.iter().filter(|&&b| b != was) {
            head[at] = b;
            if let Some(env) = checked(&head[..n], tail) {
                return Some(env);
            }
        }
        head[at] = was;
    }
    None
}

/// The envelope of the body `head` + `tail` (`head` starting with the magic) when its
/// header and body checksums both match.
fn checked(head: &[u8], tail: &[u8]) -> Option<Envelope> {
    match verify(&head[MAGIC.len()..], tail)? {
        (env, true) => Some(env),
        (_, false) => None,
    }
}

/// Reads the header of the body `rest` + `tail` (`rest` is what follows the magic):
/// `None` when it does not parse or fails its own checksum, otherwise the envelope and
/// whether the body's checksum matches. One CRC pass: `<hsum>` covers a prefix of what
/// `<sum>` covers.
fn verify(rest: &[u8], tail: &[u8]) -> Option<(Envelope, bool)> {
    let mut cur = Cursor {
        bytes: rest,
        pos: 0,
    };
    let sum = cur.field(8, 8)? as u32;
    let fields = cur.pos;
    let run = cur.field(8, 8)? as u32;
    let stream = u32::try_from(cur.field(1, 8)?).ok()?;
    let seq = cur.field(1, 16)?;
    let due_us = cur.field(1, 16)?;
    let header_end = cur.pos;
    let hsum = cur.field(8, 8)? as u32;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&rest[fields..header_end]);
    if crc.clone().finalize() != hsum {
        return None;
    }
    crc.update(&rest[header_end..]);
    crc.update(tail);
    let env = Envelope {
        run,
        stream,
        seq,
        due_us,
    };
    Some((env, crc.finalize() == sum))
}

/// Reads `:`-terminated lowercase hex fields.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    /// A field of `min..=max` lowercase hex digits followed by `:`; variable-length fields
    /// must not have leading zeros, so every value has exactly one spelling.
    fn field(&mut self, min: usize, max: usize) -> Option<u64> {
        let mut value: u64 = 0;
        let mut len = 0;
        loop {
            let digit = HEX_VALUE[usize::from(*self.bytes.get(self.pos + len)?)];
            if digit == COLON {
                break;
            }
            if digit == NOT_HEX || len == max {
                return None;
            }
            value = (value << 4) | u64::from(digit);
            len += 1;
        }
        let leading_zero = min != max && len > 1 && self.bytes[self.pos] == b'0';
        if len < min || leading_zero {
            return None;
        }
        self.pos += len + 1;
        Some(value)
    }
}

/// [`HEX_VALUE`] of `:`.
const COLON: u8 = 16;
/// [`HEX_VALUE`] of anything but a lowercase hex digit or `:`.
const NOT_HEX: u8 = 17;

/// The value of every byte as a lowercase hex digit, or [`COLON`], or [`NOT_HEX`]: one
/// lookup per header byte.
const HEX_VALUE: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut i = 0;
    while i < 16 {
        table[HEX_DIGITS[i] as usize] = i as u8;
        i += 1;
    }
    table[b':' as usize] = COLON;
    table
};

/// The lowercase hex digits.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex digits of `v`, 8 of them.
fn hex8(v: u32) -> [u8; 8] {
    let mut digits = [0u8; 8];
    for (i, d) in digits.iter_mut().enumerate() {
        *d = hex_digit((v >> (28 - 4 * i)) & 0xf);
    }
    digits
}

fn hex_digit(nibble: u32) -> u8 {
    HEX_DIGITS[nibble as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn body(env: &Envelope, size: usize) -> String {
        let mut out = String::new();
        encode(env, size, &mut out);
        out
    }

    const ENV: Envelope = Envelope {
        run: 0xdead_beef,
        stream: 42,
        seq: 7,
        due_us: 1_700_000_000_000_000,
    };

    #[test]
    fn known_layout() {
        let b = body(&ENV, 100);
        assert_eq!(b.len(), 100);
        assert!(b.starts_with("ms1:"));
        let fields: Vec<&str> = b.split(':').collect();
        assert_eq!(fields[2], "deadbeef");
        assert_eq!(fields[3], "2a");
        assert_eq!(fields[4], "7");
        assert_eq!(fields[5], format!("{:x}", ENV.due_us));
        assert_eq!(decode(&b), Decoded::Intact(ENV));
    }

    #[test]
    fn padding_cycles_from_the_seq_offset() {
        assert_eq!(PAD_TWICE.as_bytes(), [&PAD[..], &PAD[..]].concat());
        for (seq, size) in [(0, 100), (7, 100), (61, 300), (62, 64), (1000, 500)] {
            let env = Envelope { seq, ..ENV };
            let b = body(&env, size);
            let header = body(&env, 0).len();
            let offset = (seq % PAD.len() as u64) as usize;
            let want: String = (0..size - header)
                .map(|i| char::from(PAD[(offset + i) % PAD.len()]))
                .collect();
            assert_eq!(&b[header..], want);
        }
    }

    #[test]
    fn appends_after_existing_text() {
        let mut out = String::from("prefix ");
        encode(&ENV, 80, &mut out);
        assert_eq!(out.len(), 87);
        assert_eq!(decode(&out[7..]), Decoded::Intact(ENV));
    }

    #[test]
    fn small_size_keeps_the_whole_header() {
        let b = body(&ENV, 3);
        assert!(b.len() > 3 && b.len() <= MAX_HEADER_LEN);
        assert_eq!(decode(&b), Decoded::Intact(ENV));
    }

    #[test]
    fn max_header_len_is_reached_by_maximal_fields() {
        let env = Envelope {
            run: u32::MAX,
            stream: u32::MAX,
            seq: u64::MAX,
            due_us: u64::MAX,
        };
        assert_eq!(body(&env, 0).len(), MAX_HEADER_LEN);
    }

    #[test]
    fn change_near_the_end_is_attributed() {
        let mut b = body(&ENV, 200).into_bytes();
        let last = b.len() - 2;
        b[last] = if b[last] == b'x' { b'y' } else { b'x' };
        let b = String::from_utf8(b).expect("ascii");
        assert_eq!(decode(&b), Decoded::Corrupt(ENV));
    }

    #[test]
    fn truncation_is_corruption() {
        let b = body(&ENV, 200);
        assert_eq!(decode(&b[..150]), Decoded::Corrupt(ENV));
    }

    #[test]
    fn foreign_and_damaged() {
        assert_eq!(decode(""), Decoded::Foreign);
        assert_eq!(decode("hello"), Decoded::Foreign);
        assert_eq!(decode("ms1"), Decoded::Foreign);
        assert_eq!(decode("ms1:"), Decoded::Damaged);
        assert_eq!(decode("ms1:zz"), Decoded::Damaged);
        // Upper-case hex is not our spelling.
        let b = body(&ENV, 100).replacen("deadbeef", "DEADBEEF", 1);
        assert_eq!(decode(&b), Decoded::Damaged);
    }

    #[test]
    fn other_runs_decode_intact() {
        let env = Envelope { run: 1, ..ENV };
        assert_eq!(decode(&body(&env, 64)), Decoded::Intact(env));
    }

    fn text_safe() -> impl Strategy<Value = u8> {
        prop::sample::select(
            b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:.-".to_vec(),
        )
    }

    fn any_env() -> impl Strategy<Value = Envelope> {
        (any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(run, stream, seq, due_us)| Envelope {
                run,
                stream,
                seq,
                due_us,
            },
        )
    }

    proptest! {
        #[test]
        fn roundtrip(env in any_env(), size in 0usize..600) {
            let b = body(&env, size);
            prop_assert_eq!(b.len(), size.max(b.len()));
            prop_assert!(b.len() <= size.max(MAX_HEADER_LEN));
            prop_assert!(b.bytes().all(|c| c.is_ascii_alphanumeric() || c == b':'));
            prop_assert_eq!(decode(&b), Decoded::Intact(env));
        }

        #[test]
        fn one_changed_byte_is_never_intact(
            env in any_env(),
            size in 0usize..300,
            at in any::<prop::sample::Index>(),
            to in text_safe(),
        ) {
            let mut b = body(&env, size).into_bytes();
            let i = at.index(b.len());
            prop_assume!(b[i] != to);
            b[i] = to;
            let b = String::from_utf8(b).expect("ascii");
            prop_assert!(!matches!(decode(&b), Decoded::Intact(e) if e == env));
            // A change anywhere, header included, is attributed to the right message.
            prop_assert_eq!(decode(&b), Decoded::Corrupt(env));
        }

        /// At sizes where the body is all header, the reference server's
        /// `corrupt` fault (the last byte changed) is still attributed.
        #[test]
        fn last_byte_changed_is_attributed_at_every_size(env in any_env(), size in 0usize..120) {
            let mut b = body(&env, size).into_bytes();
            let last = b.len() - 1;
            b[last] = if b[last] == b'a' { b'b' } else { b'a' };
            let b = String::from_utf8(b).expect("ascii");
            prop_assert_eq!(decode(&b), Decoded::Corrupt(env));
        }

        #[test]
        fn never_panics(s in ".*") {
            let _ = decode(&s);
            let _ = decode(&format!("ms1:{s}"));
        }

        #[test]
        fn never_panics_on_near_envelopes(s in "ms1:[0-9a-f:]{0,80}") {
            let _ = decode(&s);
        }
    }
}

/// The token a signal carries (see `crate::driver::Signal`): the kind's letter, then an
/// envelope of header only whose stream is the signalling user and whose due time is when
/// the signal was due. Recipients hand it back like a body; a body that starts with a
/// kind's letter followed by the magic is a token, never a message.
pub mod token {
    use super::{decode as decode_body, encode as encode_body, Decoded, Envelope, MAGIC};
    use crate::vocab::SignalKind;

    /// The longest token, in bytes.
    pub const MAX_LEN: usize = 1 + super::MAX_HEADER_LEN;

    /// Appends the token of a signal of `kind` carrying `env` to `out`.
    pub fn encode(kind: SignalKind, env: &Envelope, out: &mut String) {
        out.push(char::from(kind.letter()));
        encode_body(env, 0, out);
    }

    /// The kind and envelope of a token; `None` when `body` is no token (a message body or
    /// someone else's text).
    pub fn decode(body: &str) -> Option<(SignalKind, Decoded)> {
        let (&first, rest) = body.as_bytes().split_first()?;
        let kind = SignalKind::of_letter(first)?;
        if !rest.starts_with(MAGIC.as_bytes()) {
            return None;
        }
        Some((kind, decode_body(&body[1..])))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_token_carries_its_kind_and_envelope_and_is_no_message() {
            let env = Envelope {
                run: 7,
                stream: 42,
                seq: 3,
                due_us: 1_700_000_000_000_000,
            };
            let mut t = String::new();
            encode(SignalKind::Presence, &env, &mut t);
            assert!(t.len() <= MAX_LEN, "{t}");
            assert_eq!(
                decode(&t),
                Some((SignalKind::Presence, Decoded::Intact(env)))
            );
            assert_eq!(
                decode_body(&t),
                Decoded::Foreign,
                "a token is not a message"
            );
            let mut body = String::new();
            encode_body(&env, 100, &mut body);
            assert_eq!(decode(&body), None, "a message is not a token");
            assert_eq!(decode("Rhello"), None);
        }
    }
}
