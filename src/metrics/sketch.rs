//! A small sparse latency histogram for the per-second series: log-linear bins with 128
//! steps per power of two (under 0.8 % relative error, about two significant digits),
//! stored as a sorted list of the bins actually hit. A second typically touches a few
//! hundred bins, so an hour-long series stays small where a dense 2-digit HDR histogram
//! (26 KB each) would not.

use base64::Engine as _;

/// Steps per power of two, as a bit count.
const SUB_BITS: u32 = 7;
/// Values below this have a bin of their own.
const EXACT: u64 = 2 << SUB_BITS;
/// The highest bin index (that of `u64::MAX`).
const MAX_BIN: u16 = ((64 - 1 - SUB_BITS) << SUB_BITS) as u16 + (EXACT as u16 - 1);

/// Sorted `(bin, count)` pairs; counts saturate at `u32::MAX` per bin.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Sketch {
    bins: Vec<(u16, u32)>,
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
    /// Counts one value.
    pub(super) fn record(&mut self, v: u64) {
        let bin = bin_of(v);
        match self.bins.binary_search_by_key(&bin, |b| b.0) {
            Ok(i) => self.bins[i].1 = self.bins[i].1.saturating_add(1),
            Err(i) => self.bins.insert(i, (bin, 1)),
        }
    }

    /// Adds every value of `other`.
    pub(super) fn merge(&mut self, other: &Sketch) {
        for &(bin, n) in &other.bins {
            match self.bins.binary_search_by_key(&bin, |b| b.0) {
                Ok(i) => self.bins[i].1 = self.bins[i].1.saturating_add(n),
                Err(i) => self.bins.insert(i, (bin, n)),
            }
        }
    }

    /// How many values were recorded.
    pub(super) fn count(&self) -> u64 {
        self.bins.iter().map(|b| u64::from(b.1)).sum()
    }

    /// The value at quantile `q` (0..=1), as the highest value of its bin; 0 when empty.
    pub(super) fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for &(bin, n) in &self.bins {
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
            .bins
            .iter()
            .map(|&(bin, n)| {
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
        self.bins.last().map_or(0, |b| highest_of(b.0))
    }

    /// Base64 of LEB128 varints: for each bin, the gap to the previous bin, then the count.
    pub(super) fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(self.bins.len() * 3);
        let mut prev = 0;
        for &(bin, n) in &self.bins {
            push_varint(&mut bytes, u64::from(bin - prev));
            push_varint(&mut bytes, u64::from(n));
            prev = bin;
        }
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
    }

    /// Reads what [`Sketch::encode`] wrote.
    pub(super) fn decode(text: &str) -> Result<Sketch, String> {
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text)
            .map_err(|e| format!("latency series: {e}"))?;
        let mut rest = &bytes[..];
        let mut bins = Vec::new();
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
            bins.push((bin as u16, n as u32));
            prev = Some(bin as u16);
        }
        Ok(Sketch { bins })
    }
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
        fn encoding_roundtrips(values in prop::collection::vec(any::<u64>(), 0..100)) {
            let mut s = Sketch::default();
            for v in values {
                s.record(v);
            }
            prop_assert_eq!(Sketch::decode(&s.encode()), Ok(s));
        }
    }
}
