//! The `loopback` driver's peer is its own in-process hub: nothing to start.

use crate::common::proxy::Garbage;
use crate::conformance::{Peer, Setup};

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

    fn target(&self, _url: &str, _setup: Setup) -> String {
        "[target]\ndriver = \"loopback\"\n".to_owned()
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        0
    }
}
