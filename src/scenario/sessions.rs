//! `[population.sessions]`: users who come and go over a compressed day. Each user stays
//! for a session length and is away for an offline gap, again and again until the day is
//! over; gaps pass on the arrival curve's clock, so returns follow the curve. At most
//! `max_online` users are online (a login over the cap waits for the next logout). Resolved from the seed
//! into every user's online windows ([`Sessions`]), the same in every shard.
//!
//! Memory is O(users + sessions): 1M users with a handful of sessions each take tens of MB.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

use fastrand::Rng;

use super::dist::ThinkTimes;
use super::draw::mix;
use crate::vocab::UserIx;

/// A window's end for a session still open when the day is over: online to the end of
/// the traffic.
pub const OPEN: u32 = u32::MAX;

/// Seed tag of the sessions (patterns use 1.., the late and churning users 0).
const TAG: u64 = u64::MAX - 1;

/// The built-in daily curve: relative arrival rates at each hour from 00:00 to 24:00. A
/// generic diurnal shape — a trough around 04:00 at a tenth of the peak, a morning rise to
/// 09:00, a plateau, and the evening peak at 21:00 — not fitted to one published dataset.
pub const DAY: [f64; 25] = [
    0.35, 0.22, 0.15, 0.11, 0.10, 0.13, 0.25, 0.45, 0.65, 0.75, 0.80, 0.82, 0.85, 0.80, 0.78, 0.78,
    0.80, 0.85, 0.88, 0.92, 0.98, 1.00, 0.85, 0.60, 0.35,
];

/// Bins the arrival curve is cut into for drawing (piecewise constant within a bin).
const BINS: usize = 1000;

/// The session model as the scenario asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionModel {
    /// The length of the compressed day, from the traffic start.
    pub day: Duration,
    /// Relative arrival rates at evenly spaced points over the day (linear between).
    pub curve: Vec<f64>,
    /// Session lengths.
    pub length: ThinkTimes,
    /// Offline gaps between two sessions.
    pub gap: ThinkTimes,
    /// Most users online at once.
    pub max_online: Option<u32>,
}

/// Every user's online windows over the day, in ms from the traffic start.
#[derive(Clone, PartialEq)]
pub struct Sessions {
    /// The day's length.
    pub day: Duration,
    /// Index of each user's first window in `windows`; `users + 1` entries.
    first: Vec<u32>,
    /// `[login, logout]` per session, by user then time; a logout of [`OPEN`] stays online.
    windows: Vec<[u32; 2]>,
}

impl fmt::Debug for Sessions {
    /// A summary: the windows of a million users are no debugging aid.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Sessions {{ day: {:?}, users: {}, sessions: {} }}",
            self.day,
            self.first.len().saturating_sub(1),
            self.windows.len()
        )
    }
}

impl Sessions {
    /// The online windows of user `u`, `[login, logout]` in ms from the traffic start.
    pub fn of(&self, u: UserIx) -> &[[u32; 2]] {
        let (a, b) = (self.first[u as usize], self.first[u as usize + 1]);
        &self.windows[a as usize..b as usize]
    }

    /// Sessions in all.
    pub fn count(&self) -> usize {
        self.windows.len()
    }

    /// Users online at `ms` from the traffic start.
    pub fn online_at(&self, ms: u32) -> u64 {
        self.windows
            .iter()
            .filter(|[a, b]| *a <= ms && ms < *b)
            .count() as u64
    }

    /// When each session begins, ms from the traffic start.
    pub fn logins(&self) -> impl Iterator<Item = u32> + '_ {
        self.windows.iter().map(|w| w[0])
    }

    /// The login wave's bounds, µs from the traffic start: where each run of its seconds
    /// begins and ends, in turn. A second of the day is in the wave when the logins the plan
    /// puts in it are more than [`WAVE`] × the median second's.
    pub fn wave_us(&self) -> Vec<u64> {
        let mut bounds = Vec::new();
        let mut inside = false;
        let wave = login_wave(self.day, self.logins());
        for (sec, &w) in wave.iter().enumerate().chain([(wave.len(), &false)]) {
            if w != inside {
                bounds.push(sec as u64 * 1_000_000);
                inside = w;
            }
        }
        bounds
    }

    /// Session lengths within the day, ms (a session open at the day's end counts to it).
    pub fn lengths(&self) -> impl Iterator<Item = u32> + '_ {
        let day = self.day.as_millis().min(u128::from(OPEN - 1)) as u32;
        self.windows.iter().map(move |&[a, b]| b.min(day) - a)
    }
}

/// A second is in the login wave when its planned logins exceed this many times the
/// median second's.
pub const WAVE: u64 = 2;

/// Whether each second of a day of `day` is in the login wave: its planned logins (at
/// `logins`, ms from the traffic start) above [`WAVE`] × the median second's.
fn login_wave(day: Duration, logins: impl Iterator<Item = u32>) -> Vec<bool> {
    let mut per_sec = vec![0u64; day.as_secs().max(1) as usize];
    for at in logins {
        if let Some(n) = per_sec.get_mut(at as usize / 1000) {
            *n += 1;
        }
    }
    let mut sorted = per_sec.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    per_sec.iter().map(|&n| n > WAVE * median).collect()
}

/// Resolves `model` for `users` users from `seed`.
///
/// The day starts warm: each user is online at its start with the share of time a user
/// spends online (mean length ÷ (mean length + mean gap)), for the rest of a session drawn
/// afresh, or else away for a gap drawn afresh (scaled by a uniform draw, the remaining
/// part of it). Session lengths run on the clock; gaps run on the curve's clock — a gap
/// of one mean passes quickly when the curve is high and slowly at night — so returns,
/// and the users online, follow the curve.
pub fn resolve(model: &SessionModel, users: u32, seed: u64) -> Sessions {
    let day_ms = model.day.as_millis().min(u128::from(OPEN - 1)) as u32;
    let curve = Curve::new(&model.curve);
    let (length, gap) = (model.length.mean(), model.gap.mean());
    let online_share = length.as_secs_f64() / (length + gap).as_secs_f64().max(1e-9);
    let mut rngs: Vec<Rng> = (0..users)
        .map(|u| Rng::with_seed(mix(mix(seed, TAG), u64::from(u))))
        .collect();
    let ms = |d: Duration| d.as_millis().min(u128::from(OPEN - 1)) as u32;
    // The moment a gap of `g` ms on the curve's clock, begun at `from`, ends (None: after
    // the day).
    let back = |from: u32, g: u32| -> Option<u32> {
        let at = curve.warp(f64::from(from) / f64::from(day_ms)) + f64::from(g) / f64::from(day_ms);
        (at < 1.0).then(|| (curve.unwarp(at) * f64::from(day_ms)) as u32)
    };
    // Logouts sort before logins at the same ms, so a freed place is taken at once.
    let mut events: BinaryHeap<Reverse<(u32, bool, UserIx)>> = (0..users)
        .filter_map(|u| {
            let rng = &mut rngs[u as usize];
            if rng.f64() < online_share {
                return Some(Reverse((0, true, u)));
            }
            let rest = ms(model.gap.draw(rng)) as f64 * rng.f64();
            back(0, rest as u32).map(|at| Reverse((at, true, u)))
        })
        .collect();
    let cap = model.max_online.map_or(u64::MAX, u64::from);
    let (mut online, mut waiting) = (0u64, VecDeque::new());
    let mut since = vec![0u32; users as usize];
    let mut out: Vec<(UserIx, [u32; 2])> = Vec::new();
    while let Some(Reverse((t, login, u))) = events.pop() {
        let mut next = Some(u).filter(|_| login);
        if !login {
            online -= 1;
            out.push((u, [since[u as usize], t]));
            if let Some(at) = back(t, ms(model.gap.draw(&mut rngs[u as usize]))) {
                events.push(Reverse((at.max(t + 1), true, u)));
            }
            next = waiting.pop_front();
        } else if online >= cap {
            waiting.push_back(u);
            next = None;
        }
        let Some(n) = next else { continue };
        online += 1;
        since[n as usize] = t;
        let length = ms(model.length.draw(&mut rngs[n as usize])).max(1);
        match t.checked_add(length).filter(|&end| end < day_ms) {
            Some(end) => events.push(Reverse((end, false, n))),
            None => out.push((n, [t, OPEN])),
        }
    }
    out.sort_unstable();
    let mut first = Vec::with_capacity(users as usize + 1);
    let mut i = 0;
    for u in 0..=users {
        while i < out.len() && out[i].0 < u {
            i += 1;
        }
        first.push(i as u32);
    }
    Sessions {
        day: model.day,
        first,
        windows: out.into_iter().map(|(_, w)| w).collect(),
    }
}

/// An arrival curve as a clock: piecewise constant over [`BINS`] bins, normalized so that
/// a whole day on the curve's clock is a whole day.
struct Curve {
    /// The curve's clock at the end of each bin, rising from 0 to 1.
    cumulative: Vec<f64>,
}

impl Curve {
    /// The curve through `points` (evenly spaced over the day, linear between).
    fn new(points: &[f64]) -> Curve {
        let last = points.len().saturating_sub(1).max(1) as f64;
        let at = |k: usize| {
            points
                .get(k.min(points.len().saturating_sub(1)))
                .copied()
                .unwrap_or(1.0)
        };
        let mut sum = 0.0;
        let mut cumulative: Vec<f64> = (0..BINS)
            .map(|b| {
                let x = (b as f64 + 0.5) / BINS as f64 * last;
                let (i, f) = (x.floor() as usize, x.fract());
                sum += at(i) * (1.0 - f) + at(i + 1) * f;
                sum
            })
            .collect();
        cumulative
            .iter_mut()
            .for_each(|c| *c /= sum.max(f64::MIN_POSITIVE));
        Curve { cumulative }
    }

    /// The curve's clock at time of day `t` (0..=1).
    fn warp(&self, t: f64) -> f64 {
        let x = t.clamp(0.0, 1.0) * BINS as f64;
        let bin = (x as usize).min(BINS - 1);
        let before = if bin == 0 {
            0.0
        } else {
            self.cumulative[bin - 1]
        };
        before + (self.cumulative[bin] - before) * (x - bin as f64)
    }

    /// The time of day (0..1) at which the curve's clock reads `c` (0..1).
    fn unwarp(&self, c: f64) -> f64 {
        let bin = self.cumulative.partition_point(|&x| x <= c).min(BINS - 1);
        let before = if bin == 0 {
            0.0
        } else {
            self.cumulative[bin - 1]
        };
        let width = (self.cumulative[bin] - before).max(f64::MIN_POSITIVE);
        (bin as f64 + ((c - before) / width).clamp(0.0, 1.0)) / BINS as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_login_wave_is_the_seconds_with_more_than_twice_the_median_logins() {
        // Logins per second: 1, 1, 9, 1, 3 — the median is 1.
        let mut at = vec![0, 1000, 3000, 4000, 4100, 4200];
        at.extend((0..9).map(|k| 2000 + k * 100));
        let wave = login_wave(Duration::from_secs(5), at.iter().copied());
        assert_eq!(wave, vec![false, false, true, false, true]);
        let s = Sessions {
            day: Duration::from_secs(5),
            first: vec![0, at.len() as u32],
            windows: at.iter().map(|&a| [a, a + 1]).collect(),
        };
        // Runs of wave seconds [2, 3) and [4, 5), as bounds in µs.
        assert_eq!(
            s.wave_us(),
            vec![2_000_000, 3_000_000, 4_000_000, 5_000_000]
        );
    }

    fn model(max_online: Option<u32>) -> SessionModel {
        SessionModel {
            day: Duration::from_secs(600),
            curve: DAY.to_vec(),
            length: ThinkTimes::Lognormal {
                median: Duration::from_secs(20),
                spread: 1.5,
            },
            gap: ThinkTimes::Exponential(Duration::from_secs(60)),
            max_online,
        }
    }

    #[test]
    fn sessions_are_the_same_from_the_same_seed_and_differ_by_seed() {
        let a = resolve(&model(None), 2000, 7);
        assert_eq!(a, resolve(&model(None), 2000, 7));
        assert_ne!(a, resolve(&model(None), 2000, 8));
        assert!(a.count() > 2000, "users return: {}", a.count());
    }

    #[test]
    fn windows_of_a_user_are_ordered_disjoint_and_within_the_day() {
        let s = resolve(&model(None), 2000, 3);
        for u in 0..2000 {
            let w = s.of(u);
            for pair in w.windows(2) {
                assert!(pair[0][1] <= pair[1][0], "user {u}: {w:?}");
            }
            for &[a, b] in w {
                assert!(a < b && a < 600_000, "user {u}: {w:?}");
            }
        }
    }

    #[test]
    fn logins_and_users_online_follow_the_daily_curve() {
        let s = resolve(&model(None), 20_000, 11);
        let mut hours = [0u32; 24];
        for u in 0..20_000 {
            for &[at, _] in s.of(u).iter().filter(|w| w[0] > 0) {
                hours[(at / 25_000) as usize] += 1;
            }
        }
        // 04:00 is a tenth of 21:00 on the curve: returns come far more often at 21:00.
        let (night, evening) = (f64::from(hours[4]), f64::from(hours[20]));
        assert!(evening > 3.0 * night, "logins by hour {hours:?}");
        let (at4, at21) = (s.online_at(4 * 25_000 + 12_500), s.online_at(21 * 25_000));
        assert!(at21 > 2 * at4, "online at 04:30 {at4}, at 21:00 {at21}");
        // A warm start: users are online when the day begins.
        assert!(s.online_at(0) > 1000, "{}", s.online_at(0));
        let flat = SessionModel {
            curve: vec![1.0, 1.0],
            ..model(None)
        };
        let s = resolve(&flat, 20_000, 11);
        let (a, b) = (s.online_at(150_000), s.online_at(450_000));
        assert!(
            a.abs_diff(b) * 10 < a,
            "a flat day holds steady: {a} vs {b}"
        );
    }

    #[test]
    fn no_more_users_are_online_than_the_cap() {
        let s = resolve(&model(Some(100)), 3000, 5);
        let uncapped = resolve(&model(None), 3000, 5);
        let peak = |s: &Sessions| {
            (0..600)
                .map(|sec| s.online_at(sec * 1000))
                .max()
                .unwrap_or(0)
        };
        assert!(
            peak(&uncapped) > 100,
            "the cap must bind: {}",
            peak(&uncapped)
        );
        assert!(peak(&s) <= 100, "{}", peak(&s));
    }

    #[test]
    fn lognormal_session_lengths_have_the_asked_median() {
        let s = resolve(&model(None), 20_000, 9);
        let mut l: Vec<u32> = s.lengths().filter(|&l| l > 0).collect();
        l.sort_unstable();
        let median = l[l.len() / 2];
        // Sessions cut by the day's end pull it down a little.
        assert!((17_000..22_000).contains(&median), "median {median} ms");
    }
}
