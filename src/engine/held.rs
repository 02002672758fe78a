//! How many users the plan puts online, and how many were, over the traffic: the two are
//! integrated over time into [`Counter::PlannedUserMs`] and [`Counter::OnlineUserMs`] per
//! second, so that the report can tell whether the users the scenario asked for were held
//! online (its built-in `checks.min_online`), also around chaos steps.

use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::{Counter, Metrics};
use crate::scenario::{Population, UserIx};

/// The least time after its login is due that a late or returning user is planned online
/// (the scenario's `target.connect_timeout` when longer): its login, and the catch-up a
/// protocol does with it, take time of their own, which the login latency and
/// `checks.min_login_success` judge; the held share is about users staying online.
pub const LOGIN_GRACE: Duration = Duration::from_secs(1);

/// The users of this process the plan puts online at each moment of the traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOnline {
    /// Users online throughout (neither late nor churning).
    steady: u64,
    /// When each late user of the process logs in, from the start of the run, sorted.
    late_logins: Vec<Duration>,
    /// Churning users of the process.
    churning: u64,
    /// When the churning users are away, from the start of the run.
    away: std::ops::Range<Duration>,
    /// Users who come and go in sessions: after each login (`grace` after it is due) or
    /// logout of the process's users, from the traffic start, how many are planned online.
    sessions: Vec<(Duration, u64)>,
}

impl PlannedOnline {
    /// The plan of `pop` for the users in `range`, a late or returning user counted from
    /// `grace` after its login is due (at least [`LOGIN_GRACE`]).
    pub fn of(pop: &Population, range: std::ops::Range<UserIx>, grace: Duration) -> PlannedOnline {
        let grace = grace.max(LOGIN_GRACE);
        let mut late_logins: Vec<Duration> = pop
            .late
            .iter()
            .enumerate()
            .filter(|(_, ix)| range.contains(ix))
            .map(|(position, _)| super::arrival::late_login(pop, position) + grace)
            .collect();
        late_logins.sort_unstable();
        let churning = pop.churn.iter().filter(|ix| range.contains(ix)).count() as u64;
        let sessions = match &pop.sessions {
            Some(s) => session_steps(s, range.clone(), grace),
            None => Vec::new(),
        };
        let steady = if pop.sessions.is_some() {
            0
        } else {
            range.len() as u64 - late_logins.len() as u64 - churning
        };
        PlannedOnline {
            sessions,
            steady,
            late_logins,
            churning,
            away: pop.churn_offline_at..pop.churn_back_at + grace,
        }
    }

    /// The users planned online at `t` from the start of the run, `since_traffic` from the
    /// traffic start.
    pub fn at(&self, (t, since_traffic): (Duration, Duration)) -> u64 {
        let steps = self
            .sessions
            .partition_point(|&(at, _)| at <= since_traffic);
        let sessions = steps.checked_sub(1).map_or(0, |i| self.sessions[i].1);
        let late = self.late_logins.partition_point(|&login| login <= t) as u64;
        let churning = if self.away.contains(&t) {
            0
        } else {
            self.churning
        };
        self.steady + late + churning + sessions
    }
}

/// Each login (`grace` after it is due) and logout of the users in `range`, from the
/// traffic start, sorted, with the users planned online after it; a session shorter than
/// `grace` counts for nothing.
fn session_steps(
    s: &crate::scenario::plan::Sessions,
    range: std::ops::Range<UserIx>,
    grace: Duration,
) -> Vec<(Duration, u64)> {
    let ms = |t: u32| Duration::from_millis(t.into());
    let mut steps: Vec<(Duration, bool)> = range
        .flat_map(|u| s.of(u).iter())
        .filter(|w| w[1] == crate::scenario::plan::OPEN || ms(w[0]) + grace < ms(w[1]))
        .flat_map(|w| {
            let logout = (w[1] != crate::scenario::plan::OPEN).then(|| (ms(w[1]), false));
            std::iter::once((ms(w[0]) + grace, true)).chain(logout)
        })
        .collect();
    steps.sort_unstable();
    let mut online = 0u64;
    steps
        .into_iter()
        .map(|(at, login)| {
            online = if login {
                online + 1
            } else {
                online.saturating_sub(1)
            };
            (at, online)
        })
        .collect()
}

/// Integrates users online and users planned online over the traffic, a sample at a time.
#[derive(Debug)]
pub struct Held {
    /// Who should be online when.
    plan: PlannedOnline,
    /// The previous sample, while the traffic goes on.
    last: Option<Instant>,
}

impl Held {
    /// Nothing integrated yet.
    pub fn new(plan: PlannedOnline) -> Held {
        Held { plan, last: None }
    }

    /// Adds the time since the previous sample, at `online` users now, to `m` at second
    /// `sec`; `since_t0` is `now` from the start of the run. The first sample only starts
    /// the clock.
    pub fn sample(
        &mut self,
        m: &mut Metrics,
        now: Instant,
        (since_t0, since_traffic): (Duration, Duration),
        online: u64,
    ) {
        if let Some(last) = self.last {
            let us = now.saturating_duration_since(last).as_micros() as u64;
            let sec = since_t0.as_secs() as u32;
            let planned = self.plan.at((since_t0, since_traffic));
            m.add(
                sec,
                Counter::PlannedUserMs,
                planned.saturating_mul(us) / 1000,
            );
            m.add(
                sec,
                Counter::OnlineUserMs,
                online.min(planned).saturating_mul(us) / 1000,
            );
        }
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_users_count_from_their_login_and_churning_users_not_while_away() {
        let pop = Population {
            users: 10,
            prefix: "u".to_owned(),
            first_id: 0,
            arrival: Vec::new(),
            late: vec![2, 7],
            late_at: Duration::from_secs(4),
            late_arrival: Vec::new(),
            churn: vec![3, 4, 8],
            churn_offline_at: Duration::from_secs(5),
            churn_back_at: Duration::from_secs(8),
            sessions: None,
            contacts: None,
        };
        let all = PlannedOnline::of(&pop, 0..10, Duration::ZERO);
        // Late users count from a second after their login is due, returning ones alike.
        assert_eq!(all.at((Duration::from_secs(1), Duration::ZERO)), 8);
        assert_eq!(all.at((Duration::from_millis(4500), Duration::ZERO)), 8);
        assert_eq!(all.at((Duration::from_secs(6), Duration::ZERO)), 7);
        assert_eq!(all.at((Duration::from_millis(8500), Duration::ZERO)), 7);
        assert_eq!(all.at((Duration::from_secs(9), Duration::ZERO)), 10);
        // A shard's share: users 5..10 hold one late user (in at 4 s) and one churning
        // user (away from 5 s).
        let shard = PlannedOnline::of(&pop, 5..10, Duration::ZERO);
        // A longer connect timeout: the late users count from 4 + 3 s.
        let slow = PlannedOnline::of(&pop, 0..10, Duration::from_secs(3));
        assert_eq!(
            (
                slow.at((Duration::from_millis(6500), Duration::ZERO)),
                slow.at((Duration::from_secs(7), Duration::ZERO))
            ),
            (5, 7)
        );
        assert_eq!(
            (
                shard.at((Duration::from_secs(1), Duration::ZERO)),
                shard.at((Duration::from_secs(6), Duration::ZERO))
            ),
            (4, 4)
        );
    }

    #[test]
    fn online_beyond_the_plan_is_not_credited_and_time_is_integrated() {
        let pop = Population {
            users: 4,
            prefix: "u".to_owned(),
            first_id: 0,
            arrival: Vec::new(),
            late: Vec::new(),
            late_at: Duration::ZERO,
            late_arrival: Vec::new(),
            churn: Vec::new(),
            churn_offline_at: Duration::ZERO,
            churn_back_at: Duration::ZERO,
            sessions: None,
            contacts: None,
        };
        let mut held = Held::new(PlannedOnline::of(&pop, 0..4, Duration::ZERO));
        let mut m = Metrics::new();
        let t = Instant::now();
        held.sample(&mut m, t, (Duration::from_secs(1), Duration::ZERO), 4);
        held.sample(
            &mut m,
            t + Duration::from_millis(500),
            (Duration::from_millis(1500), Duration::ZERO),
            2,
        );
        held.sample(
            &mut m,
            t + Duration::from_millis(1000),
            (Duration::from_secs(2), Duration::ZERO),
            9,
        );
        assert_eq!(m.count(Counter::PlannedUserMs), 4 * 1000);
        assert_eq!(m.count(Counter::OnlineUserMs), 2 * 500 + 4 * 500);
    }
}
