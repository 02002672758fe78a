//! `msgstorm run --live ADDR`: the page that follows the run ([`crate::live::page`]),
//! listening before the run starts, told the final report when the result is written.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::run::Viewer;

/// The listening page of `--live`.
#[derive(Debug)]
pub(super) struct LivePage {
    #[cfg(feature = "live")]
    page: Arc<crate::live::Page>,
    /// Without the `live` feature there is no page: [`LivePage::open`] refuses.
    #[cfg(not(feature = "live"))]
    never: std::convert::Infallible,
}

impl LivePage {
    /// Listens on `addr` (a note says where); an address that cannot be listened on is a
    /// usage error naming the flag.
    pub(super) async fn open(addr: std::net::SocketAddr) -> Result<LivePage> {
        #[cfg(feature = "live")]
        {
            let page = crate::live::Page::start(addr)
                .await
                .map_err(|e| Error::Usage(format!("--live {addr}: cannot listen: {e}")))?;
            super::note(&format!(
                "live: http://{}/ follows the run (the final report when it ends)",
                page.addr
            ));
            Ok(LivePage {
                page: Arc::new(page),
            })
        }
        #[cfg(not(feature = "live"))]
        {
            Err(Error::Usage(format!(
                "--live {addr}: this msgstorm was built without the `live` feature"
            )))
        }
    }

    /// What the run tells what it is.
    pub(super) fn viewer(&self) -> Arc<dyn Viewer> {
        #[cfg(feature = "live")]
        {
            self.page.clone()
        }
        #[cfg(not(feature = "live"))]
        match self.never {}
    }

    /// Serves `html`, the run's final `report.html`, in the page's place, and waits
    /// (bounded) for a viewer who was following the run to see it.
    pub(super) async fn finish(&self, html: String) {
        #[cfg(feature = "live")]
        {
            // The load's signal handling is over: a signal here ends the wait.
            let seen = tokio::select! {
                seen = self.page.finish(html) => seen,
                () = signalled() => false,
            };
            if seen {
                super::note(&format!(
                    "live: http://{}/ shows the final report",
                    self.page.addr
                ));
            }
        }
        #[cfg(not(feature = "live"))]
        match (self.never, html) {}
    }
}

/// Resolves on SIGINT or SIGTERM (never, when they cannot be listened for).
#[cfg(feature = "live")]
async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}
