//! The `echo` driver: round trips through a WebSocket endpoint that returns every frame
//! (the reference server's `/echo`). Each connection is its own recipient: a frame's
//! end-to-end latency is due time → echoed back, and the ledger still checks that every
//! frame came back once, in order and intact. There is no login and no acceptance. The
//! transport (cheap upgrade, coalesced writes, reading while a write waits) is
//! [`crate::driver::kit::ws`].

mod session;

use std::time::{Duration, Instant};

use super::{Caps, Config, Connected, Failure, OptionError, Spec, UserCtx};
use crate::driver::kit::ws::Dialer;
use crate::vocab::TrafficKind;
pub use session::EchoSession;

/// The echo driver.
#[derive(Debug, Clone)]
pub struct EchoDriver {
    dialer: Dialer,
}

impl super::Driver for EchoDriver {
    const SPEC: Spec = Spec {
        name: "echo",
        schemes: crate::driver::kit::ws::SCHEMES,
        embedded_path: Some("/echo"),
        kinds: &[TrafficKind::Echo],
        requests: &[],
        auth: &[],
        source_addresses: true,
        files: &[],
        caps: Caps {
            filters_own_echoes: true,
            skips_history: false,
            ..Caps::NONE
        },
    };

    type Session = EchoSession;

    fn new(config: &Config) -> Result<Self, OptionError> {
        crate::driver::kit::ws::only_tls_options(config)?;
        Ok(EchoDriver {
            dialer: Dialer::new(config)?,
        })
    }

    async fn connect(
        &self,
        user: &UserCtx,
        resume: (),
    ) -> Result<Connected<EchoSession>, (Failure, ())> {
        let started = Instant::now();
        match self.dialer.dial(user.ix).await {
            Ok(ws) => Ok(Connected {
                session: EchoSession { ws },
                handshake: started.elapsed(),
                login: Duration::ZERO,
                account: None,
                no_resume_point: false,
            }),
            Err(f) => Err((f, resume)),
        }
    }
}
