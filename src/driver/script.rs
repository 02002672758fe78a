//! The `script` driver: a protocol adapter written in Lua (`[target.script] file = "…"`),
//! for servers whose protocol no built-in driver speaks and `ws-json`'s templates cannot
//! describe (state, server-assigned ids, computed credentials). The guide is
//! `docs/drivers/script.md`.
//!
//! The script maps the engine's intents to frames — `login`, `direct`, `group`, `join`,
//! `heartbeat`, `fetch`, `close` — and says what each incoming frame is (`receive`): an
//! acceptance of a send, a push, a reply to a request, a history item, an error, or
//! nothing. Everything else stays here in Rust: the envelope, the ledger, pacing, metrics
//! and timestamps never reach the script; per-conversation positions ([`Cursors`]) merge
//! pushes with fetched history exactly as in the `native` and `ws-json` drivers.
//!
//! A run builds one interpreter per worker thread ([`vm`]), each with the script loaded
//! once; a user is a small table in one of them. Flows that wait (log in, then join; ask
//! for a page, then the next) are coroutines the session resumes with each reply
//! ([`session`]). A script error at run time is error kind `script` with the script's
//! line; a syntax error or a missing entry point is found by `msgstorm validate`, at
//! `FILE:LINE`, before anything connects.

mod codecs;
mod session;
mod vm;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::cursors::Cursors;
use super::json_map::credentials;
use super::ws::{Dialer, TLS_KEYS};
use super::{AuthForm, Caps, Config, Connected, Failure, OptionError, Spec, UserCtx};
use crate::scenario::TrafficKind;
pub use session::ScriptSession;
use vm::Vm;

/// The driver's name.
const NAME: &str = "script";

/// The keys of `[target.script]`.
const KEYS: [&str; 4] = ["file", "acceptance", TLS_KEYS[0], TLS_KEYS[1]];

/// The adapter-script driver.
#[derive(Debug, Clone)]
pub struct ScriptDriver {
    dialer: Dialer,
    vms: Arc<[Vm]>,
    auth: super::Auth,
    acceptance: bool,
}

impl super::Driver for ScriptDriver {
    const SPEC: Spec = Spec {
        name: NAME,
        schemes: super::ws::SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &[TrafficKind::Direct, TrafficKind::Group, TrafficKind::Idle],
        requests: &[],
        auth: &[AuthForm::Secret, AuthForm::Password],
        source_addresses: true,
        caps: Caps {
            acceptance: true,
            presence: false,
            fetch_missed: true,
            filters_own_echoes: true,
            fetch_needs_receipt: false,
            group_history: None,
            skips_history: true,
        },
    };

    type Session = ScriptSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        let err = |key: &str, msg: String| OptionError::option(NAME, key, msg);
        if let Some(key) = config.options.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(err(
                key,
                format!("unknown option; allowed: {}", KEYS.join(", ")),
            ));
        }
        let file = match config.options.get("file") {
            Some(toml::Value::String(f)) => config.dir.join(f),
            Some(v) => return Err(err("file", format!("must be a file name, got {v}"))),
            None => return Err(err("file", "missing: the adapter script to run".to_owned())),
        };
        let acceptance = match config.options.get("acceptance") {
            None => true,
            Some(toml::Value::Boolean(b)) => *b,
            Some(v) => return Err(err("acceptance", format!("must be true or false, got {v}"))),
        };
        let vms = load(&file).map_err(|msg| err("file", msg))?;
        Ok(ScriptDriver {
            dialer: Dialer::new(config)?,
            vms,
            auth: config.auth.clone(),
            acceptance,
        })
    }

    fn caps(&self) -> Caps {
        let has_fetch = self.vms[0].entry.fetch.is_some();
        Caps {
            acceptance: self.acceptance,
            fetch_missed: has_fetch,
            skips_history: has_fetch,
            ..Self::SPEC.caps
        }
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Cursors,
    ) -> Result<Connected<ScriptSession>, (Failure, Cursors)> {
        let started = Instant::now();
        let ws = match self.dialer.dial(user.ix).await {
            Ok(ws) => ws,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let vm = &self.vms[user.ix as usize % self.vms.len()];
        let (username, password) = credentials(&self.auth, &user.id);
        let session = ScriptSession::new(
            ws,
            vm,
            user,
            (&username, &password),
            resume,
            self.dialer.timeout(),
            self.acceptance,
        );
        let mut session = match session {
            Ok(s) => s,
            Err(failed) => return Err(failed),
        };
        if let Err(f) = session.login().await {
            return Err((f, session.into_cursors()));
        }
        Ok(Connected {
            session,
            handshake,
            login: started.elapsed() - handshake,
            account: None,
            no_resume_point: false,
        })
    }
}

/// The script at `file` loaded into one interpreter per worker thread of the generator.
fn load(file: &PathBuf) -> Result<Arc<[Vm]>, String> {
    let source = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
    let name = file.display().to_string();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..workers)
        .map(|_| Vm::load(&name, &source))
        .collect::<Result<Vec<_>, _>>()
        .map(Arc::from)
}
