//! What an adapter author gets besides the entry points: `vars` from the scenario, the URL
//! a user connected to, a per-user table kept across reconnects, `{}` as "nothing", history
//! that arrives unasked counted as pushes, and `fetch`'s `why` telling a returning user's
//! catch-up from the final verification; and a user's own upgrade path and query.

use super::native::{examples_of, scenario_with};
use msgstorm::metrics::Counter;

use crate::common::run::{msgstorm, run_text, target, Work};
use crate::common::{config, start};

/// The shipped adapter changed to report what it sees through script errors (the only
/// thing of a script's a run keeps): user 0's `vars` and URL at its first login, a
/// returning user's count of logins from `u.kept`, and user 1's `why` at the final
/// verification. Pongs are answered with `{}`, and user 2's pushes come as `item`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vars_url_kept_state_empty_lists_items_and_why_reach_the_script() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), |s| {
        s.replace(
            "  u.state.logged_in = true\n",
            "  u.state.logged_in = true\n  \
             u.kept.logins = (u.kept.logins or 0) + 1\n  \
             if u.ix == 0 and u.kept.logins == 1 then error('seen: vars ' .. vars.api .. ' ' .. \
             vars.rooms[2] .. ' url ' .. u.url, 0) end\n  \
             if u.kept.logins > 1 then error('seen: login ' .. u.kept.logins, 0) end\n",
        )
        .replace(
            "function fetch(u)\n",
            "function fetch(u, why)\n  \
             if u.ix == 1 and why == 'verify' then error('seen: why ' .. why, 0) end\n",
        )
        .replace(
            "    return { push = f.body, conv = f.conv, seq = f.seq, from = f.from }",
            "    if u.ix == 2 then return { item = f.body, conv = f.conv, seq = f.seq, from = f.from } end\n    \
             return { push = f.body, conv = f.conv, seq = f.seq, from = f.from }",
        )
        .replace("  elseif t == \"pong\" then\n    return nil", "  elseif t == \"pong\" then\n    return {}")
    })
    .replace(
        "[target.script]\n",
        "[target.script]\nvars = { api = \"/v1\", rooms = [\"lobby\", \"hall\"] }\n",
    )
    .replace("[target]\n", "[target]\nheartbeat = \"200ms\"\n")
    .replace(
        "login_rate = 500\n",
        "login_rate = 500\nchurn = { count = 3, offline_at = \"300ms\", back_at = \"700ms\" }\n",
    );
    let url = server.ws_url();
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    let seen = examples_of(&artifact, &["script"], &ran);
    for want in [
        format!("seen: vars /v1 hall url {url}"),
        "seen: login 2".to_owned(),
        "seen: why verify".to_owned(),
    ] {
        assert!(
            seen.iter().any(|e| e.ends_with(&want)),
            "{want} not among {seen:?}\n{ran}"
        );
    }
    assert!(
        seen.iter().all(|e| e.contains("seen: ")),
        "no other script error (`{{}}` is nothing, an item outside a fetch is a push): {seen:?}"
    );
    let d = artifact.ledger.summary();
    assert_eq!(
        d.lost, 0,
        "user 2's items were delivered as pushes: {d:?}\n{ran}"
    );
}

/// `upgrade(u)` gives each user its own upgrade path and query (OpenIM takes the user and
/// its token there): users sent to the server's path with their id in the query log in and
/// get their messages; the one sent elsewhere is refused at the upgrade (HTTP 404); and
/// `validate --frames` shows the first user's upgrade request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_gives_each_user_its_own_path_and_query() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), |s| {
        format!(
            "{s}\nfunction upgrade(u)\n  if u.ix == 3 then return '/elsewhere' end\n  \
             return '/ws?who=' .. u.id\nend\n"
        )
    });
    let (ran, artifact) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    let refused = examples_of(&artifact, &["http_status"], &ran);
    assert!(
        refused.iter().all(|e| e.contains("404")),
        "user 3 refused at its upgrade: {refused:?}\n{ran}"
    );
    let m = &artifact.metrics;
    assert_eq!(
        m.count(Counter::LoginOk),
        12,
        "the other 12 logged in\n{ran}"
    );
    assert!(
        artifact.ledger.summary().delivered >= 11 * 50,
        "their messages arrived\n{ran}"
    );
    let file = work.write("upgrade.toml", &text);
    let dry = msgstorm(&["validate", &file.display().to_string(), "--frames"]).await;
    dry.expect_code(0);
    assert!(
        dry.stdout
            .lines()
            .any(|l| l == "upgrade of u0: GET /ws?who=u0"),
        "{dry}"
    );
}
