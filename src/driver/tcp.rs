//! The TCP connect every driver starts with: resolve the host, bind the source address when
//! one is given, connect — each failure classified by [`io_error`](super::io_error), so a
//! name the generator cannot resolve or a source address it cannot bind is never taken for
//! the server refusing or closing anything.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

use super::{io_error, Failure};
use crate::metrics::ErrorKind;

/// Connects to `host:port`, from `source` (any free port) when given, trying each address
/// the host resolves to (of the source's family) until one connects.
pub async fn connect(host: &str, port: u16, source: Option<IpAddr>) -> Result<TcpStream, Failure> {
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| io_error::unresolved(host, &e))?;
    let mut last = None;
    for addr in addrs.filter(|a| source.is_none_or(|s| s.is_ipv4() == a.is_ipv4())) {
        match connect_to(addr, source).await {
            Ok(tcp) => return Ok(tcp),
            Err(f) => last = Some(f),
        }
    }
    Err(last.unwrap_or_else(|| {
        let family = source.map_or_else(String::new, |s| format!(" of the family of source {s}"));
        Failure::new(
            ErrorKind::Generator,
            format!("the generator resolved `{host}` to no address{family}"),
        )
    }))
}

/// Connects to `addr`, binding the local end to `source` first when given.
async fn connect_to(addr: SocketAddr, source: Option<IpAddr>) -> Result<TcpStream, Failure> {
    let io = |e: std::io::Error| io_error::classify(&e);
    let Some(source) = source else {
        return TcpStream::connect(addr).await.map_err(io);
    };
    let socket = if source.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(io)?;
    socket.bind(SocketAddr::new(source, 0)).map_err(|e| {
        let f = io_error::classify(&e);
        Failure::new(
            f.kind,
            format!("binding source address {source}: {}", f.detail),
        )
    })?;
    socket.connect(addr).await.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24: a source address this host does not have fails the bind, before any packet
    /// leaves; that is the generator's failure, not the server closing anything.
    #[tokio::test]
    async fn a_source_address_not_on_this_host_is_the_generators() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let source = Some("192.0.2.1".parse().expect("TEST-NET-1"));
        let f = connect("127.0.0.1", port, source)
            .await
            .expect_err("no such source");
        assert_eq!(f.kind, ErrorKind::Generator, "{}", f.detail);
        assert!(
            f.detail
                .starts_with("binding source address 192.0.2.1: the generator ran out of"),
            "{}",
            f.detail
        );
        let ok = connect("127.0.0.1", port, Some("127.0.0.1".parse().expect("ip"))).await;
        assert!(ok.is_ok(), "{:?}", ok.err());
    }

    /// A name the resolver refuses is the generator's failure. A label of 64 characters is
    /// refused by the resolver itself (labels are at most 63, RFC 1035), so no DNS server is
    /// asked and the test does not depend on one.
    #[tokio::test]
    async fn an_unresolvable_name_is_the_generators() {
        let host = format!("{}.invalid", "a".repeat(64));
        let f = connect(&host, 80, None)
            .await
            .expect_err("does not resolve");
        assert_eq!(f.kind, ErrorKind::Generator, "{}", f.detail);
        assert!(f.detail.contains("could not resolve"), "{}", f.detail);
    }

    #[tokio::test]
    async fn a_refused_connection_stays_the_targets() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let f = connect("127.0.0.1", port, None)
            .await
            .expect_err("nothing listens");
        assert_eq!(f.kind, ErrorKind::ConnectRefused, "{}", f.detail);
    }
}
