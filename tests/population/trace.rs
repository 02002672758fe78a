//! `kind = "trace"` against `msgstorm serve`: a recorded day replayed faster, each message
//! verified; a malformed line stops the run before it connects, naming its file and line.

use msgstorm::metrics::Counter;

use crate::common::run::{msgstorm, run_file, scenario, Work};
use crate::common::{config, start};

/// A trace of 40 users: each sends to the next one every second of 6 s, and users 0..8
/// talk in one group every 2 s (JSON lines would do the same).
fn trace() -> String {
    let mut out = String::from("time,from,to,size\n");
    for s in 0..6 {
        for u in 0..40 {
            let t = f64::from(s) + f64::from(u) / 40.0;
            out.push_str(&format!("{t:.3},user{u},user{},{}\n", (u + 1) % 40, 60 + u));
        }
        if s % 2 == 0 {
            for u in 0..8 {
                out.push_str(&format!("{}.5,user{u},group:team\n", s));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_trace_delivers_each_recorded_message_exactly_once() {
    let server = start(config()).await;
    let work = Work::new();
    work.write("day.csv", &trace());
    let body = "[population]\nusers = 50\n\n[[traffic]]\nkind = \"trace\"\nfile = \"day.csv\"\nspeed = 3\n";
    let file = work.write(
        "s.toml",
        &scenario("name = \"trace\"\nseed = 1\ndrain = \"3s\"", &server, body),
    );
    let (ran, a) = run_file(&file, &work.path("out"), &[]).await;
    ran.expect_code(0);
    let d = a.ledger.summary();
    // 240 direct messages; 24 group messages, each to the 7 other members.
    assert_eq!(a.metrics.count(Counter::Sent), 240 + 24, "{ran}");
    assert_eq!(
        (d.expected, d.delivered),
        (240 + 24 * 7, 240 + 24 * 7),
        "{d:?}"
    );
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
}

#[tokio::test]
async fn a_malformed_trace_line_stops_the_run_naming_file_and_line() {
    let work = Work::new();
    work.write("bad.csv", "0,a,b\n0.5,a,b,many\n");
    let file = work.write(
        "s.toml",
        "[population]\nusers = 5\n\n[[traffic]]\nkind = \"trace\"\nfile = \"bad.csv\"\n",
    );
    let ran = msgstorm(&["validate", file.to_str().expect("utf-8")]).await;
    ran.expect_code(2);
    let first = ran.stderr.lines().next().unwrap_or_default();
    assert!(
        first.contains("bad.csv:2: traffic[0].file: size `many` is not a number of bytes"),
        "{ran}"
    );
}
