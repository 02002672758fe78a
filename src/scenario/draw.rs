//! Seeded choices of users: pools of users without listing them, samples (Floyd's
//! algorithm or every k-th) and the seeds of each purpose. A leaf of lowering: the kinds
//! draw their users with it.
//!
//! Memory is O(chosen users), never O(users): a pool ("all users but these") is the sorted
//! list of the excluded ones, and a drawn position is mapped to its user by walking that
//! list ([`Pool`]).

use std::collections::HashSet;

use fastrand::Rng;

use super::schema::Pick;
use crate::vocab::UserIx;

/// The users `0..n` but `excluded`, in order, without listing them.
pub struct Pool<'a> {
    /// Users `0..n`.
    pub n: u32,
    /// The users left out: sorted ascending, distinct, each below `n`.
    pub excluded: &'a [UserIx],
}

impl Pool<'_> {
    /// How many users the pool holds.
    pub fn len(&self) -> u32 {
        self.n - self.excluded.len() as u32
    }

    /// The users at `positions` (ascending, each below [`Pool::len`]), in one walk over
    /// the excluded users.
    pub fn at(&self, positions: impl IntoIterator<Item = u32>) -> Vec<UserIx> {
        let mut skipped = 0;
        positions
            .into_iter()
            .map(|v| {
                let mut u = v + skipped as u32;
                while self.excluded.get(skipped).is_some_and(|&x| x <= u) {
                    skipped += 1;
                    u += 1;
                }
                u
            })
            .collect()
    }
}

/// `count` users of `pool` (`count` ≤ its length), sorted ascending.
pub fn choose(rng: &mut Rng, pool: &Pool<'_>, count: u32, pick: Pick) -> Vec<UserIx> {
    let len = u64::from(pool.len());
    match pick {
        Pick::EveryKth => {
            pool.at((0..u64::from(count)).map(|j| (j * len / u64::from(count)) as u32))
        }
        Pick::Random => pool.at(floyd(rng, pool.len(), count)),
    }
}

/// `k` distinct numbers of `0..n` (Floyd's algorithm, O(k)), sorted ascending.
///
/// The drawn set is kept in a bit per number when `k` is at least `n / 16` (then `n / 8`
/// bytes are less than the `4k` bytes of the result, and far faster than hashing), else in
/// a hash set; both hold the same numbers, so the sample does not depend on which.
pub fn floyd(rng: &mut Rng, n: u32, k: u32) -> Vec<u32> {
    if u64::from(k) * 16 >= u64::from(n) {
        let mut bits = vec![0u64; (n as usize).div_ceil(64)];
        let mut insert = |t: u32| {
            let (word, bit) = (t as usize / 64, 1u64 << (t % 64));
            let new = bits[word] & bit == 0;
            bits[word] |= bit;
            new
        };
        for j in n - k..n {
            let t = rng.u32(..=j);
            if !insert(t) {
                insert(j);
            }
        }
        let mut out = Vec::with_capacity(k as usize);
        for (w, &word) in bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                out.push(w as u32 * 64 + rest.trailing_zeros());
                rest &= rest - 1;
            }
        }
        return out;
    }
    let mut set = HashSet::with_capacity(k as usize);
    for j in n - k..n {
        let t = rng.u32(..=j);
        if !set.insert(t) {
            set.insert(j);
        }
    }
    let mut out: Vec<u32> = set.into_iter().collect();
    out.sort_unstable();
    out
}

/// A seed for purpose `tag` (splitmix64 of seed and tag).
pub fn mix(seed: u64, tag: u64) -> u64 {
    let mut z = seed ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floyd_is_distinct_and_in_range() {
        let mut rng = Rng::with_seed(1);
        let v = floyd(&mut rng, 100, 100);
        assert_eq!(v, (0..100).collect::<Vec<_>>());
        let v = floyd(&mut rng, 1000, 10);
        assert_eq!(v.len(), 10);
        assert!(v.windows(2).all(|w| w[0] < w[1]) && v[9] < 1000);
    }

    #[test]
    fn floyd_draws_the_same_set_with_bits_or_hashes() {
        // k = n/16 takes the bit set; the same draws into a hash set must agree.
        for (n, k) in [(1600, 100), (64, 64), (65, 7), (1000, 999)] {
            let bits = floyd(&mut Rng::with_seed(9), n, k);
            let mut rng = Rng::with_seed(9);
            let mut set = HashSet::new();
            for j in n - k..n {
                let t = rng.u32(..=j);
                if !set.insert(t) {
                    set.insert(j);
                }
            }
            let mut want: Vec<u32> = set.into_iter().collect();
            want.sort_unstable();
            assert_eq!(bits, want, "n={n} k={k}");
        }
    }

    #[test]
    fn every_kth_is_evenly_spaced() {
        let pool = Pool {
            n: 100,
            excluded: &[],
        };
        let v = choose(&mut Rng::with_seed(1), &pool, 4, Pick::EveryKth);
        assert_eq!(v, vec![0, 25, 50, 75]);
    }

    #[test]
    fn pools_skip_the_excluded_users() {
        let pool = Pool {
            n: 10,
            excluded: &[0, 1, 5, 9],
        };
        assert_eq!(pool.len(), 6);
        assert_eq!(pool.at(0..6), vec![2, 3, 4, 6, 7, 8]);
        assert_eq!(pool.at([0, 3, 5]), vec![2, 6, 8]);
        let listed: Vec<UserIx> = (0..10).filter(|u| ![0, 1, 5, 9].contains(u)).collect();
        let mut rng = Rng::with_seed(3);
        for _ in 0..50 {
            let drawn = floyd(&mut rng, 6, 3);
            let want: Vec<UserIx> = drawn.iter().map(|&i| listed[i as usize]).collect();
            assert_eq!(pool.at(drawn), want);
        }
    }
}
