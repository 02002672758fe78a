//! The run's OpenMetrics endpoint ([`crate::live`]), started before the load when the
//! plan or `--metrics-listen` asks for one, and where it listens.

use std::net::SocketAddr;
use std::sync::Arc;

use super::{Options, Sink};
use crate::engine::snapshot::LiveTap;
use crate::error::{Error, Result};
use crate::launch::Rendezvous;
use crate::scenario::Plan;

/// The live endpoint of one process's run, if it has one: the tap the engine fills and
/// the server, which stops when this is dropped.
pub(super) struct Live {
    /// What the engine publishes to.
    pub tap: Option<Arc<LiveTap>>,
    #[cfg(feature = "live")]
    _endpoint: Option<crate::live::Endpoint>,
}

/// The address this process serves its metrics on: `--metrics-listen` over
/// `report.metrics_listen`, with the shard's index added to the port when several shards
/// share this host (they meet through a folder), so each has its own endpoint. Also the
/// name of the setting, for errors.
fn address(plan: &Plan, options: &Options) -> Option<(SocketAddr, &'static str)> {
    let (mut addr, origin) = match (options.metrics_listen, plan.report.metrics_listen) {
        (Some(a), _) => (a, "--metrics-listen"),
        (None, Some(a)) => (a, "report.metrics_listen"),
        (None, None) => return None,
    };
    let same_host = matches!(options.rendezvous, Some(Rendezvous::Dir(_)));
    if same_host && addr.port() != 0 {
        addr.set_port(addr.port().saturating_add(plan.shard.index as u16));
    }
    Some((addr, origin))
}

/// Starts the endpoint when one is asked for (a note says where); an address that cannot
/// be listened on is a usage error naming the setting.
pub(super) async fn start(
    plan: &Plan,
    options: &Options,
    run_id: u32,
    sink: &mut dyn Sink,
) -> Result<Live> {
    let Some((addr, origin)) = address(plan, options) else {
        return Ok(Live {
            tap: None,
            #[cfg(feature = "live")]
            _endpoint: None,
        });
    };
    #[cfg(feature = "live")]
    {
        let tap = Arc::new(LiveTap::default());
        let labels = vec![
            ("run", format!("{run_id:08x}")),
            ("shard", plan.shard.index.to_string()),
            ("driver", plan.target.driver.name.to_owned()),
            ("scenario", plan.name.clone()),
        ];
        let endpoint = crate::live::Endpoint::start(addr, tap.clone(), labels)
            .await
            .map_err(|e| Error::Usage(format!("{origin} {addr}: cannot listen: {e}")))?;
        sink.event(super::Event::Note(format!(
            "metrics: http://{}/metrics (OpenMetrics, while the run lasts)",
            endpoint.addr
        )));
        Ok(Live {
            tap: Some(tap),
            _endpoint: Some(endpoint),
        })
    }
    #[cfg(not(feature = "live"))]
    {
        let _ = (run_id, sink);
        Err(Error::Usage(format!(
            "{origin} {addr}: this msgstorm was built without the `live` feature"
        )))
    }
}
