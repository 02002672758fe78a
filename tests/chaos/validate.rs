//! `[[chaos]]` mistakes are found before anything connects, at `FILE:LINE: chaos[i].KEY`,
//! exit code 2.

use crate::common::run::{msgstorm, Work};

/// A scenario with 6 s of traffic, then `chaos` (and, above the traffic, `target`).
fn scenario(target: &str, chaos: &str) -> String {
    format!(
        "name = \"v\"\n{target}\n[population]\nusers = 4\n\n[[traffic]]\nname = \"chat\"\n\
         kind = \"direct\"\nsenders = 2\nreceivers = 2\nrate = 10\nduration = \"6s\"\n\n{chaos}"
    )
}

/// `msgstorm validate` of `text`: its one-line error (exit 2).
async fn refused(text: &str) -> String {
    let work = Work::new();
    let file = work.write("s.toml", text);
    let ran = msgstorm(&["validate", &file.display().to_string()]).await;
    ran.expect_code(2);
    ran.stderr.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn chaos_mistakes_name_the_step_and_key_at_their_line() {
    let cases: [(&str, &str, &str); 9] = [
        (
            "",
            "[monitor]\nnames = [\"mosquitto\"]\n\n[[chaos]]\naction = \"kill\"\nmonitor = \"redis\"\nat = \"1s\"\n",
            "chaos[0].monitor: \"redis\" is none of `[monitor]`'s entries (names [\"mosquitto\"], pids [])",
        ),
        (
            "",
            "[[chaos]]\naction = \"explode\"\nat = \"1s\"\n",
            "s.toml:15: chaos[0].action: unknown action `explode`",
        ),
        (
            "",
            "[[chaos]]\naction = \"restart\"\npid = 1\nat = \"1s\"\n",
            "chaos[0].start: action `restart` needs `start`",
        ),
        (
            "",
            "[[chaos]]\naction = \"kill\"\nprocess = \"msgstorm\"\nat = \"1s\"\n",
            "s.toml:16: chaos[0].process: msgstorm's own processes",
        ),
        (
            "",
            "[[chaos]]\naction = \"delay\"\ndelay = \"50ms\"\nat = \"5s\"\nduration = \"2s\"\n",
            "s.toml:17: chaos[0].at: the step (5s to 7s after traffic starts) ends after the traffic (6s)",
        ),
        (
            "[target]\ndriver = \"loopback\"\n",
            "[[chaos]]\naction = \"cut\"\nfraction = 0.5\nat = \"1s\"\n",
            "chaos[0].action: action `cut` acts on the users' TCP connections, and this driver has none",
        ),
        (
            "",
            "[[chaos]]\naction = \"delay\"\ndelay = \"50ms\"\nat = \"1s\"\nduration = \"2s\"\n\n\
             [[chaos]]\naction = \"blackhole\"\nat = \"2s\"\nduration = \"1s\"\n",
            "chaos[1].at: overlaps chaos[0] (1s to 3s): network steps take turns",
        ),
        (
            "",
            "[[chaos]]\naction = \"cut\"\nfraction = 0.5\nat = \"1s\"\nduration = \"2s\"\n",
            "chaos[0].duration: action `cut` does not take `duration` (it takes fraction)",
        ),
        (
            "",
            "[[chaos]]\naction = \"bandwidth\"\nbandwidth = \"fast\"\nat = \"1s\"\nduration = \"1s\"\n",
            "chaos[0].bandwidth: `fast` is not a bandwidth",
        ),
    ];
    for (target, chaos, want) in cases {
        let line = refused(&scenario(target, chaos)).await;
        assert!(line.contains(want), "want `{want}` in: {line}");
    }
}

#[tokio::test]
async fn a_step_at_a_seeded_time_inside_its_window_validates() {
    let work = Work::new();
    let text = scenario(
        "",
        "[[chaos]]\naction = \"loss\"\nfraction = 0.05\nwindow = [\"1s\", \"5s\"]\nduration = \"1s\"\n",
    );
    let file = work.write("s.toml", &text);
    let ran = msgstorm(&["validate", &file.display().to_string()]).await;
    ran.expect_code(0);
}

/// A process that does not exist stops `msgstorm run` before anything connects, naming the
/// key at its line (`validate` cannot know the host the run will be on).
#[tokio::test]
async fn a_missing_process_stops_the_run_before_it_connects() {
    let work = Work::new();
    let text = scenario(
        "[target]\nurl = \"ws://127.0.0.1:1/ws\"\n",
        "[[chaos]]\naction = \"kill\"\nprocess = \"no-such-process-here\"\nat = \"1s\"\n",
    );
    let file = work.write("s.toml", &text);
    let file = file.display().to_string();
    msgstorm(&["validate", &file]).await.expect_code(0);
    let ran = msgstorm(&["run", &file, "-q"]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains(
            "s.toml:18: chaos[0].process: no process named `no-such-process-here` on this host"
        ),
        "before the unreachable target is even tried\n{ran}"
    );
}
