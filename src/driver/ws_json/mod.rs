//! The `ws-json` driver: any JSON-over-WebSocket protocol, described in the scenario by
//! frame templates and JSON paths (`[target.ws-json]`, [`options`]; the guide with worked
//! examples is `docs/drivers/ws-json.md`).
//!
//! Everything is compiled once in [`Driver::new`](super::Driver::new): templates into
//! literal and placeholder segments ([`template`](crate::driver::kit::json_map::template)), paths into
//! steps ([`path`](crate::driver::kit::json_map::path)). A frame sent is one buffer filled
//! from its template; a frame received is checked once as JSON, its top-level keys that the
//! rules need are found in one more pass, and it is matched rule by rule (error, ack, push,
//! ping, ignore) by walking paths on from them over the borrowed text, so a frame costs no
//! allocation beyond the body it delivers. A frame no rule matches is
//! reported as a protocol error "unmatched frame: …", with the frame as the example.
//!
//! Requests the driver waits on (login, `after_login`, join, sync) are tied to their reply
//! by `{req_id}` and the `reply_id` path; frames arriving meanwhile are kept unread and
//! interpreted after, and pushes merge with fetched pages by conversation and sequence number
//! exactly as in the native driver ([`Cursors`]). Pages are read after the sequence number
//! up to which the user has everything, following `page_more` (a flag or a cursor); a login
//! before traffic notes where each conversation stands ([`Session::skip_history`](crate::driver::Session::skip_history)).
//!
//! Signals (read receipts, typing, presence, contacts) are templates too, carrying the
//! engine's token as `{signal}`; pushed ones are recognised by one rule, and stored receipts
//! are paged in the sync like one more conversation ([`signals`]).

pub mod options;
mod session;
pub mod signals;
mod sync;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use self::options::{Options, NAME};
use super::{
    Auth, AuthForm, Caps, Config, Connected, Failure, OptionError, Signals, Spec, UserCtx,
};
use crate::driver::kit::connect::within;
use crate::driver::kit::cursors::Cursors;
use crate::driver::kit::inbox::Inbox;
use crate::driver::kit::ws::Dialer;
use crate::vocab::TrafficKind;
use session::State;
pub use session::WsJsonSession;

/// The declarative JSON-over-WebSocket driver.
#[derive(Debug, Clone)]
pub struct WsJsonDriver {
    dialer: Dialer,
    opts: Arc<Options>,
    auth: Auth,
}

impl super::Driver for WsJsonDriver {
    const SPEC: Spec = Spec {
        name: NAME,
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &[TrafficKind::Direct, TrafficKind::Group, TrafficKind::Idle],
        requests: &[],
        auth: &[AuthForm::Secret, AuthForm::Password],
        source_addresses: true,
        files: &[],
        caps: Caps {
            acceptance: true,
            needs_prior_connect: false,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: true,
        },
    };

    type Session = WsJsonSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        Ok(WsJsonDriver {
            opts: Arc::new(Options::parse(&config.options, &config.kinds)?),
            dialer: Dialer::new(config)?,
            auth: config.auth.clone(),
        })
    }

    fn caps(&self) -> Caps {
        Caps {
            acceptance: self.opts.ack.is_some(),
            needs_prior_connect: false,
            fetch_missed: self.opts.sync.is_some(),
            filters_own_echoes: self.opts.push.as_ref().is_some_and(|p| p.from.is_some()),
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: self.opts.sync.is_some(),
        }
    }

    fn signals(&self) -> Signals {
        self.opts.signals.offered()
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Cursors,
    ) -> Result<Connected<WsJsonSession>, (Failure, Cursors)> {
        let started = Instant::now();
        let ws = match self.dialer.dial(user.ix).await {
            Ok(ws) => ws,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let mut session = WsJsonSession {
            ws,
            opts: Arc::clone(&self.opts),
            st: State {
                user: user.id.clone(),
                inbox: Inbox::default(),
                ready: VecDeque::new(),
                cursors: resume,
                groups: Vec::new(),
            },
            reply_timeout: self.dialer.timeout(),
        };
        let login = self.login(&mut session, user);
        match within(self.dialer.timeout(), "login reply", login).await {
            Ok(()) => Ok(Connected {
                session,
                handshake,
                login: started.elapsed() - handshake,
                account: None,
                no_resume_point: false,
            }),
            Err(f) => Err((f, session.st.cursors)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        let text = include_str!("../../../scenarios/ws-json-native.toml");
        let root: toml::Table = toml::from_str(text).expect("scenario");
        let table = root["target"]["ws-json"]
            .as_table()
            .expect("ws-json")
            .clone();
        Options::parse(&table, &["direct", "group"]).expect("options")
    }

    fn state() -> State {
        State {
            user: "me".to_owned(),
            inbox: Inbox {
                pending: VecDeque::from([(7, 70), (8, 80)]),
                ..Inbox::default()
            },
            ready: VecDeque::new(),
            cursors: Cursors::default(),
            groups: Vec::new(),
        }
    }

    fn interpreted(st: &mut State, opts: &Options, doc: &str) -> Option<String> {
        st.interpret_doc(opts, doc);
        st.ready.pop_front().map(|ev| format!("{ev:?}"))
    }

    #[test]
    fn frames_become_events_by_their_rules() {
        let opts = options();
        let mut st = state();
        let ack = r#"{"type":"ack","ref":8,"conv":"d:a:me","seq":1,"ts":0}"#;
        assert_eq!(
            interpreted(&mut st, &opts, ack).as_deref(),
            Some("Accepted { tag: 80 }")
        );
        let refused = r#"{"type":"error","ref":7,"code":"x","message":"too big","fatal":false}"#;
        let ev = interpreted(&mut st, &opts, refused).expect("event");
        assert!(
            ev.starts_with("Refused { tag: 70") && ev.contains("too big"),
            "{ev}"
        );
        let msg = |seq: u64, from: &str| {
            format!(
                r#"{{"type":"msg","conv":"d:a:me","seq":{seq},"from":"{from}","body":"b{seq}","ts":0}}"#
            )
        };
        // Seq 1 was the user's own message (acked): a push of it is not new.
        assert_eq!(
            interpreted(&mut st, &opts, &msg(2, "a")).as_deref(),
            Some(r#"Delivered { body: "b2" }"#)
        );
        assert_eq!(
            interpreted(&mut st, &opts, &msg(2, "a")).as_deref(),
            Some(r#"Delivered { body: "b2" }"#),
            "a server duplicate is passed on"
        );
        assert_eq!(
            interpreted(&mut st, &opts, &msg(3, "me")),
            None,
            "own messages are no deliveries"
        );
        assert_eq!(
            interpreted(&mut st, &opts, r#"{"type":"pong","ts":1}"#),
            None
        );
        for odd in [
            "",
            "not json",
            "[1,2]",
            "7",
            r#"{"type":"ack","ref":99}"#,
            r#"{"type":{"deep":[[[]]]}}"#,
        ] {
            let ev =
                interpreted(&mut st, &opts, odd).unwrap_or_else(|| panic!("{odd:?} gave nothing"));
            assert!(ev.starts_with("ProtocolError"), "{odd:?}: {ev}");
        }
        assert!(st.inbox.pending.is_empty());
    }

    /// The `[target.ws-json]` of the shipped signals scenario, with `edit` applied.
    fn signal_table(edit: impl Fn(&mut toml::Table)) -> toml::Table {
        let text = include_str!("../../../scenarios/ws-json-signals.toml");
        let root: toml::Table = toml::from_str(text).expect("scenario");
        let mut t = root["target"]["ws-json"]
            .as_table()
            .expect("ws-json")
            .clone();
        edit(&mut t);
        t
    }

    /// A change to the options.
    type Edit = fn(&mut toml::Table);

    fn parse_signals(t: &toml::Table) -> Result<Options, String> {
        Options::parse(t, &["direct", "group"]).map_err(|e| e.key)
    }

    #[test]
    fn signal_options_that_cannot_work_name_their_key() {
        let opts = parse_signals(&signal_table(|_| {})).expect("the shipped options");
        let offered = opts.signals.offered();
        assert!(offered.receipts && offered.typing && offered.presence);
        let cases: [(&str, Edit); 7] = [
            ("target.ws-json.signal", |t| {
                t.remove("signal");
                t.remove("sync");
            }),
            ("target.ws-json.contacts", |t| {
                t.remove("contacts");
            }),
            ("target.ws-json.receipt", |t| {
                t.insert("receipt".into(), r#"{"note":"{signal}"}"#.into());
            }),
            ("target.ws-json.group_receipt", |t| {
                t.remove("group_receipt");
            }),
            ("target.ws-json.group_typing", |t| {
                t.remove("group_typing");
            }),
            ("target.ws-json.typing", |t| {
                t.remove("typing");
            }),
            ("target.ws-json.signal.seq", |t| {
                if let Some(toml::Value::Table(s)) = t.get_mut("signal") {
                    s.remove("seq");
                }
            }),
        ];
        for (key, edit) in cases {
            assert_eq!(
                parse_signals(&signal_table(edit)).err().as_deref(),
                Some(key),
                "{key}"
            );
        }
        let none = parse_signals(&signal_table(|t| {
            for k in [
                "contacts",
                "receipt",
                "group_receipt",
                "typing",
                "group_typing",
                "presence",
            ] {
                t.remove(k);
            }
            t.remove("receipt_ok");
        }))
        .expect("no signals");
        assert!(!none.signals.offered().receipts);
    }

    #[test]
    fn pushed_signals_deliver_their_token_once_and_receipts_are_accepted() {
        let opts = parse_signals(&signal_table(|_| {})).expect("options");
        let mut st = State {
            user: "me".to_owned(),
            inbox: Inbox {
                pending: VecDeque::from([(4, 40)]),
                ..Inbox::default()
            },
            ready: VecDeque::new(),
            cursors: Cursors::default(),
            groups: Vec::new(),
        };
        // Receipt 2 came by a fetch already.
        st.cursors.with(signals::RECEIPTS, |s| s.mark(2));
        let mut got = |doc: &str| {
            st.interpret_doc(&opts, doc);
            st.ready.pop_front().map(|ev| format!("{ev:?}"))
        };
        assert_eq!(
            got(r#"{"type":"ok","ref":4}"#).as_deref(),
            Some("Accepted { tag: 40 }")
        );
        let receipt =
            r#"{"type":"receipt","from":"b","conv":"d:b:me","note":"R1","rseq":1,"ts":0}"#;
        assert_eq!(got(receipt).as_deref(), Some(r#"Delivered { body: "R1" }"#));
        let fetched = receipt
            .replace("R1", "R2")
            .replace(r#""rseq":1"#, r#""rseq":2"#);
        assert_eq!(got(&fetched), None, "fetched already");
        let presence = r#"{"type":"presence","from":"b","status":"offline","note":"","ts":0}"#;
        assert_eq!(got(presence), None, "the server's own presence is nobody's");
        let typing =
            r#"{"type":"typing","from":"b","conv":"d:b:me","state":"start","note":"T9","ts":0}"#;
        assert_eq!(got(typing).as_deref(), Some(r#"Delivered { body: "T9" }"#));
    }
}
