//! The one classifier of socket failures, used by every driver: what an [`io::Error`] from
//! resolving, connecting, reading or writing says about who failed.
//!
//! - The generator's own exhaustion — no local port or source address (`EADDRNOTAVAIL`,
//!   `EADDRINUSE`), no file descriptor (`EMFILE`, `ENFILE`), no socket buffer or memory
//!   (`ENOBUFS`, `ENOMEM`) — and a name it cannot resolve are [`ErrorKind::Generator`]:
//!   nothing reached the server, so none of it may look like the server closing anything.
//! - A refused connection is `connect_refused`, a timed-out one `connect_timeout`.
//! - Anything else on an open socket (reset, broken pipe, end of stream) is the server
//!   closing the connection: `closed_by_peer`.

use std::io;

use crate::driver::Failure;
use crate::metrics::ErrorKind;

/// Classifies a socket failure for the error taxonomy.
pub fn classify(e: &io::Error) -> Failure {
    if let Some(what) = e.raw_os_error().and_then(exhausted) {
        return Failure::new(
            ErrorKind::Generator,
            format!("the generator ran out of {what}: {e}"),
        );
    }
    let kind = match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::ClosedByPeer,
    };
    Failure::new(kind, e.to_string())
}

/// A failure to resolve `host` (the generator's resolver, not the server).
pub fn unresolved(host: &str, e: &io::Error) -> Failure {
    Failure::new(
        ErrorKind::Generator,
        format!("the generator could not resolve `{host}`: {e}"),
    )
}

/// What the generator ran out of, for an OS error that says it did.
fn exhausted(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EADDRNOTAVAIL => {
            "local addresses (EADDRNOTAVAIL: its ephemeral ports are used up, or a source \
             address is not on this host)"
        }
        libc::EADDRINUSE => "local ports (EADDRINUSE)",
        libc::EMFILE => "file descriptors (EMFILE: its open-file limit; see `ulimit -n`)",
        libc::ENFILE => "file descriptors (ENFILE: the system's open-file limit)",
        libc::ENOBUFS => "socket buffers (ENOBUFS)",
        libc::ENOMEM => "memory (ENOMEM)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(errno: i32) -> ErrorKind {
        classify(&io::Error::from_raw_os_error(errno)).kind
    }

    /// The generator's own exhaustion was `closed_by_peer`, blamed on the server.
    #[test]
    fn generator_exhaustion_is_its_own_kind() {
        for errno in [
            libc::EADDRNOTAVAIL,
            libc::EADDRINUSE,
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
        ] {
            assert_eq!(kind(errno), ErrorKind::Generator, "errno {errno}");
        }
        let f = classify(&io::Error::from_raw_os_error(libc::EADDRNOTAVAIL));
        assert!(
            f.detail
                .starts_with("the generator ran out of local addresses")
                && f.detail.contains("os error 99"),
            "{}",
            f.detail
        );
        assert!(classify(&io::Error::from_raw_os_error(libc::EMFILE))
            .detail
            .contains("file descriptors"));
    }

    #[test]
    fn the_server_side_keeps_its_kinds() {
        assert_eq!(kind(libc::ECONNREFUSED), ErrorKind::ConnectRefused);
        assert_eq!(kind(libc::ETIMEDOUT), ErrorKind::ConnectTimeout);
        for errno in [libc::ECONNRESET, libc::EPIPE, libc::ECONNABORTED] {
            assert_eq!(kind(errno), ErrorKind::ClosedByPeer, "errno {errno}");
        }
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(classify(&eof).kind, ErrorKind::ClosedByPeer);
    }

    /// A real failure, not a constructed one: binding an address this host does not have.
    #[test]
    fn binding_an_address_not_on_this_host_is_the_generators() {
        let socket = std::net::TcpListener::bind("192.0.2.1:0").expect_err("TEST-NET-1");
        assert_eq!(classify(&socket).kind, ErrorKind::Generator);
    }
}
