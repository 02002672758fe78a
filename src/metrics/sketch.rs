//! A small sparse latency histogram for the per-second series: log-linear bins with 128
//! steps per power of two (under 0.8 % relative error, about two significant digits),
//! stored as a sorted list of the bins actually hit. A second typically touches a few
//! hundred bins, so an hour-long series stays small where a dense 2-digit HDR histogram
//! (26 KB each) would not.
//!
//! A sketch is open (a vector of `(bin, count)` pairs, 8 bytes a bin, cheap to record
//! into) while its second is being recorded, and packed (the varints of
//! [`Sketch::encode`], about 2 bytes a bin) once the second is over and kept for the rest
//! of the run: see [`Sketch::pack`].

use base64::Engine as _;

/// Steps per power of two, as a bit count.
const SUB_BITS: u32 = 7;
/// Values below this have a bin of their own.
const EXACT: u64 = 2 << SUB_BITS;
/// The highest bin index (that of `u64::MAX`).
const MAX_BIN: u16 = ((64 - 1 - SUB_BITS) << SUB_BITS) as u16 + (EXACT as u16 - 1);

/// Counts per bin, in bin order; counts saturate at `u32::MAX` per bin. Two sketches are
/// equal when they hold the same counts, packed or not.
#[derive(Clone, Debug)]
pub(super) enum Sketch {
    /// Sorted `(bin, count)` pairs, for recording.
    Open(Vec<(u16, u32)>),
    /// For each bin, the gap to the previous bin (from 0) and the count, as LEB128
    /// varints: the bytes [`Sketch::encode`] writes in base64. Always well formed (made
    /// by [`Sketch::pack`] or checked by [`Sketch::decode`]).
    Packed(Box<[u8]>),
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch::Open(Vec::new())
    }
}

impl PartialEq for Sketch {
    fn eq(&self, other: &Sketch) -> bool {
        self.bins().eq(other.bins())
    }
}

/// The bin of a value.
fn bin_of(v: u64) -> u16 {
    if v < EXACT {
        return v as u16;
    }
    let shift = 63 - v.leading_zeros() - SUB_BITS;
    ((shift << SUB_BITS) as u16) + (v >> shift) as u16
}

/// The highest value that falls into `bin`.
fn highest_of(bin: u16) -> u64 {
    let bin = u64::from(bin);
    if bin < EXACT {
        return bin;
    }
    let shift = (bin >> SUB_BITS) - 1;
    let mantissa = bin - (shift << SUB_BITS);
    (mantissa << shift) + ((1 << shift) - 1)
}

impl Sketch {
    /// Counts one value (a packed sketch is opened first).
    pub(super) fn record(&mut self, v: u64) {
        let bins = self.open();
        let bin = bin_of(v);
        match bins.binary_search_by_key(&bin, |b| b.0) {
            Ok(i) => bins[i].1 = bins[i].1.saturating_add(1),
            Err(i) => bins.insert(i, (bin, 1)),
        }
    }

    /// Adds every value of `other`; a packed sketch stays packed.
    pub(super) fn merge(&mut self, other: &Sketch) {
        if other.is_empty() {
            return;
        }
        let packed = matches!(self, Sketch::Packed(_));
        let mut out = Vec::with_capacity(self.len().max(other.len()));
        let (mut a, mut b) = (self.bins().peekable(), other.bins().peekable());
        loop {
            let next = match (a.peek().copied(), b.peek().copied()) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    a.next();
                    b.next();
                    (x.0, x.1.saturating_add(y.1))
                }
                (Some(x), Some(y)) if x.0 < y.0 => {
                    a.next();
                    x
                }
                (_, Some(y)) => {
                    b.next();
                    y
                }
                (Some(x), None) => {
                    a.next();
                    x
                }
                (None, None) => break,
            };
            out.push(next);
        }
        *self = Sketch::Open(out);
        if packed {
            self.pack();
        }
    }

    /// Packs the sketch (about 2 bytes a bin instead of 8): for a second that is over.
    /// Recording into it again opens it.
    pub(super) fn pack(&mut self) {
        if let Sketch::Open(bins) = self {
            *self = Sketch::Packed(pack(bins).into_boxed_slice());
        }
    }

    /// The bins, opened if packed.
    fn open(&mut self) -> &mut Vec<(u16, u32)> {
        if let Sketch::Packed(_) = self {
            *self = Sketch::Open(self.bins().collect());
        }
        match self {
            Sketch::Open(bins) => bins,
            Sketch::Packed(_) => unreachable!("opened above"),
        }
    }

    /// The `(bin, count)` pairs, in bin order.
    fn bins(&self) -> Bins<'_> {
        match self {
            Sketch::Open(bins) => Bins::Open(bins.iter()),
            Sketch::Packed(bytes) => Bins::Packed {
                rest: bytes,
                prev: 0,
            },
        }
    }

    /// True when nothing was recorded.
    fn is_empty(&self) -> bool {
        match self {
            Sketch::Open(bins) => bins.is_empty(),
            Sketch::Packed(bytes) => bytes.is_empty(),
        }
    }

    /// How many bins are hit (an estimate from the size when packed).
    fn len(&self) -> usize {
        match self {
            Sketch::Open(bins) => bins.len(),
            Sketch::Packed(bytes) => bytes.len() / 2,
        }
    }

    /// How many values were recorded.
    pub(super) fn count(&self) -> u64 {
        self.bins().map(|b| u64::from(b.1)).sum()
    }

    /// The value at quantile `q` (0..=1), as the highest value of its bin; 0 when empty.
    pub(super) fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bin, n) in self.bins() {
            seen += u64::from(n);
            if seen >= target {
                return highest_of(bin);
            }
        }
        0
    }

    /// The mean, taking each value as the middle of its bin; 0 when empty.
    pub(super) fn mean(&self) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let sum: f64 = self
            .bins()
            .map(|(bin, n)| {
                let hi = highest_of(bin) as f64;
                let lo = if bin == 0 {
                    0.0
                } else {
                    highest_of(bin - 1) as f64 + 1.0
                };
                (lo + hi) / 2.0 * f64::from(n)
            })
            .sum();
        sum / total as f64
    }

    /// The highest value recorded (its bin's highest value); 0 when empty.
    pub(super) fn max(&self) -> u64 {
        self.bins().last().map_or(0, |b| highest_of(b.0))
    }

    /// Base64 of LEB128 varints: for each bin, the gap to the previous bin, then the count.
    pub(super) fn encode(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD_NO_PAD;
        match self {
            Sketch::Open(bins) => b64.encode(pack(bins)),
            Sketch::Packed(bytes) => b64.encode(bytes),
        }
    }

    /// Reads what [`Sketch::encode`] wrote, packed.
    pub(super) fn decode(text: &str) -> Result<Sketch, String> {
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text)
            .map_err(|e| format!("latency series: {e}"))?;
        let mut rest = &bytes[..];
        let mut prev: Option<u16> = None;
        while !rest.is_empty() {
            let gap = read_varint(&mut rest)?;
            let n = read_varint(&mut rest)?;
            let bin = u64::from(prev.unwrap_or(0)) + gap;
            let ok = bin <= u64::from(MAX_BIN)
                && (prev.is_none() || gap > 0)
                && n > 0
                && n <= u64::from(u32::MAX);
            if !ok {
                return Err("latency series: bad bin".to_string());
            }
            prev = Some(bin as u16);
        }
        Ok(Sketch::Packed(bytes.into_boxed_slice()))
    }
}

/// The `(bin, count)` pairs of a [`Sketch`], in bin order.
enum Bins<'a> {
    Open(std::slice::Iter<'a, (u16, u32)>),
    Packed { rest: &'a [u8], prev: u16 },
}

impl Iterator for Bins<'_> {
    type Item = (u16, u32);

    fn next(&mut self) -> Option<(u16, u32)> {
        match self {
            Bins::Open(bins) => bins.next().copied(),
            Bins::Packed { rest, prev } => {
                if rest.is_empty() {
                    return None;
                }
                // Well formed (see `Sketch::Packed`): these neither fail nor overflow.
                let gap = read_varint(rest).ok()?;
                let n = read_varint(rest).ok()?;
                *prev += gap as u16;
                Some((*prev, n as u32))
            }
        }
    }
}

/// The varints of sorted `bins` (see [`Sketch::Packed`]).
fn pack(bins: &[(u16, u32)]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(bins.len() * 3);
    let mut prev = 0;
    for &(bin, n) in bins {
        push_varint(&mut bytes, u64::from(bin - prev));
        push_varint(&mut bytes, u64::from(n));
        prev = bin;
    }
    bytes
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(rest: &mut &[u8]) -> Result<u64, String> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let Some((&b, tail)) = rest.split_first() else {
            break;
        };
        *rest = tail;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("latency series: truncated number".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bins_are_contiguous_and_monotonic() {
        assert_eq!(bin_of(u64::MAX), MAX_BIN);
        for bin in 0..MAX_BIN {
            let hi = highest_of(bin);
            assert_eq!(bin_of(hi), bin);
            assert_eq!(bin_of(hi + 1), bin + 1);
        }
        assert_eq!(highest_of(MAX_BIN), u64::MAX);
    }

    #[test]
    fn quantiles() {
        let mut s = Sketch::default();
        assert_eq!((s.quantile(0.5), s.max()), (0, 0));
        for v in 1..=100 {
            s.record(v * 1000);
        }
        let p50 = s.quantile(0.5);
        let p99 = s.quantile(0.99);
        assert!((50_000..50_400).contains(&p50), "{p50}");
        assert!((99_000..99_800).contains(&p99), "{p99}");
        assert!((100_000..100_800).contains(&s.max()));
        assert_eq!(s.count(), 100);
    }

    #[test]
    fn a_packed_sketch_takes_about_two_bytes_a_bin() {
        let mut s = Sketch::default();
        // Every value from 256 µs to 8 ms: 5 powers of two of 128 bins, 2 to 32 values each.
        for v in 256..8_192 {
            s.record(v);
        }
        let bins = s.len();
        assert_eq!(bins, 5 * 128);
        s.pack();
        let Sketch::Packed(bytes) = &s else {
            panic!("packed")
        };
        // A byte for each gap and count (counts under 128), but two for the first gap.
        assert_eq!(bytes.len(), 2 * bins + 1);
        assert_eq!(Sketch::decode(&s.encode()), Ok(s));
    }

    #[test]
    fn bad_encodings_are_rejected() {
        assert!(Sketch::decode("!!").is_err());
        assert!(Sketch::decode("gA").is_err()); // a lone continuation byte
        let mut bytes = Vec::new();
        push_varint(&mut bytes, 5);
        push_varint(&mut bytes, 0);
        let zero = base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes);
        assert!(Sketch::decode(&zero).is_err());
    }

    proptest! {
        #[test]
        fn relative_error_is_small(v in any::<u64>()) {
            let hi = highest_of(bin_of(v));
            prop_assert!(hi >= v);
            prop_assert!((hi - v) as f64 <= v as f64 / 128.0);
        }

        #[test]
        fn merges_and_packing_keep_every_count(
            a in prop::collection::vec(0u64..1_000_000, 0..200),
            b in prop::collection::vec(0u64..1_000_000, 0..200),
            pack_a: bool,
            pack_b: bool,
        ) {
            let (mut x, mut y, mut all) = (Sketch::default(), Sketch::default(), Sketch::default());
            for &v in &a {
                x.record(v);
                all.record(v);
            }
            for &v in &b {
                y.record(v);
                all.record(v);
            }
            if pack_a {
                x.pack();
            }
            if pack_b {
                y.pack();
            }
            x.merge(&y);
            // A packed sketch stays packed, and equal to the open one with the same counts.
            prop_assert_eq!(matches!(x, Sketch::Packed(_)), pack_a);
            prop_assert_eq!(&x, &all);
            prop_assert_eq!(x.encode(), all.encode());
            prop_assert_eq!(
                (x.count(), x.quantile(0.5), x.quantile(0.99), x.max()),
                (all.count(), all.quantile(0.5), all.quantile(0.99), all.max())
            );
            prop_assert_eq!(x.mean().to_bits(), all.mean().to_bits());
            // Recording into a packed sketch opens it.
            x.record(7);
            all.record(7);
            prop_assert!(matches!(x, Sketch::Open(_)));
            prop_assert_eq!(x, all);
        }

        #[test]
        fn encoding_roundtrips(values in prop::collection::vec(any::<u64>(), 0..100)) {
            let mut s = Sketch::default();
            for v in values {
                s.record(v);
            }
            prop_assert_eq!(Sketch::decode(&s.encode()), Ok(s));
        }
    }
}
