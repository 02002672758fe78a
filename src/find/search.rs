//! The search of `msgstorm find`: a geometric climb from `from` (doubling) until a step
//! fails or `to` passes, then a bisection between the highest passing and the lowest
//! failing value until they are within the precision. Pure: it proposes values and is told
//! whether each passed.

pub use crate::vocab::Precision;

/// The state of one search.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    from: f64,
    to: f64,
    integer: bool,
    precision: Precision,
    pass: Option<f64>,
    fail: Option<f64>,
}

/// Each climbing step multiplies the value by this.
pub const CLIMB: f64 = 2.0;

impl Search {
    /// A search from `from` up to `to` (`0 < from < to`); `integer` keeps every value whole.
    pub fn new(from: f64, to: f64, integer: bool, precision: Precision) -> Search {
        Search {
            from,
            to,
            integer,
            precision,
            pass: None,
            fail: None,
        }
    }

    /// The next value to try, `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        match (self.pass, self.fail) {
            (None, None) => Some(self.from),
            (None, Some(_)) => None,
            (Some(p), None) if p >= self.to => None,
            (Some(p), None) => {
                let up = self.round((p * CLIMB).min(self.to));
                (up > p).then_some(up)
            }
            (Some(p), Some(f)) => {
                if f - p <= self.gap(p) {
                    return None;
                }
                let mid = self.round((p + f) / 2.0);
                (mid > p && mid < f).then_some(mid)
            }
        }
    }

    /// Records whether the step at `value` passed.
    pub fn record(&mut self, value: f64, passed: bool) {
        if passed {
            self.pass = Some(self.pass.map_or(value, |p| p.max(value)));
        } else {
            self.fail = Some(self.fail.map_or(value, |f| f.min(value)));
        }
    }

    /// The highest value that passed.
    pub fn highest_pass(&self) -> Option<f64> {
        self.pass
    }

    /// The lowest value that failed.
    pub fn first_fail(&self) -> Option<f64> {
        self.fail
    }

    /// How close a highest pass of `pass` and a first fail must come (at least 1 for a
    /// whole-number search).
    pub fn gap(&self, pass: f64) -> f64 {
        let gap = self.precision.gap(pass);
        if self.integer {
            gap.max(1.0)
        } else {
            gap
        }
    }

    fn round(&self, v: f64) -> f64 {
        if self.integer {
            v.floor()
        } else {
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search in which every value up to `capacity` passes; returns the values tried.
    fn run(mut s: Search, capacity: f64) -> (Vec<f64>, Search) {
        let mut tried = Vec::new();
        while let Some(v) = s.next() {
            assert!(tried.len() < 64, "the search does not end: {tried:?}");
            tried.push(v);
            s.record(v, v <= capacity);
        }
        (tried, s)
    }

    #[test]
    fn climbs_then_bisects_to_the_precision() {
        let s = Search::new(100.0, 100_000.0, true, Precision::Absolute(10.0));
        let (tried, s) = run(s, 1234.0);
        assert_eq!(&tried[..5], &[100.0, 200.0, 400.0, 800.0, 1600.0]);
        let (p, f) = (s.highest_pass().unwrap(), s.first_fail().unwrap());
        assert!(p <= 1234.0 && f > 1234.0 && f - p <= 10.0, "{tried:?}");
    }

    #[test]
    fn integer_search_ends_next_to_the_capacity() {
        let s = Search::new(2.0, 64.0, true, Precision::Relative(0.01));
        let (_, s) = run(s, 5.0);
        assert_eq!((s.highest_pass(), s.first_fail()), (Some(5.0), Some(6.0)));
    }

    #[test]
    fn a_relative_precision_bisects_within_its_share_of_the_value() {
        let s = Search::new(1.0, 1e6, false, Precision::Relative(0.05));
        let (_, s) = run(s, 333.3);
        let (p, f) = (s.highest_pass().unwrap(), s.first_fail().unwrap());
        assert!(p <= 333.3 && f > 333.3 && f - p <= 0.05 * p);
    }

    #[test]
    fn first_step_failing_ends_the_search() {
        let (tried, s) = run(
            Search::new(10.0, 100.0, true, Precision::Absolute(1.0)),
            5.0,
        );
        assert_eq!(tried, [10.0]);
        assert_eq!(s.highest_pass(), None);
    }

    #[test]
    fn the_climb_stops_at_the_upper_bound() {
        let (tried, s) = run(Search::new(10.0, 50.0, true, Precision::Absolute(1.0)), 1e9);
        assert_eq!(tried, [10.0, 20.0, 40.0, 50.0]);
        assert_eq!((s.highest_pass(), s.first_fail()), (Some(50.0), None));
    }

    #[test]
    fn precision_parses_both_forms() {
        assert_eq!(Precision::parse("5%"), Ok(Precision::Relative(0.05)));
        assert_eq!(Precision::parse("25"), Ok(Precision::Absolute(25.0)));
        assert!(Precision::parse("0").is_err());
        assert!(Precision::parse("-3%").is_err());
        assert!(Precision::parse("x").is_err());
    }
}
