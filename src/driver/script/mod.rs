//! The `script` driver: a protocol adapter written in Lua (`[target.script] file = "…"`),
//! for servers whose protocol no built-in driver speaks and `ws-json`'s templates cannot
//! describe (state, server-assigned ids, computed credentials). The guide is
//! `docs/drivers/script.md`.
//!
//! The script maps the engine's intents to frames — `login`, `direct`, `group`, `join`,
//! `heartbeat`, `fetch`, `close`, and the signals `contacts`, `receipt`, `typing`,
//! `presence`, offered only when defined — and says what each incoming frame is
//! (`receive`): an acceptance of a send, a push, a signal's token, a reply to a request, a
//! history item, an error, or nothing. Everything else stays here in Rust: the envelope, the ledger, pacing, metrics
//! and timestamps never reach the script; per-conversation positions ([`Cursors`]) merge
//! pushes with fetched history exactly as in the `native` and `ws-json` drivers.
//!
//! A run builds one interpreter per worker thread ([`vm`]), each with the script loaded
//! once; a user is a small table in one of them. Flows that wait (log in, then join; ask
//! for a page, then the next) are coroutines the session resumes with each reply
//! ([`session`]). A script error at run time is error kind `script` with the script's
//! line; a syntax error or a missing entry point is found by `msgstorm validate`, at
//! `FILE:LINE`, before anything connects.

mod answers;
mod codecs;
mod dry;
mod frame;
mod h1;
mod http;
mod items;
mod json;
mod limits;
mod link;
mod long_poll;
mod options;
mod said;
mod sends;
mod session;
mod vm;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use prost_reflect::DescriptorPool;

use super::directory::{self, Directory};
use super::{
    AuthForm, Caps, Config, Connected, Failure, OptionError, Scheme, Signals, Spec, UserCtx,
};
use crate::driver::kit::connect::Connector;
use crate::driver::kit::cursors::Cursors;
use crate::driver::kit::json_map::credentials;
use crate::driver::kit::options::Table;
use crate::driver::kit::ws::Dialer;
use crate::metrics::ErrorKind;
use crate::vocab::TrafficKind;
use limits::Limits;
use link::{Framing, Link};
use options::{protos, transport, user_urls, vars, KEYS};
pub use session::ScriptSession;
use vm::Vm;

/// The driver's name.
const NAME: &str = "script";

/// The request of `kind = "request"` traffic: the script's `request(u, name)`.
const REQUEST: &str = "call";

/// The URL schemes: WebSocket's, and TCP framed by `framing`.
const SCHEMES: &[Scheme] = &[
    crate::driver::kit::ws::SCHEMES[0],
    crate::driver::kit::ws::SCHEMES[1],
    Scheme {
        name: "tcp",
        default_port: 0,
        tls: false,
        example: "tcp://127.0.0.1:8463",
    },
    Scheme {
        name: "tls",
        default_port: 0,
        tls: true,
        example: "tls://game.example.com:8463",
    },
    Scheme {
        name: "http",
        default_port: 80,
        tls: false,
        example: "http://127.0.0.1:8008",
    },
    Scheme {
        name: "https",
        default_port: 443,
        tls: true,
        example: "https://matrix.example.com",
    },
];

/// How users reach the target.
#[derive(Debug, Clone)]
enum Transport {
    /// A WebSocket: the target URL's dialer, then one for each of `urls`; user `ix`
    /// takes dialer `ix % len` (the nodes of a cluster).
    Ws(Vec<Dialer>),
    /// TCP (or TLS) cut into frames.
    Tcp {
        connector: Connector,
        framing: Framing,
        max: usize,
    },
    /// HTTP/1.1 or HTTP/2 (over TLS for `https://`): requests, long polls, event streams.
    Http(http::Dial),
}

/// The adapter-script driver.
#[derive(Debug, Clone)]
pub struct ScriptDriver {
    transport: Transport,
    /// The URL user `ix` connects to: `urls[ix % len]` (`u.url`).
    urls: Arc<[String]>,
    vms: Arc<[Vm]>,
    auth: super::Auth,
    acceptance: bool,
    directory: Arc<dyn Directory>,
}

impl super::Driver for ScriptDriver {
    const SPEC: Spec = Spec {
        name: NAME,
        schemes: SCHEMES,
        embedded_path: Some("/ws"),
        kinds: &[
            TrafficKind::Direct,
            TrafficKind::Group,
            TrafficKind::Idle,
            TrafficKind::Request,
        ],
        requests: &[REQUEST],
        auth: &[AuthForm::Secret, AuthForm::Password],
        source_addresses: true,
        files: &["file", "proto"],
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

    type Session = ScriptSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        let err = |key: &str, msg: String| OptionError::option(NAME, key, msg);
        let t = Table::of(config);
        t.only(&KEYS)?;
        let file = match t.t.get("file") {
            Some(toml::Value::String(f)) => config.dir.join(f),
            Some(v) => return Err(t.wrong("file", "a file name", v)),
            None => return Err(t.bad("file", "is required: the adapter script to run")),
        };
        let acceptance = t.flag("acceptance")?.unwrap_or(true);
        let protos = protos(config)?;
        let limits = Limits::of(&t)?;
        let vars = vars(config)?;
        let vms = load(&file, &protos, (limits, &vars)).map_err(|msg| err("file", msg))?;
        Ok(ScriptDriver {
            transport: transport(config)?,
            urls: user_urls(config)?.into(),
            vms,
            auth: config.auth.clone(),
            acceptance,
            directory: config
                .directory
                .clone()
                .unwrap_or_else(|| Arc::new(directory::Local::default())),
        })
    }

    fn dry_run(&self, user: &str, to: &str, group: &str) -> Option<Vec<String>> {
        let (username, password) = credentials(&self.auth, user);
        Some(dry::lines(
            &self.vms[0],
            user,
            (&username, &password, &self.urls[0]),
            to,
            group,
        ))
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

    fn signals(&self) -> Signals {
        session::signals::offered(&self.vms[0].entry)
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: Cursors,
    ) -> Result<Connected<ScriptSession>, (Failure, Cursors)> {
        let started = Instant::now();
        let (link, timeout) = match &self.transport {
            Transport::Ws(dialers) => {
                let dialer = &dialers[user.ix as usize % dialers.len()];
                let link = match self.upgrade_path(user) {
                    Ok(Some(path)) => dialer.with_path(path).dial(user.ix).await,
                    Ok(None) => dialer.dial(user.ix).await,
                    Err(f) => Err(f),
                };
                (link.map(Link::Ws), dialer.timeout())
            }
            Transport::Tcp {
                connector,
                framing,
                max,
            } => {
                let stream = connector.within("TCP connect", connector.connect(user.ix));
                let link = stream.await.map(|s| Link::tcp(s, framing.clone(), *max));
                (link, connector.timeout())
            }
            Transport::Http(dial) => {
                let dial = http::Dial {
                    ix: user.ix,
                    ..dial.clone()
                };
                let timeout = dial.connector.timeout();
                let opened = http::Http::open(dial).await;
                (opened.map(|h| Link::Http(Box::new(h))), timeout)
            }
        };
        let link = match link {
            Ok(link) => link,
            Err(f) => return Err((f, resume)),
        };
        let handshake = started.elapsed();
        let vm = &self.vms[user.ix as usize % self.vms.len()];
        let (username, password) = credentials(&self.auth, &user.id);
        let url = &self.urls[user.ix as usize % self.urls.len()];
        let session = ScriptSession::new(
            link,
            vm,
            user,
            (&username, &password, url),
            resume,
            (timeout, self.acceptance),
            Arc::clone(&self.directory),
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

impl ScriptDriver {
    /// The path and query of `user`'s WebSocket upgrade when the script defines
    /// `upgrade(u)` (a user object made for the call; it cannot wait).
    fn upgrade_path(&self, user: &UserCtx) -> Result<Option<String>, Failure> {
        let vm = &self.vms[user.ix as usize % self.vms.len()];
        let Some(upgrade) = &vm.entry.upgrade else {
            return Ok(None);
        };
        let (username, password) = credentials(&self.auth, &user.id);
        let url = &self.urls[user.ix as usize % self.urls.len()];
        let path = vm.guard.run(|| {
            let u = vm.entry.new_user.call::<mlua::Table>((
                user.id.as_str(),
                user.ix,
                username.as_str(),
                password.as_str(),
                url.as_str(),
            ))?;
            upgrade.call::<String>(u)
        });
        match path {
            Ok(p) if p.starts_with('/') => Ok(Some(p)),
            Ok(p) => Err(Failure::new(
                ErrorKind::Script,
                format!("upgrade: `{p}` is not a path (it must start with /)"),
            )),
            Err(e) => Err(Failure::new(
                ErrorKind::Script,
                format!("upgrade: {}", vm::one_line(&e)),
            )),
        }
    }
}

/// The script at `file` loaded into one interpreter per worker thread of the generator,
/// each bounded by `limits`, with `vars` as its global `vars`.
fn load(
    file: &PathBuf,
    protos: &DescriptorPool,
    (limits, vars): (Limits, &toml::Table),
) -> Result<Arc<[Vm]>, String> {
    let source = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
    let name = file.display().to_string();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..workers)
        .map(|_| Vm::load(&name, &source, protos, (limits, vars)))
        .collect::<Result<Vec<_>, _>>()
        .map(Arc::from)
}
