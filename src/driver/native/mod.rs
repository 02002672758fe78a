//! The `native` driver: the reference server's JSON-over-WebSocket protocol ([`crate::wire`]).
//!
//! Fetching missed messages lists the user's conversations and pages through each one after
//! the sequence number up to which this user has everything ([`Cursors`]); a login before
//! traffic notes where each conversation stands, so a reused server's earlier messages are
//! never fetched ([`Session::skip_history`](crate::driver::Session::skip_history)). The transport (cheap upgrade, coalesced
//! writes, reading while a write waits) is [`crate::driver::kit::ws`].
//!
//! Sync and pushes merge as a real client merges them, per conversation by sequence number
//! ([`Cursors`]):
//! - Frames that arrive while the driver waits for one of its own replies (a join, a sync
//!   page) are kept as they came, unread, and judged only when the engine takes them
//!   ([`Session::next_event`](crate::driver::Session::next_event)), after the sync that overlapped them. So a push that a sync
//!   also returned is handed out once (the sync's copy), and the engine sees each
//!   conversation in sequence order: the sync's messages first, then the pushes above them.
//! - A push above the highest sequence number pushed so far in its conversation is new
//!   unless a sync already returned it (the same message both ways: dropped).
//! - A push at or below that mark was pushed before, or overtaken by a later push: it is
//!   passed on as it is, so the ledger counts a server that sends a message twice as
//!   duplicated and a server that pushes out of order as reordered. (One case cannot be told
//!   apart: a push the server held back behind a later one, of a message a sync already
//!   returned, counts as duplicated.)
//!
//! Signals: a read receipt is a `receipt` frame (its `ok` is the acceptance), typing a
//! `typing` frame, presence a `presence` frame, each carrying the engine's token as its
//! `note`; the notes of pushed `receipt`, `typing` and `presence` frames are delivered
//! (the server's own `offline`, with an empty note, is not). Stored receipts merge with
//! pushed ones exactly as messages do: the receipt inbox is one more sequence among the
//! [`Cursors`], under the key `r:`, numbered by `rseq`.

mod codec;
mod dry;
mod session;

use std::collections::VecDeque;
use std::time::Instant;

use super::{
    Auth, AuthForm, Caps, Config, Connected, Failure, OptionError, Signals, Spec, UserCtx,
};
use crate::driver::kit::connect::within;
use crate::driver::kit::cursors::Cursors;
use crate::driver::kit::ws::Dialer;
use crate::vocab::TrafficKind;
pub use session::NativeSession;

/// Requests the driver makes for itself (join, sync) use refs with this bit set, so they
/// never collide with the engine's tags.
const INTERNAL_REF: u64 = 1 << 63;
/// Messages per sync page (receipts per `receipts` page too).
const SYNC_PAGE: u32 = 500;
/// The key of the user's receipt inbox among its [`Cursors`]: numbered by `rseq` as a
/// conversation by seq, and no conversation's id (those start `d:` or `g:`).
const RECEIPTS: &str = "r:";

/// The native protocol driver.
#[derive(Debug, Clone)]
pub struct NativeDriver {
    dialer: Dialer,
    secret: Option<String>,
}

/// The request the `time` request pattern sends: the server's clock, cheap.
const REQUEST_TIME: &str = "time";
/// The request the `kv_get` request pattern sends: a lookup through the server's worker
/// pool and simulated backend.
const REQUEST_KV_GET: &str = "kv_get";

impl NativeDriver {
    /// The login token of `user` (empty without a secret).
    fn token(&self, user: &str) -> String {
        match &self.secret {
            Some(secret) => crate::wire::token(user, secret),
            None => String::new(),
        }
    }
}

impl super::Driver for NativeDriver {
    const SPEC: Spec = Spec {
        name: "native",
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &[
            TrafficKind::Direct,
            TrafficKind::Group,
            TrafficKind::Idle,
            TrafficKind::Request,
        ],
        requests: &[REQUEST_TIME, REQUEST_KV_GET],
        auth: &[AuthForm::Secret],
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

    type Session = NativeSession;

    fn dry_run(&self, user: &str, to: &str, group: &str) -> Option<Vec<String>> {
        Some(dry::lines(user, self.token(user), to, group))
    }

    fn signals(&self) -> Signals {
        Signals {
            receipts: true,
            typing: true,
            presence: true,
            ..Signals::default()
        }
    }

    fn new(config: &Config) -> Result<Self, OptionError> {
        crate::driver::kit::ws::only_tls_options(config)?;
        let secret = match &config.auth {
            Auth::Secret(s) => Some(s.clone()),
            Auth::None | Auth::Password { .. } => None,
        };
        Ok(NativeDriver {
            dialer: Dialer::new(config)?,
            secret,
        })
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Cursors,
    ) -> Result<Connected<NativeSession>, (Failure, Cursors)> {
        let started = Instant::now();
        let ws = match self.dialer.dial(user.ix).await {
            Ok(ws) => ws,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let mut session = NativeSession {
            ws,
            user: user.id.as_str().into(),
            unread: VecDeque::new(),
            cursors: resume,
            next_ref: 0,
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
            Err(f) => Err((f, session.cursors)),
        }
    }
}
