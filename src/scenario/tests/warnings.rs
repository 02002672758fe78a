//! Scenarios that validate but cannot verify what they claim with their driver
//! are warned about (`warning: FILE:LINE: KEY: …`), never refused.

use super::*;

/// A target of `driver` at `url`, `options` in its table, and `population` and `traffic`.
fn scenario(driver: &str, url: &str, options: &str, population: &str, traffic: &str) -> String {
    format!(
        "[target]\ndriver = \"{driver}\"\nurl = \"{url}\"\n\n[target.{driver}]\n{options}\n\n\
         [target.auth]\nusername = \"{{user}}\"\npassword = \"pw\"\n\n\
         [population]\nusers = 40\nlogin_rate = 400\n{population}\n\n{traffic}"
    )
}

/// Group traffic: 2 senders a group, every 100 ms for 3 s (about 60 messages a group).
const ROOMS: &str = "[[traffic]]\nname = \"rooms\"\nkind = \"group\"\ngroups = 2\n\
                     group_size = 8\nsenders_per_group = 2\ninterval = \"100ms\"\nduration = \"3s\"\n";

fn warnings(text: &str) -> Vec<String> {
    plan(text, &[]).expect("valid").warnings
}

#[test]
fn socketio_late_and_churning_users_need_a_first_message() {
    let late = "late = { count = 3, at = \"2s\" }";
    let text = scenario("socketio", "ws://127.0.0.1:1", "", late, ROOMS);
    let w = warnings(&text);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("warning: t.toml:15: population.late: driver `socketio`"),
        "{w:?}"
    );
    assert!(w[0].contains("first message") && w[0].contains("resumes_without_offset"));
    let churn = "churn = { count = 3, offline_at = \"1s\", back_at = \"2s\" }";
    let w = warnings(&scenario("socketio", "ws://127.0.0.1:1", "", churn, ROOMS));
    assert!(w[0].contains("population.churn"), "{w:?}");
    // Nothing to warn about without late or churning users, nor when recovery is off
    // (late users are refused then).
    assert!(warnings(&scenario("socketio", "ws://127.0.0.1:1", "", "", ROOMS)).is_empty());
    let off = scenario(
        "socketio",
        "ws://127.0.0.1:1",
        "recovery = false",
        late,
        ROOMS,
    );
    assert!(plan(&off, &[]).is_err());
}

#[test]
fn xmpp_rooms_sending_more_than_their_history_while_members_are_away() {
    let churn = "churn = { count = 3, offline_at = \"1s\", back_at = \"2500ms\" }";
    // About 2 × 15 = 30 messages a room while churning users are away, history 20.
    let w = warnings(&scenario("xmpp", "xmpp://127.0.0.1:1", "", churn, ROOMS));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("warning: t.toml:15: population.churn: traffic `rooms` sends about ")
            && w[0].contains("only the last 20"),
        "{w:?}"
    );
    let n: u64 = w[0]
        .split("sends about ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a number");
    assert!((28..=32).contains(&n), "{n}: {w:?}");
    // Enough history: no warning; no history at all: any room message while away warns.
    let more = scenario(
        "xmpp",
        "xmpp://127.0.0.1:1",
        "muc_history = 100",
        churn,
        ROOMS,
    );
    assert!(warnings(&more).is_empty());
    // Late users in at 200 ms miss about 4 messages a room: within a history of 20, not 0.
    let late = "late = { count = 3, at = \"200ms\" }";
    assert!(warnings(&scenario("xmpp", "xmpp://127.0.0.1:1", "", late, ROOMS)).is_empty());
    let none = scenario("xmpp", "xmpp://127.0.0.1:1", "muc_history = 0", late, ROOMS);
    let w = warnings(&none);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("population.late: traffic `rooms` sends about 4 messages")
            && w[0].contains("late users are away (until 200ms)"),
        "{w:?}"
    );
    // Drivers that keep every group message for a member that is away: nothing to say.
    let mqtt = scenario("mqtt", "mqtt://127.0.0.1:1", "", churn, ROOMS).replace(
        "[target.auth]\nusername = \"{user}\"\npassword = \"pw\"\n",
        "",
    );
    assert!(warnings(&mqtt).is_empty());
}
