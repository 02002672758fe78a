//! Reading a serialized HDR histogram from an artifact without trusting its header.
//!
//! `hdrhistogram`'s deserializer allocates the payload length and the bucket array that the
//! header names before it reads any payload, so a 100-byte forged histogram in a result file
//! could ask for gigabytes (found by the `artifact` fuzz target). The crate has no limit to
//! set, so this module reads the V2 header itself (decompressing only its first bytes) and
//! hands the bytes to the deserializer only when the header describes a histogram of our own
//! bounds with a payload no longer than such a histogram can need.

use std::io::Read as _;

use flate2::read::ZlibDecoder;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

/// The cookie of an uncompressed V2 histogram (HdrHistogram's encoding specification; the
/// `0x10` is the word-size bits that the Rust crate sets).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
/// The cookie of a zlib-compressed V2 histogram, whose inflated bytes start with [`V2_COOKIE`].
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// Cookie, payload length, normalizing offset, significant digits, lowest, highest, ratio.
const V2_HEADER_LEN: usize = 40;
/// The longest ZigZag LEB128 varint of one bucket count.
const MAX_VARINT_LEN: usize = 9;

/// Decodes `bytes` as a histogram with the bounds of `like`, refusing any header that asks
/// for other bounds or for a payload longer than `like`'s buckets can fill.
pub(super) fn decode(bytes: &[u8], like: &Histogram<u64>) -> Result<Histogram<u64>, String> {
    let header = plain_header(bytes)?;
    let field32 = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let field64 = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&header[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let payload_len = field32(4) as usize;
    let (sigfig, low, high) = (field32(12), field64(16), field64(24));
    if (low, high, sigfig) != (like.low(), like.high(), u32::from(like.sigfig())) {
        return Err(format!(
            "has other bounds ({low}..{high} at {sigfig} digits, expected {}..{} at {})",
            like.low(),
            like.high(),
            like.sigfig()
        ));
    }
    if payload_len > like.distinct_values() * MAX_VARINT_LEN {
        return Err(format!(
            "payload of {payload_len} bytes is longer than any histogram of its bounds"
        ));
    }
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("{e:?}"))
}

/// The uncompressed V2 header of `bytes`, inflating only as much as the header needs.
fn plain_header(bytes: &[u8]) -> Result<[u8; V2_HEADER_LEN], String> {
    let truncated = || "truncated header".to_string();
    let cookie_at = |b: &[u8]| {
        b.get(..4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    };
    let mut header = [0u8; V2_HEADER_LEN];
    match cookie_at(bytes) {
        Some(V2_COOKIE) => {
            header.copy_from_slice(bytes.get(..V2_HEADER_LEN).ok_or_else(truncated)?)
        }
        Some(V2_COMPRESSED_COOKIE) => {
            let deflated = bytes.get(8..).ok_or_else(truncated)?;
            ZlibDecoder::new(deflated)
                .read_exact(&mut header)
                .map_err(|_| truncated())?;
            if cookie_at(&header) != Some(V2_COOKIE) {
                return Err("bad inner cookie".to_string());
            }
        }
        _ => return Err("bad cookie".to_string()),
    }
    Ok(header)
}
