//! The `mqtt` driver's peer: a real mosquitto. It refuses a wrong password from its
//! password file, and a second publisher of the test's own ([`Republisher`]) publishes
//! every direct message again, so the late users' persistent sessions queue both copies.

use crate::common::mosquitto::{required, Mosquitto, Republisher};
use crate::common::proxy::Garbage;
use crate::conformance::{Peer, Setup};

/// A packet of the reserved type 0 (no MQTT version has it), length 0.
const RESERVED_PACKET: &[u8] = &[0x00, 0x00];

/// The end of the first MQTT packet: its fixed header (type byte, variable-length
/// remaining length) and the remaining length.
fn first_packet_end(b: &[u8]) -> Option<usize> {
    let mut len = 0usize;
    for (i, byte) in b.iter().enumerate().skip(1).take(4) {
        len |= usize::from(byte & 0x7f) << (7 * (i - 1));
        if byte & 0x80 == 0 {
            let end = i + 1 + len;
            return (b.len() >= end).then_some(end);
        }
    }
    None
}

/// mosquitto, and its republisher under [`Setup::Duplicating`].
pub struct Mqtt {
    broker: Mosquitto,
    republisher: Option<Republisher>,
}

impl Peer for Mqtt {
    const DRIVER: &'static str = "mqtt";
    const LATE_AT: &'static str = "2500ms";
    const GARBAGE: Option<Garbage> = Some(Garbage {
        after: first_packet_end,
        bytes: RESERVED_PACKET,
    });

    async fn start(setup: Setup) -> Self {
        let broker = match setup {
            Setup::Refusing => Mosquitto::start_with(|dir| {
                let passwd = required("mosquitto_passwd");
                let file = dir.join("passwd");
                let ok = std::process::Command::new(passwd)
                    .args(["-c", "-b"])
                    .arg(&file)
                    .args(["u0", "right"])
                    .status()
                    .expect("run mosquitto_passwd");
                assert!(ok.success(), "mosquitto_passwd failed");
                format!("allow_anonymous false\npassword_file {}", file.display())
            }),
            _ => Mosquitto::start(""),
        };
        let republisher =
            (setup == Setup::Duplicating).then(|| Republisher::start(broker.port, "msgstorm/u/+"));
        Mqtt {
            broker,
            republisher,
        }
    }

    fn url(&self) -> String {
        self.broker.url()
    }

    fn target(&self, url: &str, setup: Setup) -> String {
        let auth = match setup {
            Setup::Refusing => "\n[target.auth]\nusername = \"{user}\"\npassword = \"wrong\"\n",
            _ => "",
        };
        format!("[target]\ndriver = \"mqtt\"\nurl = \"{url}\"\n{auth}")
    }

    async fn made(&mut self, _setup: Setup) -> u64 {
        self.republisher.take().map_or(0, Republisher::stop)
    }
}
