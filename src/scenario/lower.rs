//! Lowering: a validated scenario → a [`Plan`] with every user chosen.
//!
//! Rules (also in `docs/scenario.md`):
//! - Every choice comes from `fastrand` seeded by the scenario seed mixed with a fixed tag
//!   per purpose (population, then one per pattern), so adding a pattern does not change
//!   the users of the others, and every shard computes the same plan.
//! - Late and churning users are one seeded random sample of all users (disjoint).
//! - Senders (direct senders, group senders, echo connections) are drawn from the users
//!   online throughout: neither late nor churning. Receivers, group members and idle users
//!   are drawn from all users, so late and churning users receive too and must catch up
//!   by sync.
//! - Direct receivers are distinct from its senders (nobody messages themselves).
//! - Each group first draws its senders, then the other members from all remaining users;
//!   members and senders are sorted ascending; `members[0]` creates the group.
//! - Groups are named `g{seed:x}-{n}` with `n` counting groups across the whole plan.
//! - Stream ids are dense from 0 in pattern order: a direct pattern takes
//!   senders × receivers ids, a group pattern groups × senders_per_group.
//! - `pick = "every_kth"` takes evenly spaced users of the pool (`pool[j·len/count]`)
//!   instead of a random sample.
//!
//! Memory is O(patterns + chosen users), never O(users) (see `draw.rs`). An `idle`
//! pattern of every user is [`super::plan::IdleUsers::All`].

use std::sync::Arc;

use fastrand::Rng;

use super::draw::{floyd, mix, Pool};
use super::kinds::Lowering;
use super::plan::{Plan, Population, Shard, Traffic, UserIx};
use super::population::Pop;
use super::validate::Checked;
use super::{contacts, sessions};

/// Resolves every user of a validated scenario.
pub fn lower(c: Checked, shard: Shard) -> Plan {
    let pop = c.population;
    let (late, churn) = away(c.seed, &pop);
    let mut away = [late.as_slice(), churn.as_slice()].concat();
    away.sort_unstable();
    let presence = c.signals.as_ref().is_some_and(|s| s.presence);
    let needed =
        pop.contacts.is_some() || presence || c.traffic.iter().any(|p| p.numbers.needs_contacts());
    let contacts = needed.then(|| {
        let model = pop
            .contacts
            .unwrap_or_else(super::population::default_contacts);
        Arc::new(contacts::resolve(model, pop.users, c.seed))
    });
    let mut cx = Lowering {
        contacts: contacts.clone(),
        rng: Rng::with_seed(0),
        seed: c.seed,
        users: pop.users,
        steady: Pool {
            n: pop.users,
            excluded: &away,
        },
        next_stream: 0,
        next_group: 0,
    };
    let mut traffic = Vec::new();
    for (i, p) in c.traffic.into_iter().enumerate() {
        cx.rng = Rng::with_seed(mix(c.seed, i as u64 + 1));
        traffic.push(Traffic {
            name: p.name,
            start: p.start,
            duration: p.duration,
            kind: p.numbers.lower(&mut cx),
        });
    }
    let sessions = pop
        .sessions
        .as_ref()
        .map(|m| Arc::new(sessions::resolve(m, pop.users, c.seed)));
    let mut ledger = c.ledger;
    ledger.wave_us = sessions.as_ref().map_or_else(Vec::new, |s| s.wave_us());
    Plan {
        name: c.name,
        seed: c.seed,
        target: c.target,
        population: Population {
            users: pop.users,
            prefix: pop.prefix,
            first_id: pop.first_id,
            arrival: pop.arrival,
            late,
            late_at: pop.late_at,
            late_arrival: Vec::new(),
            churn,
            churn_offline_at: pop.churn_offline_at,
            churn_back_at: pop.churn_back_at,
            sessions,
            contacts,
        },
        traffic,
        ledger,
        checks: c.checks,
        report: c.report,
        monitor: c.monitor,
        drain: c.drain,
        wake_tick: c.wake_tick,
        shard,
        find: c.find,
        warnings: c.warnings,
        chaos: c.chaos,
        signals: c.signals,
    }
}

/// The late and the churning users: one seeded sample of all users, each sorted.
fn away(seed: u64, pop: &Pop) -> (Vec<UserIx>, Vec<UserIx>) {
    let mut rng = Rng::with_seed(mix(seed, 0));
    let mut away = floyd(&mut rng, pop.users, pop.late + pop.churn);
    rng.shuffle(&mut away);
    let mut churn = away.split_off(pop.late as usize);
    let mut late = away;
    late.sort_unstable();
    churn.sort_unstable();
    (late, churn)
}
