//! The peers on the reference server (`serve`, in this process): `native` and `ws-json`
//! chat on its `/ws`, `echo` on its `/echo`. It refuses a token of another secret, and
//! its `dup_store` fault stores messages twice, each second copy listed in its fault log.

use std::path::PathBuf;

use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::{ServeConfig, ServerHandle};

use crate::common::proxy::Garbage;
use crate::common::run::Work;
use crate::common::{config, fault_log, start};
use crate::conformance::{Peer, Setup, Style};

/// A WebSocket frame with a reserved opcode (0x3): no WebSocket client may accept it.
const RESERVED_OPCODE: &[u8] = &[0x83, 0x00];

/// A text frame that is not JSON.
const NOT_JSON: &[u8] = b"\x81\x09{garbage!";

/// A reference server, with a fault log under [`Setup::Duplicating`].
pub struct Serve {
    server: Option<ServerHandle>,
    log: Option<PathBuf>,
    _work: Work,
}

impl Serve {
    async fn start(setup: Setup) -> Serve {
        let work = Work::new();
        let log = (setup == Setup::Duplicating).then(|| work.path("faults.jsonl"));
        let cfg = match &log {
            Some(log) => ServeConfig {
                faults: FaultSpec::parse("dup_store=0.5").expect("fault spec"),
                fault_seed: Some(25),
                fault_log: Some(log.clone()),
                ..config()
            },
            None => config(),
        };
        Serve {
            server: Some(start(cfg).await),
            log,
            _work: work,
        }
    }

    fn server(&self) -> &ServerHandle {
        self.server.as_ref().expect("the server runs")
    }

    /// `[target]` for `driver` at `url`, with the server's secret (another one when
    /// refusing).
    fn target(&self, driver: &str, url: &str, setup: Setup) -> String {
        let secret = match setup {
            Setup::Refusing => "not-the-secret",
            _ => self.server().secret(),
        };
        format!("[target]\ndriver = \"{driver}\"\nurl = \"{url}\"\n\n[target.auth]\nsecret = \"{secret}\"\n")
    }

    /// Stops the server (every fault record is then written) and counts the second copies
    /// it stored.
    async fn copies(&mut self) -> u64 {
        let Some(log) = &self.log else {
            return 0;
        };
        if let Some(server) = self.server.take() {
            server.shutdown().await.expect("the server stops");
        }
        fault_log(log)
            .iter()
            .filter(|r| r["kind"] == "dup_store")
            .count() as u64
    }
}

/// `native` on the reference server.
pub struct Native(Serve);

impl Peer for Native {
    const DRIVER: &'static str = "native";
    const GARBAGE: Option<Garbage> = Some(Garbage::after_http_head(NOT_JSON));

    async fn start(setup: Setup) -> Self {
        Native(Serve::start(setup).await)
    }

    fn url(&self) -> String {
        self.0.server().ws_url()
    }

    fn target(&self, url: &str, setup: Setup) -> String {
        self.0.target(Self::DRIVER, url, setup)
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        self.0.copies().await
    }
}

/// `ws-json` on the reference server, mapped by the shipped `ws-json-native.toml`.
pub struct WsJson(Serve);

impl Peer for WsJson {
    const DRIVER: &'static str = "ws-json";
    const GARBAGE: Option<Garbage> = Some(Garbage::after_http_head(NOT_JSON));

    async fn start(setup: Setup) -> Self {
        WsJson(Serve::start(setup).await)
    }

    fn url(&self) -> String {
        self.0.server().ws_url()
    }

    fn target(&self, url: &str, setup: Setup) -> String {
        let tables = crate::ws_json::native::ws_json_tables();
        format!("{}\n{tables}", self.0.target(Self::DRIVER, url, setup))
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        self.0.copies().await
    }
}

/// `script` on the reference server, its protocol written as the shipped
/// `script-native.lua`.
#[cfg(feature = "script")]
pub struct Script(Serve);

#[cfg(feature = "script")]
impl Peer for Script {
    const DRIVER: &'static str = "script";
    const GARBAGE: Option<Garbage> = Some(Garbage::after_http_head(NOT_JSON));

    async fn start(setup: Setup) -> Self {
        Script(Serve::start(setup).await)
    }

    fn url(&self) -> String {
        self.0.server().ws_url()
    }

    fn target(&self, url: &str, setup: Setup) -> String {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/script-native.lua");
        let target = self.0.target(Self::DRIVER, url, setup);
        format!("{target}\n[target.script]\nfile = \"{file}\"\n")
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        self.0.copies().await
    }
}

/// `echo` on the reference server's echo endpoint. A text frame comes back as a body, so
/// its garbage is a frame no WebSocket allows.
pub struct Echo(Serve);

impl Peer for Echo {
    const DRIVER: &'static str = "echo";
    const STYLE: Style = Style::Echo;
    const GARBAGE: Option<Garbage> = Some(Garbage::after_http_head(RESERVED_OPCODE));

    async fn start(setup: Setup) -> Self {
        Echo(Serve::start(setup).await)
    }

    fn url(&self) -> String {
        self.0.server().echo_url()
    }

    fn target(&self, url: &str, _setup: Setup) -> String {
        format!("[target]\ndriver = \"echo\"\nurl = \"{url}\"\nheartbeat = \"0s\"\n")
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        0
    }
}
