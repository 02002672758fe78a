//! The driver conformance suite: the same nine cases for every driver, each run through the
//! `msgstorm` binary against the driver's real peer.
//!
//! | case | what the peer does | what the run must report |
//! |---|---|---|
//! | `login_ok` | accepts every user | every user logged in once, no error, exit 0 |
//! | `login_refused` | refuses the credentials | every attempt `auth_failed`, nothing else, no login |
//! | `direct` | relays direct messages | each delivered once: the exact expected count, nothing lost |
//! | `group` | relays group messages | the same for groups |
//! | `late_fetch` | stores what a late user missed | all of it fetched after the login (`via_sync`) |
//! | `dup_fetch` | stores some messages twice for the late user | `duplicated` = the copies the peer made; exit 1 on `checks.max_duplicated` |
//! | `server_close` | closes every connection mid-traffic | one `closed_by_peer` per connection, nothing else |
//! | `garbage` | sends bytes its protocol does not allow | one `protocol` error per garbage frame, nothing else |
//! | `unreachable` | is not there | exit 3, one line naming the target |
//!
//! A driver is one line of the table at the bottom: its module name, its [`Peer`] (how to
//! start the real peer, its `[target]`, how to make it refuse, duplicate or send garbage)
//! and one column per case: `(run)`, or why the case does not apply — `(na Lack)`, a test
//! that passes only while the driver's `Spec` (or its validation) really lacks what the
//! case needs, or `(ignore "why")` for a case the driver has but its peer cannot be made
//! to show. A missing column does not compile. A server close and garbage come from a
//! [`WireProxy`] in front of the peer unless the peer makes them itself.
//!
//! Adding a driver: its [`Peer`] in `peers/` (reusing the fixture of `tests/common/` that
//! starts its peer) and its line in the table.

mod peers;

use std::collections::BTreeMap;

use msgstorm::artifact::Artifact;
use msgstorm::driver::Spec;
use msgstorm::ledger::Delivery;
use msgstorm::metrics::Counter;

use crate::common::peers::free_port;
use crate::common::proxy::{Garbage, WireProxy};
use crate::common::run::{msgstorm, run_text, Ran, Running, Work};

/// What a case asks of the peer when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// A well-behaved peer.
    Plain,
    /// It refuses the users' credentials.
    Refusing,
    /// It stores some messages for offline users twice.
    Duplicating,
    /// It sends garbage (when it can by itself; else the proxy does).
    Garbage,
}

/// How a driver's traffic is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Chat traffic: `direct`, `group` and `idle` between users.
    Chat,
    /// Echo round trips (`kind = "echo"`): each user's messages come back to it.
    Echo,
}

/// A driver's real peer, and how to make it show each case.
pub trait Peer: Sized {
    /// The driver's name in `[target] driver`.
    const DRIVER: &'static str;
    /// How its traffic is written.
    const STYLE: Style = Style::Chat;
    /// When late users log in: long after what was sent to them is stored.
    const LATE_AT: &'static str = "1500ms";
    /// The scenario's drain (it ends as soon as everything is in).
    const DRAIN: &'static str = "2s";
    /// The garbage the proxy sends this driver's users (`None`: the peer sends its own
    /// under [`Setup::Garbage`], counted by [`Peer::made`]).
    const GARBAGE: Option<Garbage>;

    /// Starts a peer for `setup`.
    async fn start(setup: Setup) -> Self;

    /// Where the driver connects (`HOST:PORT` in it is what a proxy stands in for).
    fn url(&self) -> String;

    /// The `[target]` tables (and the driver's own) aimed at `url`; under
    /// [`Setup::Refusing`] with credentials the peer refuses.
    fn target(&self, url: &str, setup: Setup) -> String;

    /// Called with the scenario before a run under [`Setup::Duplicating`]: a peer whose
    /// second copies come from a client of the test's own starts it here.
    fn before(&mut self, _setup: Setup, _scenario: &str) {}

    /// After the run: how many second copies (or garbage frames) the peer made.
    async fn made(&mut self, setup: Setup) -> u64;
}

/// Why a case does not apply to a driver; each is checked against the driver itself.
#[derive(Debug, Clone, Copy)]
pub enum Lack {
    /// No login: the driver takes no `[target.auth]`.
    NoLogin,
    /// No groups: the driver refuses `kind = "group"`.
    NoGroups,
    /// It cannot fetch what a user missed: late users are refused.
    NoFetch,
    /// It runs in this process: no peer to close, garble or miss.
    InProcess,
}

impl Lack {
    /// Asserts that `spec`'s driver lacks this.
    async fn check(self, spec: &Spec, style: Style) {
        let name = spec.name;
        match self {
            Lack::NoLogin => assert!(spec.auth.is_empty(), "{name} takes credentials"),
            Lack::NoGroups => {
                let ran = validate(name, GROUP).await;
                ran.expect_code(2);
                assert!(
                    ran.stderr.contains("traffic[0].kind: kind `group`")
                        && ran.stderr.contains(&format!("driver `{name}`")),
                    "{ran}"
                );
            }
            Lack::NoFetch => {
                assert!(!spec.caps.fetch_missed, "{name} fetches missed messages");
                let ran = validate(name, &late(style, "1s")).await;
                ran.expect_code(2);
                assert!(
                    ran.stderr.contains("population.late")
                        && ran.stderr.contains(&format!("driver `{name}`")),
                    "{ran}"
                );
            }
            Lack::InProcess => {
                assert!(spec.schemes.is_empty(), "{name} connects to URLs");
                assert!(spec.embedded_path.is_none(), "{name} has an embedded peer");
            }
        }
    }
}

/// `msgstorm validate` of `body` for `driver` with no URL.
async fn validate(driver: &str, body: &str) -> Ran {
    let work = Work::new();
    let text = format!("[target]\ndriver = \"{driver}\"\n\n{body}");
    let file = work.write("na.toml", &text);
    msgstorm(&["validate", &file.display().to_string()]).await
}

/// The driver `P` speaks.
fn spec<P: Peer>() -> &'static Spec {
    msgstorm::driver::spec(P::DRIVER).expect("a built-in driver")
}

/// The case's not-applicable check: `lack` holds for `P`'s driver.
pub async fn not_applicable<P: Peer>(lack: Lack) {
    lack.check(spec::<P>(), P::STYLE).await;
}

/// Users of the small runs.
const USERS: u64 = 4;

/// Every user logs in and idles.
const IDLE: &str = r#"
[population]
users = 4
login_rate = 400

[[traffic]]
kind = "idle"
duration = "300ms"
"#;

/// Two senders, two receivers, five messages from each sender to each: 20 deliveries.
const DIRECT: &str = r#"
[population]
users = 4
login_rate = 400

[[traffic]]
kind = "direct"
senders = 2
receivers = 2
messages = 5
interval = "20ms"
"#;

/// Two groups of three, one sender each, five messages: 20 deliveries.
const GROUP: &str = r#"
[population]
users = 6
login_rate = 400

[[traffic]]
kind = "group"
groups = 2
group_size = 3
senders_per_group = 1
messages = 5
interval = "20ms"
"#;

/// Echo round trips of four connections for `duration`.
fn echo(duration: &str) -> String {
    format!(
        "[population]\nusers = 4\nlogin_rate = 400\n\n[[traffic]]\nkind = \"echo\"\n\
         connections = 4\nrate = 100\nduration = \"{duration}\"\n"
    )
}

/// Late receivers of a late run.
const LATE_USERS: u64 = 3;
/// Messages to each late receiver.
const LATE_MESSAGES: u64 = 5;

/// One sender on time; the other users log in at `at`, after everything was sent to them.
fn late(style: Style, at: &str) -> String {
    let traffic = match style {
        Style::Chat => format!(
            "kind = \"direct\"\nsenders = 1\nreceivers = {LATE_USERS}\n\
             messages = {LATE_MESSAGES}\ninterval = \"20ms\""
        ),
        Style::Echo => "kind = \"echo\"\nconnections = 1\nrate = 10\nduration = \"1s\"".to_owned(),
    };
    format!(
        "[population]\nusers = {}\nlate = {{ count = {LATE_USERS}, at = \"{at}\" }}\n\n\
         [[traffic]]\n{traffic}\n",
        LATE_USERS + 1
    )
}

/// Traffic to every connection for two seconds: one group of all users, each sending
/// (what a client sends is masked or encrypted on some wires; what it receives is not).
const BUSY: &str = r#"
[population]
users = 4
login_rate = 400

[[traffic]]
kind = "group"
groups = 1
group_size = 4
senders_per_group = 4
duration = "2s"
interval = "50ms"
"#;

/// [`BUSY`] in `style`.
fn busy(style: Style) -> String {
    match style {
        Style::Chat => BUSY.to_owned(),
        Style::Echo => echo("2s"),
    }
}

/// The scenario text of `case` for `P` aimed at `url`.
fn scenario<P: Peer>(peer: &P, case: &str, url: &str, setup: Setup, body: &str) -> String {
    format!(
        "name = \"conformance-{}-{case}\"\nseed = 7\ndrain = \"{}\"\n\n{}\n{body}",
        P::DRIVER,
        P::DRAIN,
        peer.target(url, setup)
    )
}

/// Error counts by kind name.
fn errors(a: &Artifact) -> BTreeMap<&'static str, u64> {
    a.metrics.errors().map(|(k, n, _)| (k.name(), n)).collect()
}

/// Runs `body` for `case` against a fresh peer started for `setup`.
async fn run<P: Peer>(case: &str, setup: Setup, body: &str) -> (Ran, Artifact, Delivery, u64) {
    let mut peer = P::start(setup).await;
    let text = scenario(&peer, case, &peer.url(), setup, body);
    peer.before(setup, &text);
    let (ran, a) = run_text(&Work::new(), &text).await;
    let made = peer.made(setup).await;
    let d = a.ledger.summary();
    (ran, a, d, made)
}

/// Every user logs in once; nothing fails.
pub async fn login_ok<P: Peer>() {
    let body = match P::STYLE {
        Style::Chat => IDLE.to_owned(),
        Style::Echo => echo("300ms"),
    };
    let (ran, a, _, _) = run::<P>("login-ok", Setup::Plain, &body).await;
    ran.expect_code(0);
    assert_eq!(a.metrics.count(Counter::LoginOk), USERS, "{ran}");
    assert_eq!(errors(&a), BTreeMap::new(), "{ran}");
}

/// Every attempt is refused and counted `auth_failed`, and nothing else.
pub async fn login_refused<P: Peer>() {
    let (ran, a, _, _) = run::<P>("login-refused", Setup::Refusing, IDLE).await;
    let attempts = a.metrics.count(Counter::ConnectAttempts);
    assert!(attempts >= USERS, "{attempts} attempts\n{ran}");
    assert_eq!(a.metrics.count(Counter::LoginOk), 0, "{ran}");
    assert_eq!(
        errors(&a),
        BTreeMap::from([("auth_failed", attempts)]),
        "{ran}"
    );
    ran.expect_code(1);
    assert!(
        ran.verdict().contains("run.logins") && ran.verdict().contains("auth_failed"),
        "{ran}"
    );
}

/// The exact ledger of a clean run: `expected` deliveries, each once.
#[track_caller]
fn clean(d: &Delivery, expected: u64, ran: &Ran) {
    assert_eq!(d.expected, expected, "{d:?}\n{ran}");
    assert_eq!(d.delivered, expected, "{d:?}\n{ran}");
    assert_eq!(
        (d.lost, d.duplicated, d.reordered, d.corrupted, d.damaged),
        (0, 0, 0, 0, 0),
        "{d:?}\n{ran}"
    );
}

/// Direct messages (echo round trips) arrive once each.
pub async fn direct<P: Peer>() {
    let body = match P::STYLE {
        Style::Chat => DIRECT.to_owned(),
        Style::Echo => echo("500ms"),
    };
    let (ran, a, d, _) = run::<P>("direct", Setup::Plain, &body).await;
    ran.expect_code(0);
    let expected = match P::STYLE {
        Style::Chat => 20,
        Style::Echo => a.metrics.count(Counter::Sent),
    };
    assert!(expected > 0, "{ran}");
    clean(&d, expected, &ran);
    assert_eq!(d.via_push, expected, "all of it live: {d:?}");
    assert_eq!(errors(&a), BTreeMap::new(), "{ran}");
}

/// Group messages arrive once at each other member.
pub async fn group<P: Peer>() {
    let (ran, a, d, _) = run::<P>("group", Setup::Plain, GROUP).await;
    ran.expect_code(0);
    clean(&d, 20, &ran);
    assert_eq!(d.via_push, 20, "all of it live: {d:?}");
    assert_eq!(errors(&a), BTreeMap::new(), "{ran}");
}

/// Late users fetch everything sent to them while away.
pub async fn late_fetch<P: Peer>() {
    let (ran, a, d, _) = run::<P>("late", Setup::Plain, &late(P::STYLE, P::LATE_AT)).await;
    ran.expect_code(0);
    clean(&d, LATE_USERS * LATE_MESSAGES, &ran);
    assert_eq!(d.via_sync, d.expected, "all of it fetched: {d:?}");
    assert_eq!(errors(&a), BTreeMap::new(), "{ran}");
}

/// Second copies the peer stored for late users, fetched after their login, are
/// duplicated: exactly as many as the peer made.
pub async fn dup_fetch<P: Peer>() {
    let body = late(P::STYLE, P::LATE_AT);
    let (ran, a, d, made) = run::<P>("dup", Setup::Duplicating, &body).await;
    // A second copy breaks the promise of exactly once, where the protocol makes it (not
    // MQTT QoS 1, at least once): the built-in check fails the run.
    if a.unpromised
        .contains(&msgstorm::artifact::CheckMetric::Duplicated)
    {
        ran.expect_code(0);
    } else {
        ran.expect_code(1);
        assert!(
            ran.verdict().starts_with("FAIL: checks.max_duplicated: "),
            "{ran}"
        );
    }
    assert!(made > 0, "the peer made no second copy\n{ran}");
    let expected = LATE_USERS * LATE_MESSAGES;
    assert_eq!(
        (d.expected, d.delivered, d.lost),
        (expected, expected, 0),
        "{d:?}"
    );
    assert_eq!(d.via_sync, d.expected, "all of it fetched: {d:?}");
    assert_eq!(d.duplicated, made, "{d:?}\n{ran}");
}

/// The `HOST:PORT` of a URL.
fn host_port(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The server closes every connection in the middle of the traffic: each costs one
/// `closed_by_peer`, and nothing else is counted.
pub async fn server_close<P: Peer>() {
    let peer = P::start(Setup::Plain).await;
    let url = peer.url();
    let proxy = WireProxy::start(host_port(&url), None);
    let text = scenario(
        &peer,
        "close",
        &proxy.url(&url, host_port(&url)),
        Setup::Plain,
        &busy(P::STYLE),
    );
    let work = Work::new();
    let file = work.write("close.toml", &text);
    let out = work.path("out");
    let (file, out_arg) = (file.display().to_string(), out.display().to_string());
    let run = Running::start(&["run", &file, "--out", &out_arg, "-q"]);
    let users = usize::try_from(USERS).expect("few");
    let proxy = tokio::task::spawn_blocking(move || {
        proxy.wait_traffic(users);
        proxy
    })
    .await
    .expect("the proxy's wait");
    let closed = proxy.close_all() as u64;
    let ran = run.finish().await;
    let a = Artifact::read(&out.join("result.json"))
        .unwrap_or_else(|e| panic!("no result.json: {e}\n{ran}"));
    assert_eq!(closed, USERS, "{ran}");
    assert_eq!(
        errors(&a),
        BTreeMap::from([("closed_by_peer", closed)]),
        "{ran}"
    );
    assert_eq!(a.metrics.count(Counter::Disconnects), closed, "{ran}");
    drop(peer);
}

/// Connections that get garbage from the proxy.
const GARBLED: usize = 2;

/// Garbage from the server is a protocol error, once per garbage frame, and nothing else.
pub async fn garbage<P: Peer>() {
    let mut peer = P::start(Setup::Garbage).await;
    let url = peer.url();
    let proxy = P::GARBAGE.map(|g| WireProxy::start(host_port(&url), Some((g, GARBLED))));
    let target = proxy
        .as_ref()
        .map_or_else(|| url.clone(), |p| p.url(&url, host_port(&url)));
    let body = match P::STYLE {
        Style::Chat => DIRECT.to_owned(),
        Style::Echo => echo("500ms"),
    };
    let text = scenario(&peer, "garbage", &target, Setup::Garbage, &body);
    let (ran, a) = run_text(&Work::new(), &text).await;
    let sent = match &proxy {
        Some(p) => {
            assert_eq!(p.injected(), GARBLED, "{ran}");
            GARBLED as u64
        }
        None => peer.made(Setup::Garbage).await,
    };
    assert!(sent > 0, "{ran}");
    assert_eq!(errors(&a), BTreeMap::from([("protocol", sent)]), "{ran}");
}

/// No peer at the URL: exit 3 at once, one line naming the target.
pub async fn unreachable<P: Peer>() {
    let peer = P::start(Setup::Plain).await;
    let url = peer.url();
    let dead = url.replacen(host_port(&url), &format!("127.0.0.1:{}", free_port()), 1);
    let body = match P::STYLE {
        Style::Chat => IDLE.to_owned(),
        Style::Echo => echo("300ms"),
    };
    let work = Work::new();
    let file = work.write(
        "dead.toml",
        &scenario(&peer, "unreachable", &dead, Setup::Plain, &body),
    );
    let ran = msgstorm(&["run", &file.display().to_string(), "-q"]).await;
    ran.expect_code(3);
    let lines: Vec<&str> = ran.stderr.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "{ran}");
    assert!(
        lines[0].starts_with(&format!("error: target unreachable: {dead}")),
        "{ran}"
    );
}

/// Generates one test per case for a driver from its row: `(run)` runs the case,
/// `(na Lack)` checks the driver lacks what it needs, `(ignore "why")` marks it ignored.
/// `$attr`s (a peer's `cfg_attr(not(peer_…), ignore = …)`) apply to the cases that run.
macro_rules! case {
    ($name:ident, $peer:ty, [$(#[$attr:meta])*], (run)) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn $name() {
            super::$name::<$peer>().await;
        }
    };
    ($name:ident, $peer:ty, [$(#[$attr:meta])*], (na $lack:ident)) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::not_applicable::<$peer>(super::Lack::$lack).await;
        }
    };
    ($name:ident, $peer:ty, [$(#[$attr:meta])*], (ignore $why:literal)) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = $why]
        async fn $name() {
            super::$name::<$peer>().await;
        }
    };
}

/// One driver's row: a module of nine tests named after the cases.
macro_rules! driver {
    ($(#[$cfg:meta])* $module:ident: $peer:ty, [$(#[$attr:meta])*],
     [$login:tt, $refused:tt, $direct:tt, $group:tt, $late:tt, $dup:tt, $close:tt,
      $garbage:tt, $unreachable:tt]) => {
        $(#[$cfg])*
        mod $module {
            case!(login_ok, $peer, [$(#[$attr])*], $login);
            case!(login_refused, $peer, [$(#[$attr])*], $refused);
            case!(direct, $peer, [$(#[$attr])*], $direct);
            case!(group, $peer, [$(#[$attr])*], $group);
            case!(late_fetch, $peer, [$(#[$attr])*], $late);
            case!(dup_fetch, $peer, [$(#[$attr])*], $dup);
            case!(server_close, $peer, [$(#[$attr])*], $close);
            case!(garbage, $peer, [$(#[$attr])*], $garbage);
            case!(unreachable, $peer, [$(#[$attr])*], $unreachable);
        }
    };
}

// One line per driver. Columns: login_ok, login_refused, direct, group, late_fetch,
// dup_fetch, server_close, garbage, unreachable.
driver!(native: super::peers::reference::Native, [], [(run), (run), (run), (run), (run), (run), (run), (run), (run)]);
driver!(echo: super::peers::reference::Echo, [], [(run), (na NoLogin), (run), (na NoGroups), (na NoFetch), (na NoFetch), (run), (run), (run)]);
driver!(#[cfg(feature = "mqtt")] mqtt: super::peers::mqtt::Mqtt, [#[cfg_attr(not(peer_mosquitto), ignore = "mosquitto is not installed (scripts/test installs it)")]], [(run), (run), (run), (run), (run), (run), (run), (run), (run)]);
driver!(loopback: super::peers::loopback::Loopback, [], [(run), (na NoLogin), (run), (run), (run), (run), (na InProcess), (na InProcess), (na InProcess)]);
driver!(#[cfg(feature = "xmpp")] xmpp: super::peers::xmpp::Prosody, [#[cfg_attr(not(peer_prosody), ignore = "prosody is not installed (scripts/test installs it)")]], [(run), (run), (run), (run), (run), (run), (run), (run), (run)]);
driver!(ws_json: super::peers::reference::WsJson, [], [(run), (run), (run), (run), (run), (run), (run), (run), (run)]);
driver!(#[cfg(feature = "script")] script: super::peers::reference::Script, [], [(run), (run), (run), (run), (run), (run), (run), (run), (run)]);
driver!(#[cfg(feature = "socketio")] socketio: super::peers::socketio::SocketIo, [#[cfg_attr(not(peer_socketio), ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)")]], [(run), (run), (run), (run), (run), (run), (run), (run), (run)]);
