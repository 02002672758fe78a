//! The load a plan offers, in numbers a user reads before anything connects (`validate`)
//! and that the result file keeps beside what was measured (`population` in
//! `result.json`): users online over the day, the sessions, the contacts, how the planned
//! sends split over the senders, the groups and the body sizes.

use super::schedule::{self, Program, Sends};
use crate::scenario::{size_summary, BodySize, Plan};
use crate::vocab::offered::{pow2_hist, Offered, LOGIN_BUCKETS, POINTS, TOP_SHARES};

/// The numbers of `plan`, when its population has a shape (sessions or contacts) or its
/// body sizes are drawn from a distribution.
pub fn offered(plan: &Plan) -> Option<Offered> {
    let pop = &plan.population;
    if pop.sessions.is_none() && pop.contacts.is_none() && !plan.draws_sizes() {
        return None;
    }
    let mut o = Offered {
        day_ms: 0,
        online: Vec::new(),
        sessions: 0,
        session_p50_ms: 0,
        session_p90_ms: 0,
        contacts_mean: 0.0,
        contacts_max: 0,
        chat_sends: 0,
        top1_share: 0.0,
        top10_share: 0.0,
        groups: 0,
        largest_group: 0,
        group_sends: 0,
        group_deliveries: 0,
        sizes: None,
        logins: Vec::new(),
        session_hist: Vec::new(),
        group_hist: Vec::new(),
        top_shares: Vec::new(),
    };
    if let Some(s) = &pop.sessions {
        let day = s.day.as_millis() as u64;
        o.day_ms = day;
        o.online = (0..=POINTS)
            .map(|k| {
                let at = (day * u64::from(k) / u64::from(POINTS)).min(day.saturating_sub(1));
                s.online_at(at as u32)
            })
            .collect();
        let mut l: Vec<u32> = s.lengths().collect();
        l.sort_unstable();
        let q = |p: f64| {
            let i = ((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1));
            u64::from(l.get(i).copied().unwrap_or(0))
        };
        (o.sessions, o.session_p50_ms, o.session_p90_ms) = (s.count() as u64, q(0.5), q(0.9));
        o.session_hist = pow2_hist(l.iter().map(|&ms| u64::from(ms)));
        o.logins = vec![0; LOGIN_BUCKETS as usize];
        for at in s.logins().filter(|&at| at > 0) {
            let b = u64::from(at) * u64::from(LOGIN_BUCKETS) / day.max(1);
            if let Some(n) = o.logins.get_mut(b as usize) {
                *n += 1;
            }
        }
    }
    if let Some(c) = &pop.contacts {
        o.contacts_max = (0..c.users()).map(|u| c.of(u).len()).max().unwrap_or(0) as u64;
        o.contacts_mean = c.slots() as f64 / f64::from(c.users().max(1));
    }
    sends(&mut o, plan);
    Some(o)
}

/// The planned sends: to contacts by user (and the top senders' shares), into groups
/// with their deliveries, and their body sizes.
fn sends(o: &mut Offered, plan: &Plan) {
    let sched = schedule::build(plan, 0..plan.population.users);
    let mut recipients: foldhash::HashMap<_, u64> = foldhash::HashMap::default();
    for (stream, _) in &sched.expect.tracks {
        *recipients.entry(*stream).or_default() += 1;
    }
    let mut per_user = Vec::with_capacity(sched.vus.len());
    let mut sizes = Sizes::default();
    for v in &sched.vus {
        let mut mine = 0;
        for p in &v.programs {
            sizes.add(p);
            match &p.sends {
                Sends::Contacts { .. } => mine += p.planned(),
                Sends::Group { stream, .. } => {
                    let n = p.planned();
                    o.group_sends += n;
                    o.group_deliveries += n * recipients.get(stream).copied().unwrap_or(0);
                }
                _ => {}
            }
        }
        per_user.push(mine);
    }
    o.sizes = size_summary(&sizes.planned, &sizes.listed);
    per_user.sort_unstable_by(|a, b| b.cmp(a));
    o.chat_sends = per_user.iter().sum();
    let share = |fraction: f64| {
        let n = ((per_user.len() as f64 * fraction).ceil() as usize).max(1);
        per_user.iter().take(n).sum::<u64>() as f64 / o.chat_sends.max(1) as f64
    };
    (o.top1_share, o.top10_share) = (share(0.01), share(0.1));
    if o.chat_sends > 0 {
        o.top_shares = TOP_SHARES.iter().map(|&f| [f, share(f)]).collect();
    }
    let mut members = Vec::new();
    for t in &plan.traffic {
        if let crate::scenario::TrafficShape::Chat(c) = &t.kind {
            o.groups += c.groups.len() as u64;
            let largest = c.groups.iter().map(|g| g.members.len()).max().unwrap_or(0);
            o.largest_group = o.largest_group.max(largest as u64);
            members.extend(c.groups.iter().map(|g| g.members.len() as u64));
        }
    }
    o.group_hist = pow2_hist(members.into_iter());
}

/// The planned messages by the sizes they are drawn from, and the sizes a trace lists.
#[derive(Default)]
struct Sizes {
    /// Each pattern's sizes and its planned messages that draw from them.
    planned: Vec<(BodySize, u64)>,
    /// Sizes given per message.
    listed: Vec<usize>,
}

impl Sizes {
    /// The planned messages of `p`.
    fn add(&mut self, p: &Program) {
        let mut drawn = p.planned();
        if let Sends::Trace { senders, ix, .. } = &p.sends {
            let before = self.listed.len();
            let own = senders[*ix]
                .sizes
                .iter()
                .take(drawn as usize)
                .filter(|&&b| b > 0);
            self.listed.extend(own.map(|&b| b as usize));
            drawn -= (self.listed.len() - before) as u64;
        }
        match self.planned.iter_mut().find(|(s, _)| *s == p.size) {
            Some((_, n)) => *n += drawn,
            None => self.planned.push((p.size.clone(), drawn)),
        }
    }
}
