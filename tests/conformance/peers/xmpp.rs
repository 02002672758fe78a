//! The `xmpp` driver's peer: the shared real Prosody of this test binary, each test with
//! users and rooms of its own prefix. Without in-band registration its users have no
//! accounts (refused), and a second client of the sender ([`Resender`]) sends every
//! message again, so Prosody stores both copies for the late users.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use msgstorm::scenario::Shard;

use crate::common::proxy::Garbage;
use crate::common::xmpp::{shared, Kind, Resender, Server};
use crate::conformance::{Peer, Setup};

/// An element no XML parser accepts: its attribute's value is not quoted.
const NOT_XML: &[u8] = b"<garbage a=1/>";

/// The end of the server's first stream features.
fn features_end(b: &[u8]) -> Option<usize> {
    const END: &[u8] = b"</stream:features>";
    b.windows(END.len())
        .position(|w| w == END)
        .map(|i| i + END.len())
}

/// Prosody, the prefix of this test's users, and the resender of a duplicating run.
pub struct Prosody {
    server: &'static Server,
    prefix: String,
    resender: Option<Resender>,
}

impl Peer for Prosody {
    const DRIVER: &'static str = "xmpp";
    // Late users log in long after the sending is over (see tests/xmpp/offline.rs).
    const LATE_AT: &'static str = "6s";
    const DRAIN: &'static str = crate::common::xmpp::DRAIN;
    const GARBAGE: Option<Garbage> = Some(Garbage {
        after: features_end,
        bytes: NOT_XML,
    });

    async fn start(_setup: Setup) -> Self {
        static TESTS: AtomicUsize = AtomicUsize::new(0);
        let server = tokio::task::spawn_blocking(|| shared(Kind::Prosody))
            .await
            .expect("Prosody starts");
        Prosody {
            server,
            prefix: format!("conf{}", TESTS.fetch_add(1, Ordering::SeqCst)),
            resender: None,
        }
    }

    fn url(&self) -> String {
        self.server.url()
    }

    fn target(&self, url: &str, setup: Setup) -> String {
        let prefix = &self.prefix;
        let register = match setup {
            Setup::Refusing => "",
            _ => "register = true\n",
        };
        format!(
            "[target]\ndriver = \"xmpp\"\nurl = \"{url}\"\nconnect_timeout = \"20s\"\n\n\
             [target.auth]\nusername = \"{prefix}-{{user}}\"\npassword = \"pw-{{user}}\"\n\n\
             [target.xmpp]\ndomain = \"localhost\"\n{register}room = \"{prefix}-{{group}}\"\n"
        )
    }

    /// Starts the resender as the one user on time, the sender.
    fn before(&mut self, setup: Setup, scenario: &str) {
        if setup != Setup::Duplicating {
            return;
        }
        let plan = msgstorm::scenario::parse(scenario, Path::new("dup.toml"), &[], Shard::WHOLE)
            .expect("a valid scenario");
        let pop = &plan.population;
        let sender = (0..pop.users)
            .find(|u| !pop.late.contains(u))
            .expect("one user on time");
        let id = pop.user_id(sender);
        let prefix = &self.prefix;
        self.resender = Some(Resender::start(
            self.server,
            &format!("{prefix}-{id}"),
            &format!("pw-{id}"),
        ));
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        self.resender.take().map_or(0, Resender::stop)
    }
}
