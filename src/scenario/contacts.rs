//! `[population.contacts]`: who talks to whom. A contact graph with a heavy-tailed degree,
//! drawn from the seed as a Chung–Lu (expected-degree) graph: user weights follow a power
//! law of exponent `exponent` (most users have a few contacts, a few have hundreds), and
//! `users × mean / 2` edges join two users chosen in proportion to their weights. Contacts
//! are mutual, and every shard draws the same graph.
//!
//! Written here because no maintained crate draws a seeded Chung–Lu graph into a compact
//! adjacency list (petgraph's generators are unweighted and hold per-node objects).
//! Memory is O(users + edges): 8 bytes per user and 8 per edge, ~100 MB for 1M users with
//! a mean of 10 contacts.

use std::fmt;

use fastrand::Rng;

use super::draw::mix;
use crate::vocab::UserIx;

/// Seed tag of the contact graph.
const TAG: u64 = u64::MAX - 2;

/// The contact model as the scenario asks for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactModel {
    /// Mean contacts per user.
    pub mean: f64,
    /// Exponent γ of the degree distribution, P(k) ∝ k^−γ (> 2).
    pub exponent: f64,
}

/// Every user's contacts, as an adjacency list.
#[derive(Clone, PartialEq)]
pub struct Contacts {
    /// Index of each user's first contact in `list`; `users + 1` entries.
    first: Vec<u32>,
    /// Contacts, by user, ascending.
    list: Vec<UserIx>,
    /// What it was drawn from: the model and the seed ([`resolve`] draws it again).
    recipe: (ContactModel, u64),
}

impl fmt::Debug for Contacts {
    /// A summary: the adjacency list of a million users is no debugging aid.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Contacts {{ users: {}, edges: {} }}",
            self.first.len().saturating_sub(1),
            self.list.len() / 2
        )
    }
}

impl Contacts {
    /// The contacts of user `u`, ascending.
    pub fn of(&self, u: UserIx) -> &[UserIx] {
        &self.list[self.offset(u) as usize..self.first[u as usize + 1] as usize]
    }

    /// Where user `u`'s contacts start in the whole list: the stream of `u`'s messages to
    /// its `k`-th contact is the pattern's stream base + `offset(u) + k`.
    pub fn offset(&self, u: UserIx) -> u32 {
        self.first[u as usize]
    }

    /// The user whose contacts hold `slot` of the whole list.
    pub fn owner(&self, slot: u32) -> UserIx {
        (self.first.partition_point(|&f| f <= slot) - 1) as UserIx
    }

    /// Contact slots of all users (each mutual contact counted on both sides).
    pub fn slots(&self) -> usize {
        self.list.len()
    }

    /// The model and seed it was drawn from.
    pub fn recipe(&self) -> (ContactModel, u64) {
        self.recipe
    }

    /// Users.
    pub fn users(&self) -> u32 {
        self.first.len().saturating_sub(1) as u32
    }
}

/// Draws the contact graph of `model` for `users` users from `seed`.
pub fn resolve(model: ContactModel, users: u32, seed: u64) -> Contacts {
    let mut rng = Rng::with_seed(mix(seed, TAG));
    let n = users as usize;
    // Weights by a random rank, so a user's degree does not follow its index (shards, which
    // are ranges of indices, get a fair share of the hubs).
    let mut rank: Vec<u32> = (0..users).collect();
    rng.shuffle(&mut rank);
    let alpha = 1.0 / (model.exponent - 1.0);
    let weights: Vec<f64> = rank
        .iter()
        .map(|&r| f64::from(r + 1).powf(-alpha))
        .collect();
    drop(rank);
    let alias = Alias::new(&weights);
    drop(weights);
    let edges = (f64::from(users) * model.mean / 2.0).round() as u64;
    let mut pairs: Vec<(UserIx, UserIx)> = Vec::with_capacity(edges as usize);
    for _ in 0..edges {
        let (a, b) = (alias.draw(&mut rng), alias.draw(&mut rng));
        if a != b {
            pairs.push((a.min(b), a.max(b)));
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut degree = vec![0u32; n + 1];
    for &(a, b) in &pairs {
        degree[a as usize] += 1;
        degree[b as usize] += 1;
    }
    let mut first = Vec::with_capacity(n + 1);
    let mut at = 0u32;
    for d in &degree[..n] {
        first.push(at);
        at += d;
    }
    first.push(at);
    let mut fill = first.clone();
    let mut list = vec![0; at as usize];
    for &(a, b) in &pairs {
        list[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
        list[fill[b as usize] as usize] = a;
        fill[b as usize] += 1;
    }
    for u in 0..n {
        list[first[u] as usize..first[u + 1] as usize].sort_unstable();
    }
    Contacts {
        first,
        list,
        recipe: (model, seed),
    }
}

/// Walker's alias table: draws an index in proportion to its weight in O(1).
struct Alias {
    /// Probability of keeping the drawn column.
    keep: Vec<f64>,
    /// The column's other index.
    other: Vec<u32>,
}

impl Alias {
    /// The table of `weights` (all > 0).
    fn new(weights: &[f64]) -> Alias {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let mut keep: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut other: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..n as u32).partition(|&i| keep[i as usize] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            other[s as usize] = l;
            keep[l as usize] -= 1.0 - keep[s as usize];
            if keep[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        Alias { keep, other }
    }

    /// One index.
    fn draw(&self, rng: &mut Rng) -> u32 {
        let i = rng.usize(..self.keep.len());
        if rng.f64() < self.keep[i] {
            i as u32
        } else {
            self.other[i]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: ContactModel = ContactModel {
        mean: 10.0,
        exponent: 2.5,
    };

    #[test]
    fn contacts_are_mutual_and_never_oneself() {
        let c = resolve(MODEL, 5000, 1);
        for u in 0..5000 {
            for &v in c.of(u) {
                assert_ne!(u, v);
                assert!(c.of(v).binary_search(&u).is_ok(), "{u} → {v} but not back");
            }
        }
    }

    #[test]
    fn the_graph_is_the_same_from_the_same_seed() {
        let a = resolve(MODEL, 3000, 4);
        assert_eq!(a, resolve(MODEL, 3000, 4));
        assert_ne!(a, resolve(MODEL, 3000, 5));
    }

    #[test]
    fn degrees_have_the_asked_mean_and_a_heavy_tail() {
        let c = resolve(MODEL, 20_000, 2);
        let mean = c.slots() as f64 / 20_000.0;
        // Repeated pairs between hubs are merged, so a little under the asked mean.
        assert!((8.5..=10.0).contains(&mean), "mean degree {mean}");
        let mut degrees: Vec<usize> = (0..20_000).map(|u| c.of(u).len()).collect();
        degrees.sort_unstable();
        let (median, max) = (degrees[10_000], degrees[19_999]);
        assert!(median < 8, "median {median}");
        assert!(max > 200, "the largest hub has {max}");
    }
}
