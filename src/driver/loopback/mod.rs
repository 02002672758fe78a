//! The `loopback` driver: an in-process server, no sockets, for engine tests and for
//! measuring the generator's own ceiling.
//!
//! A [`Hub`] plays the server. It keeps a mailbox per user and the members of each group.
//! A send goes at once to every recipient: it is pushed when the recipient is online and
//! stored when it is not. [`Session::fetch_missed`](crate::driver::Session::fetch_missed) hands over what was stored, once. A
//! message is pushed or stored, never both: a push still queued when its session closes goes
//! back to the store for the user's next connection. Every send gets an
//! [`Event::Accepted`](crate::driver::Event::Accepted), every request an [`Event::Reply`](crate::driver::Event::Reply). Heartbeat and flush do nothing.
//! Group members persist across connections, so the driver needs a prior connect: late users join
//! their groups before traffic starts.
//!
//! # Faults
//!
//! [`LoopbackOptions`] sets seeded, deterministic faults on pushes to online recipients.
//! At most one fault hits a push. Each recipient draws from its own generator, seeded from
//! the options' seed and its user id. The [`Hub`] counts what it injected
//! ([`Hub::injected`]), so a test can check that the ledger reports exactly that:
//!
//! | fault | what happens | the ledger reports |
//! |---|---|---|
//! | `loss` | the push is neither sent nor stored | `lost` |
//! | `drop` | the push is not sent but is stored | `repaired` at the final verification sync (`via_sync` after a reconnect) |
//! | `duplicate` | the push is sent twice | `duplicated` |
//! | `reorder` | the push is held until the next push of the same conversation (sender × user or group) has been sent | `reordered` |
//! | `corrupt` | the body's last byte is changed | `corrupted` |
//!
//! One fault hits the store instead: `store_twice`, the probability that a message stored
//! for an offline user is stored twice, so that the user's fetch hands out both copies —
//! the ledger reports `duplicated` (a second copy through the fetch path), and the hub
//! counts it as [`Injected::stored_twice`] when it stores it.
//!
//! Faults are counted when they take effect: a copy, a held message or a corrupted body
//! when the session hands it to the engine. A held message that is still held when the
//! user fetches or disconnects goes to the store and counts as `dropped`. A corrupted body
//! that holds padding after the envelope header ([`crate::envelope`]) is attributed to its
//! message (`corrupted`). A body that is no more than its header has its final `:` changed:
//! the ledger can only count it as `damaged`, and the message as `lost`.
//!
//! Signals go through the hub too: a read receipt like a direct message to the message's
//! sender (pushed or stored, with the same faults), typing notices and presence only to
//! recipients online (never stored, no faults), presence to the contacts each user gave.
//!
//! `latency` and `jitter` delay every event (acceptances and replies by `latency` alone).
//! Deliveries to one user keep their order whatever the jitter: only `reorder` reorders.
//!
//! The hot path is cheap: one lock of the recipient's mailbox per push, no allocation
//! besides the delivered body, and no clock read without latency.

mod hub;
mod options;
mod session;
mod signals;

use std::sync::Arc;
use std::time::Duration;

use super::{Caps, Config, Connected, Failure, OptionError, Signals, Spec, UserCtx};
use crate::metrics::ErrorKind;
use crate::vocab::TrafficKind;
use hub::lock;
pub use hub::Hub;
pub use options::LoopbackOptions;
use session::Cut;
pub use session::LoopbackSession;

/// Faults a hub injected so far, in messages × recipients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    /// Pushes lost for good.
    pub lost: u64,
    /// Pushes not sent but stored (including held ones that never got released).
    pub dropped: u64,
    /// Extra copies handed out.
    pub duplicated: u64,
    /// Held pushes handed out after a later one of their conversation.
    pub reordered: u64,
    /// Corrupted bodies handed out.
    pub corrupted: u64,
    /// Messages stored twice for an offline user.
    pub stored_twice: u64,
}

/// The loopback driver; see the module documentation.
#[derive(Debug, Clone)]
pub struct LoopbackDriver {
    hub: Arc<Hub>,
}

impl LoopbackDriver {
    /// A driver over a new, empty hub with these options.
    pub fn with_options(opts: LoopbackOptions) -> Self {
        LoopbackDriver {
            hub: Arc::new(Hub::new(opts)),
        }
    }

    /// The hub, to read what it injected.
    pub fn hub(&self) -> Arc<Hub> {
        self.hub.clone()
    }
}

/// The request the hub answers at once.
const REQUEST_TIME: &str = "time";

impl super::Driver for LoopbackDriver {
    const SPEC: Spec = Spec {
        name: "loopback",
        schemes: &[],
        embedded_path: None,
        kinds: &[
            TrafficKind::Direct,
            TrafficKind::Group,
            TrafficKind::Idle,
            TrafficKind::Request,
        ],
        requests: &[REQUEST_TIME],
        auth: &[],
        source_addresses: false,
        files: &[],
        caps: Caps {
            acceptance: true,
            needs_prior_connect: true,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: false,
        },
    };

    type Session = LoopbackSession;

    fn signals(&self) -> Signals {
        Signals {
            receipts: true,
            typing: true,
            presence: true,
            ..Signals::default()
        }
    }

    fn new(config: &Config) -> Result<Self, OptionError> {
        LoopbackOptions::parse(&config.options).map(Self::with_options)
    }

    async fn connect(
        &self,
        user: &UserCtx,
        _resume: (),
    ) -> Result<Connected<LoopbackSession>, (Failure, ())> {
        let mailbox = self.hub.mailbox(&user.id);
        {
            let mut state = lock(&mailbox.state);
            state.logins += 1;
            if let Some((ix, n)) = self.hub.opts.refuse_logins {
                if ix == user.ix && state.logins <= n {
                    let why = format!("login {} of {} refused (test hook)", state.logins, user.id);
                    return Err((Failure::new(ErrorKind::AuthFailed, why), ()));
                }
            }
            state.online = true;
        }
        let cut = self.hub.opts.cut_user == Some(user.ix) && lock(&mailbox.state).logins == 1;
        Ok(Connected {
            session: LoopbackSession {
                hub: self.hub.clone(),
                mailbox,
                ix: user.ix,
                id: user.id.as_str().into(),
                panics: self.hub.opts.panic_user == Some(user.ix),
                cut: if cut { Cut::AtSend } else { Cut::No },
            },
            handshake: Duration::ZERO,
            login: Duration::ZERO,
            account: None,
            no_resume_point: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::driver::{Dest, Driver, Event, Session};
    use crate::vocab::UserIx;

    fn parse(text: &str) -> Result<LoopbackOptions, OptionError> {
        LoopbackOptions::parse(&text.parse::<toml::Table>().expect("test TOML"))
    }

    fn user(ix: UserIx) -> UserCtx {
        UserCtx {
            ix,
            id: format!("u{ix}"),
        }
    }

    async fn connect(d: &LoopbackDriver, ix: UserIx) -> LoopbackSession {
        d.connect(&user(ix), ())
            .await
            .expect("loopback connects")
            .session
    }

    /// Every event already queued, without waiting.
    fn ready_events(s: &mut LoopbackSession) -> Vec<Event> {
        use futures_util::FutureExt;
        std::iter::from_fn(|| s.next_event().now_or_never()).collect()
    }

    fn bodies(events: &[Event]) -> Vec<&str> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Delivered { body } => Some(body.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn parses_every_option() {
        let o = parse(
            "latency = \"2ms\"\njitter = \"1ms\"\nloss = 0.1\ndrop = 0.2\nduplicate = 0.1\n\
             reorder = 0.1\ncorrupt = 0\nseed = 7",
        )
        .expect("valid options");
        assert_eq!(o.latency, Duration::from_millis(2));
        assert_eq!(o.jitter, Duration::from_millis(1));
        assert_eq!(
            (o.loss, o.drop, o.duplicate, o.reorder),
            (0.1, 0.2, 0.1, 0.1)
        );
        assert_eq!((o.corrupt, o.seed), (0.0, 7));
        assert_eq!(parse("").expect("empty"), LoopbackOptions::default());
    }

    #[test]
    fn option_errors_name_the_key() {
        for (text, key, words) in [
            ("lose = 0.1", "target.loopback.lose", "allowed: latency"),
            ("loss = 1.5", "target.loopback.loss", "between 0 and 1"),
            ("loss = \"x\"", "target.loopback.loss", "probability"),
            ("latency = 5", "target.loopback.latency", "duration"),
            (
                "jitter = \"soon\"",
                "target.loopback.jitter",
                "not a duration",
            ),
            ("seed = -1", "target.loopback.seed", "integer"),
            (
                "loss = 0.6\ncorrupt = 0.6",
                "target.loopback.corrupt",
                "add up to",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.key, key, "{text}");
            assert!(e.msg.contains(words), "{text}: {}", e.msg);
        }
    }

    #[tokio::test]
    async fn offline_messages_are_fetched_once_and_never_pushed() {
        let d = LoopbackDriver::with_options(LoopbackOptions::default());
        let mut a = connect(&d, 0).await;
        a.send(1, Dest::User("u1"), "m0").await.expect("send");
        let mut b = connect(&d, 1).await;
        a.send(2, Dest::User("u1"), "m1").await.expect("send");
        let mut missed = Vec::new();
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["m0"]);
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["m0"]);
        assert_eq!(bodies(&ready_events(&mut b)), ["m1"]);
        let acks = ready_events(&mut a);
        assert!(matches!(
            acks[..],
            [Event::Accepted { tag: 1 }, Event::Accepted { tag: 2 }]
        ));
    }

    #[tokio::test]
    async fn pushes_queued_at_close_are_stored_for_the_next_connection() {
        let d = LoopbackDriver::with_options(LoopbackOptions::default());
        let mut a = connect(&d, 0).await;
        let b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "m0").await.expect("send");
        b.close().await;
        let mut b = connect(&d, 1).await;
        let mut missed = Vec::new();
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["m0"]);
        assert!(ready_events(&mut b).is_empty());
    }

    #[tokio::test]
    async fn groups_push_to_members_but_the_sender() {
        let d = LoopbackDriver::with_options(LoopbackOptions::default());
        let mut s = [
            connect(&d, 0).await,
            connect(&d, 1).await,
            connect(&d, 2).await,
        ];
        for x in &mut s[..2] {
            x.join("g").await.expect("join");
        }
        s[0].send(1, Dest::Group("g"), "hi").await.expect("send");
        s[0].send(2, Dest::Group("nope"), "hi").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut s[1])), ["hi"]);
        assert!(ready_events(&mut s[2]).is_empty());
        let own = ready_events(&mut s[0]);
        assert!(bodies(&own).is_empty());
        assert!(matches!(own[1], Event::Refused { tag: 2, .. }));
    }

    #[tokio::test]
    async fn reorder_releases_the_held_push_after_the_next_of_its_conversation() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            reorder: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut c = connect(&d, 2).await;
        let mut b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "a0").await.expect("send");
        c.send(1, Dest::User("u1"), "c0").await.expect("send");
        a.send(2, Dest::User("u1"), "a1").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut b)), ["c0", "a1", "a0"]);
        a.send(3, Dest::User("u1"), "a2").await.expect("send");
        let mut missed = Vec::new();
        b.fetch_missed(&mut missed).await.expect("fetch");
        assert_eq!(missed, ["a2"]);
        let injected = d.hub().injected();
        assert_eq!((injected.reordered, injected.dropped), (1, 1));
    }

    #[tokio::test]
    async fn corruption_changes_the_last_byte_and_duplicates_are_extra_copies() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            corrupt: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "abc").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut b)), ["abx"]);
        assert_eq!(d.hub().injected().corrupted, 1);

        let d = LoopbackDriver::with_options(LoopbackOptions {
            duplicate: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut b = connect(&d, 1).await;
        a.send(1, Dest::User("u1"), "abc").await.expect("send");
        assert_eq!(bodies(&ready_events(&mut b)), ["abc", "abc"]);
        assert_eq!(d.hub().injected().duplicated, 1);
    }

    #[tokio::test]
    async fn store_twice_hands_an_offline_user_two_copies() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            store_twice: 1.0,
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        a.send(1, Dest::User("u1"), "abc").await.expect("send");
        let mut b = connect(&d, 1).await;
        let mut out = Vec::new();
        b.fetch_missed(&mut out).await.expect("fetch");
        assert_eq!(out, ["abc", "abc"]);
        assert_eq!(d.hub().injected().stored_twice, 1);
        assert_eq!(d.hub().injected().duplicated, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn latency_delays_events_and_jitter_keeps_their_order() {
        let d = LoopbackDriver::with_options(LoopbackOptions {
            latency: Duration::from_millis(10),
            jitter: Duration::from_millis(50),
            ..LoopbackOptions::default()
        });
        let mut a = connect(&d, 0).await;
        let mut b = connect(&d, 1).await;
        let start = Instant::now();
        for i in 0..20u64 {
            a.send(i, Dest::User("u1"), &i.to_string())
                .await
                .expect("send");
        }
        assert!(ready_events(&mut b).is_empty());
        let mut got = Vec::new();
        for _ in 0..20 {
            if let Event::Delivered { body } = b.next_event().await {
                got.push(body.parse::<u64>().expect("number"));
            }
        }
        assert_eq!(got, (0..20).collect::<Vec<_>>());
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(10) && took <= Duration::from_millis(61),
            "{took:?}"
        );
    }
}
