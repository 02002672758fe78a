//! Finding the real peers the tests run (servers and tools from Debian's packages) and
//! free loopback ports for them. A missing peer skips its test with a printed note outside
//! CI and fails it under `CI=true` (`scripts/test` installs them).

use std::path::PathBuf;

/// Where a program is: `PATH`, then `/usr/sbin` and `/usr/bin`.
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// `program` (a peer server or tool: mosquitto, openssl, nginx, kubectl); `None` after a printed note when it is
/// missing outside CI, a panic under `CI=true`.
pub fn required(program: &str) -> Option<PathBuf> {
    let found = find(program);
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is not installed (CI=true requires it; scripts/test installs it)"
        );
        skip_note(program);
    }
    found
}

/// Tells the person running the tests why one was skipped.
#[allow(clippy::print_stderr)]
fn skip_note(program: &str) {
    eprintln!("note: skipping a test: {program} is not installed");
}

/// A free TCP port on 127.0.0.1 (free when asked; the peer binds it right after).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// Whether `needed` (a server's binary or installed modules) is there; a printed note and
/// `false` when it is not (a panic under `CI=true`).
pub fn installed(what: &str, needed: &std::path::Path) -> bool {
    if needed.exists() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what}: {} is missing (CI=true requires it; scripts/test installs it)",
        needed.display()
    );
    missing_note(what, needed);
    false
}

#[allow(clippy::print_stderr)]
fn missing_note(what: &str, needed: &std::path::Path) {
    eprintln!(
        "note: skipping a {what} test: {} is missing (scripts/test installs it)",
        needed.display()
    );
}

/// node (Debian's `/usr/bin/node`, else `/usr/local/bin/node`), for the npm peers.
pub fn node() -> std::path::PathBuf {
    ["/usr/bin/node", "/usr/local/bin/node"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| "/usr/bin/node".into())
}
