//! The proof of the shape against `msgstorm serve`: a compressed day of 1,000 users with a
//! deploy-style reconnect storm (every connection cut at once) keeps an exact ledger, the
//! logins follow the plan second by second, and the activity exponent fitted back from
//! the planned sends is the one asked for.

use msgstorm::metrics::Counter;

use crate::common::run::{run_text, scenario, Work};
use crate::common::{config, start};

/// `DAY` grown to 1,000 users over a 20 s day (the built-in daily curve), 40 groups of 3
/// to 80, 200 messages/s to contacts (activity 1.0, the default) and a mix of body sizes,
/// with a cut of every connection at 10 s.
fn storm_day() -> String {
    let mut day = super::DAY.to_owned();
    for (from, to) in [
        ("users = 240", "users = 1000"),
        ("day = \"12s\"", "day = \"20s\""),
        ("lognormal = \"2s\"", "lognormal = \"3s\""),
        ("exponential = \"2s\"", "exponential = \"3s\""),
        ("count = 20", "count = 40"),
        ("max = 60", "max = 80"),
        ("\nrate = 60", "\nrate = 200"),
        (
            "size = 120",
            "size = { mix = [[100, 0.8], [1000, 0.15], [5000, 0.05]] }",
        ),
    ] {
        assert!(day.contains(from), "DAY has `{from}`");
        day = day.replace(from, to);
    }
    day + "\n[[chaos]]\naction = \"cut\"\nat = \"10s\"\nfraction = 1.0\n"
}

/// The share of the sends the top `f` of `n` users make when the k-th most active sends
/// ∝ k^−s.
fn zipf_top_share(s: f64, n: usize, f: f64) -> f64 {
    let w = |k: usize| (k as f64).powf(-s);
    let top = ((n as f64 * f).ceil() as usize).max(1);
    (1..=top).map(w).sum::<f64>() / (1..=n).map(w).sum::<f64>()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_with_a_reconnect_storm_keeps_an_exact_ledger_and_the_asked_shape() {
    let server = start(config()).await;
    let work = Work::new();
    let (ran, a) = run_text(
        &work,
        &scenario(
            "name = \"storm\"\nseed = 37\ndrain = \"5s\"",
            &server,
            &storm_day(),
        ),
    )
    .await;
    ran.expect_code(0);

    // The storm: every connection open at 10 s cut, all of them back.
    let step = &a.chaos[0];
    let (cut, open) = step.cut.expect("the cut's count");
    assert!(cut == open && cut > 300, "{step:?}");
    assert!(step.back_after_s.is_some(), "{step:?}");

    // Exact ledger through the login wave, the returns and the storm.
    let d = a.ledger.summary();
    assert_eq!((d.lost, d.duplicated, d.corrupted), (0, 0, 0), "{d:?}");
    // A send whose acceptance the cut cut off counts as refused (expected nowhere), yet
    // the server may have stored it: then it arrives too, and counts in both.
    assert!(
        d.delivered >= d.expected && d.delivered <= d.expected + d.refused,
        "{d:?}"
    );
    assert!(
        d.via_sync > 500,
        "returns and the storm's reconnects catch up: {d:?}"
    );

    // Logins follow the plan: per 2 s of the day, the logins that succeeded are the
    // logins planned within 15% (+ 10), the storm's reconnects aside (the 2 s holding its
    // cut and the next are left out, as are the first, where the users online at the
    // start log in). The run counts logins per second of the run, which need not begin on
    // a second of the day: each second is compared with the logins planned within it.
    let o = a.population.as_ref().expect("the offered shape");
    let start = a.traffic_started_s.expect("traffic start");
    let bucket_s = o.day_ms as f64 / 1000.0 / o.logins.len() as f64;
    let planned_within = |from: f64, to: f64| -> f64 {
        let overlap = |b: usize| {
            let (b0, b1) = (b as f64 * bucket_s, (b + 1) as f64 * bucket_s);
            (to.min(b1) - from.max(b0)).max(0.0) / bucket_s
        };
        (0..o.logins.len())
            .map(|b| o.logins[b] as f64 * overlap(b))
            .sum()
    };
    // The 2 s a second of the run (from `from` s after traffic start) counts in.
    let two_s = |from: f64| ((from + 0.5) / 2.0).floor();
    let (mut planned, mut actual) = ([0f64; 10], [0f64; 10]);
    for s in a.metrics.seconds() {
        let from = f64::from(s.sec) - start;
        let k = two_s(from);
        if (0.0..10.0).contains(&k) {
            planned[k as usize] += planned_within(from, from + 1.0);
            actual[k as usize] += s.count(Counter::LoginOk) as f64;
        }
    }
    let storm = two_s((start + 10.0).floor() - start);
    for k in (1..10).filter(|&k| k as f64 != storm && k as f64 != storm + 1.0) {
        let (p, got) = (planned[k], actual[k]);
        assert!(
            (got - p).abs() <= 0.15 * p + 10.0,
            "logins in {}..{} s: planned {p}, got {got}\nplanned {planned:?}\nactual {actual:?}",
            2 * k,
            2 * k + 2
        );
    }

    // The activity exponent fitted back from the planned sends' top shares (0.1% … 20%
    // of the users: the heavy senders, where counts are large) is 1.0 within 0.2.
    let n = 1000;
    let err = |s: f64| -> f64 {
        o.top_shares
            .iter()
            .filter(|&&[f, _]| f <= 0.2)
            .map(|&[f, share]| (zipf_top_share(s, n, f).ln() - share.ln()).powi(2))
            .sum()
    };
    let fitted = (0..=300)
        .map(|i| f64::from(i) / 100.0)
        .min_by(|a, b| err(*a).total_cmp(&err(*b)))
        .unwrap_or(0.0);
    assert!(
        (fitted - 1.0).abs() <= 0.2,
        "fitted activity {fitted}: {:?}",
        o.top_shares
    );
    // The run made due exactly the sends the offered shape counts.
    assert_eq!(o.chat_sends + o.group_sends, a.metrics.count(Counter::Due));
}
