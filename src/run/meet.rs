//! A shard's side of the run's rendezvous (`--start-barrier`): a shared folder, or shard 0
//! over the network, which also gives the shard its clock offset to the run's reference
//! clock (measured before traffic and after it, and recorded in the result).

use std::sync::Arc;
use std::time::Duration;

use crate::artifact::ClockSync;
use crate::clock::Clock;
use crate::driver::directory::Directory;
use crate::engine::StartBarrier;
use crate::error::{Error, Result};
use crate::launch::barrier::FileBarrier;
use crate::launch::coord::{Coordinator, Peer, Sample};
use crate::launch::Rendezvous;
use crate::scenario::Shard;

/// How long a shard keeps trying to reach shard 0 before its run: the pods of a Job start
/// as their nodes pull the image, minutes apart at worst.
const REACH_WAIT: Duration = Duration::from_secs(300);
/// How long the final time sample may take.
const FINAL_WAIT: Duration = Duration::from_secs(10);
/// How long shard 0 waits after its run for the others' final time samples.
const DONE_WAIT: Duration = Duration::from_secs(120);

/// This shard's part in the rendezvous.
#[derive(Debug, Default)]
pub(super) struct Meeting {
    /// The start barrier, if any.
    pub barrier: Option<Arc<dyn StartBarrier>>,
    /// The run-wide directory the shards share, if any.
    pub directory: Option<Arc<dyn Directory>>,
    /// The run's clock for this shard.
    pub clock: Clock,
    /// Shard 0's endpoint, when this is shard 0 of a network rendezvous.
    coordinator: Option<Coordinator>,
    /// Shard 0, and the offset measured before the run, when this is another shard.
    peer: Option<(Peer, Sample, String)>,
}

/// Joins the rendezvous `rv` as `shard`: shard 0 of a network rendezvous starts listening,
/// any other shard reaches it (exit code 3 when it cannot) and measures its clock offset.
pub(super) async fn meet(rv: Option<&Rendezvous>, shard: Shard) -> Result<Meeting> {
    match rv {
        None => Ok(Meeting::default()),
        Some(Rendezvous::Dir(dir)) => {
            let barrier = FileBarrier::new(dir.clone(), shard.index, shard.count);
            Ok(Meeting {
                directory: Some(barrier.directory()),
                barrier: Some(Arc::new(barrier)),
                ..Meeting::default()
            })
        }
        Some(Rendezvous::Tcp { host, port }) if shard.index == 0 => {
            let c = Coordinator::bind(host, *port, shard.count)
                .await
                .map_err(|e| {
                    Error::Usage(format!(
                        "--start-barrier: shard 0 cannot listen on port {port}: {e}"
                    ))
                })?;
            Ok(Meeting {
                barrier: Some(c.barrier()),
                directory: Some(c.directory()),
                coordinator: Some(c),
                ..Meeting::default()
            })
        }
        Some(Rendezvous::Tcp { host, port }) => {
            let addr = format!("{host}:{port}");
            let peer = Peer::new(addr.clone(), shard.index, shard.count);
            let sample = peer
                .offset(REACH_WAIT)
                .await
                .map_err(|e| Error::Unreachable {
                    target: format!("shard 0 at {addr}"),
                    reason: e.to_string(),
                })?;
            Ok(Meeting {
                barrier: Some(peer.barrier()),
                directory: Some(peer.directory()),
                clock: Clock {
                    offset_us: sample.offset_us,
                },
                peer: Some((peer, sample, addr)),
                ..Meeting::default()
            })
        }
    }
}

impl Meeting {
    /// After the run: another shard measures its offset again and tells shard 0 it is
    /// done; shard 0 waits (bounded) for that. Returns this shard's clock record, and adds
    /// to `notes` what went wrong.
    pub(super) async fn part(self, notes: &mut Vec<String>) -> Option<ClockSync> {
        if let Some(c) = self.coordinator {
            let missing = c.wait_done(DONE_WAIT).await;
            if !missing.is_empty() {
                let list: Vec<String> = missing.iter().map(u32::to_string).collect();
                notes.push(format!(
                    "shard 0 stopped waiting for shard(s) {} to take their final clock \
                     sample after {} s: their clock drift is unknown",
                    list.join(", "),
                    DONE_WAIT.as_secs()
                ));
            }
            let zero = Sample {
                offset_us: 0,
                uncertainty_us: 0,
            };
            return Some(ClockSync::measured(
                "itself: shard 0 is the run's reference clock".to_owned(),
                zero,
                Some(zero),
            ));
        }
        let (peer, start, addr) = self.peer?;
        let end = match peer.offset(FINAL_WAIT).await {
            Ok(end) => Some(end),
            Err(e) => {
                notes.push(format!(
                    "shard {} could not measure its clock offset again at the end ({e}): \
                     its clock drift during the run is unknown",
                    peer.index()
                ));
                None
            }
        };
        // Shard 0 waits for this; when it is gone, it has stopped waiting.
        let _ = peer.done().await;
        Some(ClockSync::measured(
            format!("shard 0 at {addr}"),
            start,
            end,
        ))
    }
}
