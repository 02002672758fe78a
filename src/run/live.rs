//! The run's live metrics ([`crate::live`]): the OpenMetrics endpoint and the
//! remote-write pusher, started before the load when the plan or the flags ask for them,
//! and the final push after it.

use std::net::SocketAddr;
use std::sync::Arc;

use super::{Followed, Options, Sink};
use crate::engine::snapshot::LiveTap;
use crate::error::Result;
use crate::launch::Rendezvous;
use crate::scenario::Plan;

/// The live metrics of one process's run: the tap the engine fills, the endpoint (stops
/// when this is dropped) and the pusher.
#[derive(Default)]
pub(super) struct Live {
    /// What the engine publishes to (none when nothing watches live).
    pub tap: Option<Arc<LiveTap>>,
    #[cfg(feature = "live")]
    endpoint: Option<crate::live::Endpoint>,
    #[cfg(feature = "live")]
    pusher: Option<crate::live::Pusher>,
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

/// Starts what is asked for (a note says where the endpoint listens); an address that
/// cannot be listened on is a usage error naming the setting.
/// The run is named by its id and its target as the report names it.
pub(super) async fn start(
    plan: &Plan,
    options: &Options,
    (run_id, target): (u32, String),
    sink: &mut dyn Sink,
) -> Result<Live> {
    let listen = address(plan, options);
    let push = options
        .metrics_push
        .clone()
        .or_else(|| plan.report.metrics_push.clone());
    if listen.is_none() && push.is_none() && options.viewer.is_none() {
        return Ok(Live::default());
    }
    let tap = Arc::new(LiveTap::default());
    if let Some(v) = &options.viewer {
        let run = Followed {
            plan: plan.clone(),
            run_id,
            target,
            scenario_source: options.source.clone(),
        };
        v.follow(tap.clone(), run);
    }
    if listen.is_none() && push.is_none() {
        return Ok(Live {
            tap: Some(tap),
            ..Live::default()
        });
    }
    #[cfg(feature = "live")]
    {
        let labels = vec![
            ("run", format!("{run_id:08x}")),
            ("shard", plan.shard.index.to_string()),
            ("driver", plan.target.driver.name.to_owned()),
            ("scenario", plan.name.clone()),
        ];
        let mut live = Live {
            tap: Some(tap.clone()),
            ..Live::default()
        };
        if let Some((addr, origin)) = listen {
            let endpoint = crate::live::Endpoint::start(addr, tap.clone(), labels.clone())
                .await
                .map_err(|e| {
                    crate::error::Error::Usage(format!("{origin} {addr}: cannot listen: {e}"))
                })?;
            sink.event(super::Event::Note(format!(
                "metrics: http://{}/metrics (OpenMetrics, while the run lasts)",
                endpoint.addr
            )));
            live.endpoint = Some(endpoint);
        }
        if let Some(uri) = push {
            live.pusher = Some(crate::live::Pusher::start(uri, tap, labels));
        }
        Ok(live)
    }
    #[cfg(not(feature = "live"))]
    {
        let _ = (run_id, sink, tap);
        let setting = listen.map_or("--metrics-push", |(_, origin)| origin);
        Err(crate::error::Error::Usage(format!(
            "{setting}: this msgstorm was built without the `live` feature"
        )))
    }
}

impl Live {
    /// After the load: the endpoint stops, the pusher sends the final totals; a note when
    /// pushes failed.
    pub(super) async fn finish(self) -> Option<String> {
        #[cfg(feature = "live")]
        {
            drop(self.endpoint);
            match self.pusher {
                Some(p) => p.finish().await,
                None => None,
            }
        }
        #[cfg(not(feature = "live"))]
        {
            let _ = self;
            None
        }
    }
}
