//! Finding the real peers the tests run (servers and tools from Debian's packages, the npm
//! and Go servers of `peers/`) and free loopback ports for them.
//!
//! `build.rs` looks for every peer the same way ([`detect`](super::detect)) and each test
//! that needs one carries `#[cfg_attr(not(peer_<name>), ignore = "<why>")]`, so a test whose
//! peer is missing is reported ignored, with the reason, instead of passing; under
//! `CI=true` every peer is required. A fixture that still finds its peer missing (a run
//! with `--include-ignored`, a peer removed since the build) fails its test: no test passes
//! without its peer. `scripts/test` installs them all.

use std::path::{Path, PathBuf};

use super::detect;

/// `program` (a peer server or tool: mosquitto, openssl, nginx, kubectl); a missing one
/// fails the test.
pub fn required(program: &str) -> PathBuf {
    detect::program(program).unwrap_or_else(|| missing(program))
}

/// A free TCP port on 127.0.0.1 (free when asked; the peer binds it right after).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// Fails the test when `needed` (a server's binary or installed modules) is not there.
pub fn installed(what: &str, needed: &Path) {
    if !needed.exists() {
        missing(&format!("{what} ({})", needed.display()));
    }
}

/// Fails the test that needs `what`, which is not installed.
pub fn missing(what: &str) -> ! {
    panic!(
        "{what} is not installed (scripts/test installs it): CI=true requires it, and \
         elsewhere the tests that need it are ignored unless run with --include-ignored"
    )
}

/// node (Debian's `/usr/bin/node`, else `/usr/local/bin/node`), for the npm peers.
pub fn node() -> PathBuf {
    detect::node().unwrap_or_else(|| "/usr/bin/node".into())
}
