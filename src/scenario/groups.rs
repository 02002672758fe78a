//! `[population.groups]`: groups with heavy-tailed sizes. Sizes follow a Zipf law between
//! `min` and `max` (most groups a handful of members, a few thousands); members are drawn
//! from the contact graph (a community around a seed user: its contacts, then theirs) or
//! uniformly; the first `speakers` members (at most) send. Drawn from the seed, the same in
//! every shard.

use fastrand::Rng;

use super::contacts::Contacts;
use super::draw::{floyd, mix};
use super::plan::GroupSpec;
use crate::vocab::UserIx;

/// Seed tag of the groups.
const TAG: u64 = u64::MAX - 3;

/// How members are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Members {
    /// Around a seed user through the contact graph.
    Contacts,
    /// Uniformly from all users.
    Uniform,
}

/// The group model as the scenario asks for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupModel {
    /// How many groups.
    pub count: u32,
    /// Fewest members.
    pub min: u32,
    /// Most members.
    pub max: u32,
    /// Zipf exponent of the sizes: P(size = s) ∝ s^−exponent.
    pub exponent: f64,
    /// How members are drawn.
    pub members: Members,
    /// Most senders per group.
    pub speakers: u32,
}

impl GroupModel {
    /// The mean group size the model draws.
    pub fn mean_size(&self) -> f64 {
        let (mut weight, mut members) = (0.0, 0.0);
        for s in self.min..=self.max.max(self.min) {
            let w = f64::from(s).powf(-self.exponent);
            weight += w;
            members += w * f64::from(s);
        }
        members / weight.max(f64::MIN_POSITIVE)
    }
}

/// Draws the groups of `model` among `users` users from `seed`, named `{prefix}{n}`.
pub fn resolve(
    model: &GroupModel,
    users: u32,
    contacts: Option<&Contacts>,
    seed: u64,
    prefix: &str,
) -> Vec<GroupSpec> {
    let mut rng = Rng::with_seed(mix(seed, TAG));
    let sizes = Sizes::new(model.min, model.max.min(users), model.exponent);
    (0..model.count)
        .map(|n| {
            let size = sizes.draw(&mut rng);
            let mut members = match (model.members, contacts) {
                (Members::Contacts, Some(c)) => community(&mut rng, c, users, size),
                _ => floyd(&mut rng, users, size),
            };
            rng.shuffle(&mut members);
            let mut senders = members[..(model.speakers.min(size)) as usize].to_vec();
            senders.sort_unstable();
            members.sort_unstable();
            GroupSpec {
                name: format!("{prefix}{n}"),
                members,
                senders,
            }
        })
        .collect()
}

/// `size` users around a random seed user: its contacts, then theirs, breadth first (each
/// user's contacts in a random order); the rest uniformly when the neighbourhood is
/// smaller.
fn community(rng: &mut Rng, c: &Contacts, users: u32, size: u32) -> Vec<UserIx> {
    let mut chosen = std::collections::HashSet::new();
    let mut order = Vec::with_capacity(size as usize);
    let mut queue = std::collections::VecDeque::from([rng.u32(..users)]);
    while let Some(u) = queue.pop_front() {
        if order.len() == size as usize {
            break;
        }
        if chosen.insert(u) {
            order.push(u);
            // In a random order: contacts are listed by index, and a community cut at
            // its size would otherwise favour low indices (and the shards that hold them).
            let mut next = c.of(u).to_vec();
            rng.shuffle(&mut next);
            queue.extend(next);
        }
    }
    while order.len() < size as usize {
        let u = rng.u32(..users);
        if chosen.insert(u) {
            order.push(u);
        }
    }
    order
}

/// Group sizes between two bounds, drawn by the inverse of their distribution.
struct Sizes {
    /// Fewest members.
    min: u32,
    /// Cumulative probability of each size from `min` on.
    cumulative: Vec<f64>,
}

impl Sizes {
    /// Zipf of `exponent` over `min..=max`.
    fn new(min: u32, max: u32, exponent: f64) -> Sizes {
        let mut sum = 0.0;
        let mut cumulative: Vec<f64> = (min..=max.max(min))
            .map(|s| {
                sum += f64::from(s).powf(-exponent);
                sum
            })
            .collect();
        cumulative.iter_mut().for_each(|c| *c /= sum);
        Sizes { min, cumulative }
    }

    /// One size.
    fn draw(&self, rng: &mut Rng) -> u32 {
        let x = rng.f64();
        self.min
            + self
                .cumulative
                .partition_point(|&c| c <= x)
                .min(self.cumulative.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::contacts::{self, ContactModel};

    fn model(members: Members) -> GroupModel {
        GroupModel {
            count: 2000,
            min: 3,
            max: 2000,
            exponent: 2.0,
            members,
            speakers: 5,
        }
    }

    #[test]
    fn group_sizes_are_heavy_tailed_within_their_bounds() {
        let g = resolve(&model(Members::Uniform), 5000, None, 1, "g");
        let mut sizes: Vec<usize> = g.iter().map(|x| x.members.len()).collect();
        sizes.sort_unstable();
        assert!(sizes[0] >= 3 && sizes[sizes.len() - 1] <= 2000, "{sizes:?}");
        assert!(
            sizes[1000] <= 10,
            "most groups are small: median {}",
            sizes[1000]
        );
        assert!(sizes[1999] >= 200, "a few are large: {}", sizes[1999]);
        assert!(g.iter().all(|x| x.senders.len() == x.members.len().min(5)));
        assert!(g
            .iter()
            .all(|x| x.senders.iter().all(|s| x.members.binary_search(s).is_ok())));
    }

    #[test]
    fn community_members_are_mostly_each_others_contacts() {
        let c = contacts::resolve(
            ContactModel {
                mean: 10.0,
                exponent: 2.5,
            },
            5000,
            3,
        );
        let linked = |g: &GroupSpec| {
            g.members
                .iter()
                .filter(|&&m| c.of(m).iter().any(|o| g.members.binary_search(o).is_ok()))
                .count() as f64
                / g.members.len() as f64
        };
        let by_contacts = resolve(&model(Members::Contacts), 5000, Some(&c), 1, "g");
        let uniform = resolve(&model(Members::Uniform), 5000, Some(&c), 1, "g");
        let share = |g: &[GroupSpec]| g.iter().map(linked).sum::<f64>() / g.len() as f64;
        assert!(share(&by_contacts) > 0.9, "{}", share(&by_contacts));
        assert!(share(&uniform) < 0.5, "{}", share(&uniform));
        assert_eq!(
            by_contacts,
            resolve(&model(Members::Contacts), 5000, Some(&c), 1, "g")
        );
    }

    #[test]
    fn members_spread_over_the_users_indices_also_when_cut_from_a_hub() {
        // Shards are ranges of indices: a group cut from a hub's hundreds of contacts must
        // not favour low ones. Each half of the users holds about half of the memberships.
        let hubs = contacts::resolve(
            ContactModel {
                mean: 10.0,
                exponent: 2.1,
            },
            20_000,
            3,
        );
        let big = GroupModel {
            count: 300,
            min: 100,
            max: 300,
            ..model(Members::Contacts)
        };
        let groups = resolve(&big, 20_000, Some(&hubs), 1, "g");
        let members: Vec<UserIx> = groups
            .iter()
            .flat_map(|g| g.members.iter().copied())
            .collect();
        let low = members.iter().filter(|&&m| m < 10_000).count() as f64 / members.len() as f64;
        assert!(
            (0.46..0.54).contains(&low),
            "{low} of the memberships in the lower half"
        );
    }
}
