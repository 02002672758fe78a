//! Request/response for capacity analysis: the cheap `time` request, and `kv_get`
//! served by a bounded pool of workers in front of a simulated backend that takes
//! `--backend-latency` per lookup. Too few workers: response time grows while the CPU
//! idles — the Netty TPS/RT case of workload W3.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, Mutex};

use super::hub::encode;
use super::metrics::Metrics;
use super::outbox::Outbox;
use crate::wire::{Ref, ServerFrame};

/// Server time in microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The value the simulated backend holds for `key` (deterministic).
pub fn backend_value(key: &str) -> String {
    format!("v{:08x}", crc32fast::hash(key.as_bytes()))
}

struct Job {
    r#ref: Ref,
    key: String,
    reply: Arc<Outbox>,
}

/// The `kv_get` worker pool; dropping it stops the workers after their current job.
#[derive(Debug, Clone)]
pub struct KvPool {
    tx: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("ref", &self.r#ref)
            .finish_non_exhaustive()
    }
}

impl KvPool {
    /// Starts `workers` workers sharing a queue of `queue` waiting requests.
    pub fn start(workers: usize, queue: usize, latency: Duration, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = mpsc::channel::<Job>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..workers.max(1) {
            let rx = Arc::clone(&rx);
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                loop {
                    let job = rx.lock().await.recv().await;
                    let Some(job) = job else { break };
                    metrics.kv_waiting.dec();
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    let value = backend_value(&job.key);
                    job.reply.push(encode(&ServerFrame::KvValue {
                        r#ref: job.r#ref,
                        key: job.key,
                        value,
                    }));
                    metrics.kv_served.inc();
                }
            });
        }
        KvPool { tx }
    }

    /// Queues a lookup; false when the queue is full (answer `overloaded`).
    pub fn submit(&self, r#ref: Ref, key: String, reply: Arc<Outbox>, metrics: &Metrics) -> bool {
        metrics.kv_waiting.inc();
        let ok = self.tx.try_send(Job { r#ref, key, reply }).is_ok();
        if !ok {
            metrics.kv_waiting.dec();
        }
        ok
    }
}
