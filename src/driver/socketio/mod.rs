//! The `socketio` driver: Socket.IO v5 over Engine.IO v4, on the shared WebSocket
//! transport (`ws://` and `wss://`), with the app's chat events mapped in the scenario
//! (`[target.socketio]`, [`options`]; the guide is `docs/drivers/socketio.md`).
//!
//! | operation | Socket.IO |
//! |---|---|
//! | connect + login | WebSocket upgrade to `/socket.io/?EIO=4&transport=websocket`, Engine.IO open, `CONNECT` with the templated `auth` object; `CONNECT_ERROR` is `auth_failed` |
//! | send | an event (`dm` / `group` by default) with an ack id; the ack is the acceptance |
//! | join group | the `join` event, waiting for its ack |
//! | receive | the `message` event; the body at a JSON path of its first argument |
//! | heartbeat | the server pings (`2`), the driver answers (`3`); its own heartbeat is a WebSocket ping |
//! | fetch missed | connection state recovery: `pid` and `offset` in the reconnect's `auth`; the packets the server replays before `CONNECT` are the missed messages |
//! | signals | the app's events (`receipt_event`, `typing_event`, `presence_event`, `contacts_event`; off until named) with the token in the payload; receipts to an away sender replayed by recovery ([`signals`]) |
//! | close | the WebSocket closes without a namespace `DISCONNECT`, so the server keeps the session for recovery (with recovery off: `DISCONNECT` first) |
//!
//! The packet codec is this driver's own ([`codec`], why in its doc); templates and JSON
//! paths are `ws-json`'s.

pub mod codec;
pub mod options;
mod session;
pub mod signals;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use self::options::{Options, NAME};
use super::{
    Auth, AuthForm, Caps, Config, Connected, Failure, OptionError, Signals, Spec, UserCtx,
};
use crate::driver::kit::connect::within;
use crate::driver::kit::inbox::Inbox;
use crate::driver::kit::json_map::template::Values;
use crate::driver::kit::json_map::{credentials, now_ms};
use crate::driver::kit::ws::{Dialer, Ws};
use crate::metrics::ErrorKind;
use crate::vocab::TrafficKind;
pub use session::SocketIoSession;
use session::State;

/// The longest a user closing without an offset waits for one when the scenario names no
/// `welcome_event` (see [`SocketIoSession::await_offset`]).
const OFFSET_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The Socket.IO driver.
#[derive(Debug, Clone)]
pub struct SocketIoDriver {
    /// One dialer per node of the app (`target.url`, then `urls`).
    dialers: Vec<Dialer>,
    opts: Arc<Options>,
    auth: Auth,
}

/// What a user keeps between connections for connection state recovery.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The private session id of the last connection (`pid` of its `CONNECT`).
    pub pid: Option<String>,
    /// The offset of the last packet received.
    pub offset: Option<String>,
}

impl super::Driver for SocketIoDriver {
    const SPEC: Spec = Spec {
        name: NAME,
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: None,
        kinds: &[TrafficKind::Direct, TrafficKind::Group, TrafficKind::Idle],
        requests: &[],
        auth: &[AuthForm::Password],
        source_addresses: true,
        files: &[],
        caps: Caps {
            acceptance: true,
            needs_prior_connect: true,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: true,
            group_history: None,
            skips_history: false,
        },
    };

    type Session = SocketIoSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        let opts = Options::parse(&config.options, &Self::SPEC)?;
        let mut dialers = Vec::new();
        for ep in config.endpoint.iter().chain(&opts.urls) {
            let mut ep = ep.clone();
            ep.path = opts.request_path(&ep);
            let node = Config {
                endpoint: Some(ep),
                ..config.clone()
            };
            dialers.push(Dialer::new(&node)?);
        }
        if dialers.is_empty() {
            // Validation before the endpoint is known: the transport's options still count.
            dialers.push(Dialer::new(config)?);
        }
        Ok(SocketIoDriver {
            dialers,
            opts: Arc::new(opts),
            auth: config.auth.clone(),
        })
    }

    fn caps(&self) -> Caps {
        Caps {
            acceptance: self.opts.ack,
            // A session is kept for recovery only once a user has connected.
            needs_prior_connect: self.opts.recovery,
            fetch_missed: self.opts.recovery,
            filters_own_echoes: self.opts.from.is_some(),
            // A session is only restored from the offset of a packet the user received;
            // an app that welcomes every new connection gives each user one.
            fetch_needs_receipt: self.opts.recovery && self.opts.welcome_event.is_none(),
            group_history: None,
            skips_history: false,
        }
    }

    fn signals(&self) -> Signals {
        self.opts.signals.offered()
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Recovery,
    ) -> Result<Connected<SocketIoSession>, (Failure, Recovery)> {
        let started = Instant::now();
        // A user that connected before but never received a packet has no offset: the
        // server cannot restore its session, and what it missed is gone.
        let no_resume_point = self.opts.recovery && resume.pid.is_some() && resume.offset.is_none();
        let (dialer, ws) = match self.dial(user.ix).await {
            Ok(found) => found,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let mut session = SocketIoSession {
            ws,
            opts: Arc::clone(&self.opts),
            st: State {
                user: user.id.clone(),
                nsp: self.opts.namespace.clone(),
                inbox: Inbox::default(),
                ready: VecDeque::new(),
                missed: Vec::new(),
                recovery: resume,
            },
            reply_timeout: dialer.timeout(),
        };
        let auth = self.auth_object(user, &session.st.recovery);
        match within(dialer.timeout(), "Socket.IO CONNECT", session.login(&auth)).await {
            Ok(()) => Ok(Connected {
                session,
                handshake,
                login: started.elapsed() - handshake,
                account: None,
                no_resume_point,
            }),
            Err(f) => Err((f, session.st.recovery)),
        }
    }
}

impl SocketIoDriver {
    /// Connects user `ix` to its node (`ix` modulo the nodes); when that node refuses the
    /// connection (it is down), to the next ones in turn, as a load balancer would.
    async fn dial(&self, ix: u32) -> Result<(&Dialer, Ws), Failure> {
        let n = self.dialers.len();
        let mut first = None;
        for k in 0..n {
            let dialer = &self.dialers[(ix as usize + k) % n];
            match dialer.dial(ix).await {
                Ok(ws) => return Ok((dialer, ws)),
                Err(f) if f.kind == ErrorKind::ConnectRefused => {
                    first.get_or_insert(f);
                }
                Err(f) => return Err(first.unwrap_or(f)),
            }
        }
        Err(first.unwrap_or_else(|| Failure::new(ErrorKind::Other, "no target URL")))
    }

    /// The connect packet's `auth` object for `user`, with `pid` and `offset` when the
    /// connection is to be recovered.
    fn auth_object(&self, user: &UserCtx, rec: &Recovery) -> String {
        let (username, password) = credentials(&self.auth, &user.id);
        let vals = Values {
            user: &user.id,
            token: &password,
            username: &username,
            password: &password,
            ..Values::default()
        };
        let auth = self.opts.auth.fill(&vals, now_ms());
        let (Some(pid), Some(offset), true) = (&rec.pid, &rec.offset, self.opts.recovery) else {
            return auth;
        };
        // Checked to be an object when the options were read.
        let inner = auth.trim_start().trim_start_matches('{');
        let sep = if inner.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        format!(
            "{{\"pid\":{},\"offset\":{}{sep}{inner}",
            serde_json::Value::from(pid.as_str()),
            serde_json::Value::from(offset.as_str())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            user: "me".to_owned(),
            nsp: "/".to_owned(),
            inbox: Inbox {
                pending: VecDeque::from([(7, 70)]),
                ..Inbox::default()
            },
            ready: VecDeque::new(),
            missed: Vec::new(),
            recovery: Recovery::default(),
        }
    }

    fn interpreted(st: &mut State, text: &str) -> Option<String> {
        let opts = Options::parse(
            &toml::Table::new(),
            &<SocketIoDriver as super::super::Driver>::SPEC,
        )
        .expect("defaults");
        st.interpret_packet(&opts, text);
        while let Some((ev, offset)) = st.ready.pop_front() {
            if offset.is_some() {
                st.recovery.offset = offset;
            }
            if let Some(ev) = ev {
                return Some(format!("{ev:?}"));
            }
        }
        None
    }

    #[test]
    fn packets_become_events() {
        let mut st = state();
        assert_eq!(
            interpreted(&mut st, "43/x,7[]"),
            None,
            "other namespaces are not ours"
        );
        assert_eq!(
            interpreted(&mut st, r#"437[{"ok":true}]"#).as_deref(),
            Some("Accepted { tag: 70 }")
        );
        assert_eq!(
            interpreted(&mut st, r#"42["message",{"from":"a","body":"hi"},"17-0"]"#).as_deref(),
            Some(r#"Delivered { body: "hi" }"#)
        );
        assert_eq!(st.recovery.offset.as_deref(), Some("17-0"));
        assert_eq!(
            interpreted(&mut st, r#"42["message",{"from":"me","body":"x"},"18-0"]"#),
            None
        );
        assert_eq!(st.recovery.offset.as_deref(), Some("18-0"));
        assert_eq!(interpreted(&mut st, r#"42["welcome","19-0"]"#), None);
        assert_eq!(st.recovery.offset.as_deref(), Some("19-0"));
        assert_eq!(interpreted(&mut st, "2"), None);
        assert_eq!(st.inbox.pongs_owed, 1);
        for bad in [
            "",
            "x",
            "42[",
            "42[]",
            r#"42["message"]"#,
            r#"42["message",{"nobody":1}]"#,
            "45-[]",
        ] {
            let ev = interpreted(&mut st, bad).unwrap_or_else(|| panic!("{bad:?} gave nothing"));
            assert!(ev.starts_with("ProtocolError"), "{bad:?}: {ev}");
        }
        let ev = interpreted(&mut st, "41").expect("closed");
        assert!(ev.starts_with("Closed"), "{ev}");
    }

    #[test]
    fn signal_events_deliver_their_token() {
        let table =
            toml::from_str("receipt_event = 'read'\ntyping_event = 'typing'").expect("options");
        let opts = Options::parse(&table, &<SocketIoDriver as super::super::Driver>::SPEC)
            .expect("options");
        let mut st = state();
        let mut got = |text: &str| {
            st.interpret_packet(&opts, text);
            st.ready
                .pop_front()
                .and_then(|(ev, _)| ev)
                .map(|ev| format!("{ev:?}"))
        };
        assert_eq!(
            got(r#"42["read",{"from":"a","signal":"R1"},"20-0"]"#).as_deref(),
            Some(r#"Delivered { body: "R1" }"#)
        );
        assert_eq!(
            got(r#"42["typing",{"from":"a","state":"start","signal":"T1"},"21-0"]"#).as_deref(),
            Some(r#"Delivered { body: "T1" }"#)
        );
        assert_eq!(
            got(r#"42["typing",{"signal":""},"22-0"]"#),
            None,
            "nobody's"
        );
        let ev = got(r#"42["read",{"from":"a"},"23-0"]"#).expect("an error");
        assert!(ev.contains("a signal without a token at `signal`"), "{ev}");
        assert_eq!(
            got(r#"42["presence",{"signal":"P1"},"24-0"]"#),
            None,
            "not named"
        );
    }
}
