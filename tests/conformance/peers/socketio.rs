//! The `socketio` driver's peer: the Socket.IO chat app of `peers/socketio`, one node
//! with connection state recovery. Its own options make each case: `--secret` refuses
//! other tokens, `--twice` emits every direct message twice (counted as `twice`), and
//! `--garbage=u1` sends user `u1` three malformed packets.

use crate::common::proxy::Garbage;
use crate::common::socketio::Cluster;
use crate::conformance::{Peer, Setup};

/// Malformed packets the app sends the user `--garbage` names.
const GARBAGE_PACKETS: u64 = 3;

/// One node of the app.
pub struct SocketIo(Cluster);

impl Peer for SocketIo {
    const DRIVER: &'static str = "socketio";
    const LATE_AT: &'static str = "2s";
    const GARBAGE: Option<Garbage> = None;

    async fn start(setup: Setup) -> Self {
        let args: &[&str] = match setup {
            Setup::Plain => &[],
            Setup::Refusing => &["--secret=right"],
            Setup::Duplicating => &["--twice"],
            Setup::Garbage => &["--garbage=u1"],
        };
        SocketIo(Cluster::start(1, "none", args))
    }

    fn url(&self) -> String {
        self.0.nodes[0].url()
    }

    fn target(&self, url: &str, setup: Setup) -> String {
        let auth = match setup {
            Setup::Refusing => "\n[target.auth]\nusername = \"{user}\"\npassword = \"wrong\"\n",
            _ => "",
        };
        let target = self.0.target("").replace(&self.url(), url);
        format!("{target}{auth}")
    }

    async fn made(&mut self, setup: Setup) -> u64 {
        match setup {
            Setup::Duplicating => self.0.stat("twice"),
            Setup::Garbage => GARBAGE_PACKETS,
            Setup::Plain | Setup::Refusing => 0,
        }
    }
}
