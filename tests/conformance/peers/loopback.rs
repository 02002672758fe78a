//! The `loopback` driver's peer is its own in-process hub: nothing to start.

use crate::common::proxy::Garbage;
use crate::conformance::{Peer, Setup, LATE_MESSAGES, LATE_USERS};

/// The loopback hub.
pub struct Loopback;

impl Peer for Loopback {
    const DRIVER: &'static str = "loopback";
    const GARBAGE: Option<Garbage> = None;

    async fn start(_setup: Setup) -> Self {
        Loopback
    }

    fn url(&self) -> String {
        String::new()
    }

    fn target(&self, _url: &str, setup: Setup) -> String {
        let mut target = "[target]\ndriver = \"loopback\"\n".to_owned();
        if setup == Setup::Duplicating {
            target.push_str("[target.loopback]\nstore_twice = 1.0\n");
        }
        target
    }

    /// Under [`Setup::Duplicating`] every message stored for a late user is stored twice:
    /// one copy per message the late users fetch.
    async fn made(&mut self, setup: Setup) -> u64 {
        if setup == Setup::Duplicating {
            LATE_USERS * LATE_MESSAGES
        } else {
            0
        }
    }
}
