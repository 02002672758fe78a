//! The connect skeleton every network driver starts with ([`Connector`]): resolve the
//! host, bind the user's source address when the scenario gives some (`[target]
//! source_addresses`: 127.0.0.2, 127.0.0.3, … to get past one address's ephemeral ports),
//! connect, and run TLS over the socket when the URL says so; the driver's own handshake
//! follows, the whole bounded by the connect timeout ([`within`]).
//!
//! Every connection is metered: its transport's connections and bytes on the wire go to
//! the run's tally ([`crate::metrics::wires`]), below TLS.
//!
//! Every failure is classified by [`io_error`] (and the TLS handshake's by
//! `tls::classify`), so a name the generator cannot resolve or a source address it cannot
//! bind is never taken for the server refusing or closing anything.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};

use super::io_error;
use super::stamp::Stamp;
#[cfg(feature = "tls")]
use super::tls;
#[cfg(feature = "tls")]
use crate::driver::OptionError;
use crate::driver::{Config, Failure};
use crate::metrics::wires::{Wire, Wires};
use crate::metrics::ErrorKind;

/// How a driver reaches its target: host and port, the source addresses users bind to
/// round-robin, TLS, and the connect time limit. Built once per run.
#[derive(Debug, Clone)]
pub struct Connector {
    /// Host and port (`None`: no URL, as when validating before the embedded server's
    /// address is known).
    target: Option<(String, u16)>,
    /// Local addresses, user `ix` binding `sources[ix % len]` (empty: the system's choice).
    sources: Vec<IpAddr>,
    /// Limit of TCP connect, TLS, the protocol's handshake and login.
    timeout: Duration,
    /// TLS over every connection.
    #[cfg(feature = "tls")]
    tls: Option<tls::Client>,
    /// Where its connections are counted, as which transport.
    meter: Meter,
}

impl Connector {
    /// Plain TCP to the configured endpoint, from the configured source addresses.
    pub fn plain(config: &Config) -> Connector {
        Connector {
            target: match config.relay {
                Some(relay) => Some((relay.ip().to_string(), relay.port())),
                None => config
                    .endpoint
                    .as_ref()
                    .map(|ep| (ep.host.clone(), ep.port)),
            },
            sources: config.source_addrs.clone(),
            timeout: config.connect_timeout,
            #[cfg(feature = "tls")]
            tls: None,
            meter: Meter {
                wires: Some(Arc::clone(&config.wires)),
                wire: Wire::Tcp,
            },
        }
    }

    /// The same, its connections counted as `wire` (framed TCP unless told).
    pub fn carrying(mut self, wire: Wire) -> Connector {
        self.meter.wire = wire;
        self
    }

    /// TCP, with TLS for a TLS URL from the `ca_file` and `server_name` keys of the
    /// driver's `[target.<driver>]` table ([`tls::Client::from_options`]).
    #[cfg(feature = "tls")]
    pub fn new(config: &Config) -> Result<Connector, OptionError> {
        Ok(Connector::plain(config).with_tls(tls::Client::from_options(config)?))
    }

    /// The same with TLS by `client` over every connection (`None`: plain).
    #[cfg(feature = "tls")]
    pub fn with_tls(self, client: Option<tls::Client>) -> Connector {
        Connector {
            tls: client,
            ..self
        }
    }

    /// The same, offering `protocols` by ALPN over TLS (nothing changes for plain TCP).
    #[cfg(feature = "tls")]
    pub fn with_alpn(self, protocols: &[&[u8]]) -> Connector {
        Connector {
            tls: self.tls.as_ref().map(|c| c.with_alpn(protocols)),
            ..self
        }
    }

    /// The connect time limit (drivers bound their login exchange by it too).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Connects user `ix`: TCP from its source address, without Nagle's delay (the drivers
    /// coalesce what they write per flush), then TLS when configured. Not bounded in time
    /// by itself: the driver bounds it with its handshake ([`Connector::within`]).
    pub async fn connect(&self, ix: u32) -> Result<Stream, Failure> {
        let (host, port) = self
            .target
            .as_ref()
            .ok_or_else(|| Failure::new(ErrorKind::Other, "no target URL to connect to"))?;
        let source =
            (!self.sources.is_empty()).then(|| self.sources[ix as usize % self.sources.len()]);
        let tcp = tcp(host, *port, source).await?;
        tcp.set_nodelay(true).map_err(|e| io_error::classify(&e))?;
        self.meter.opened();
        let plain = Stream::Plain(Metered {
            stamp: Stamp::for_socket(&tcp),
            tcp,
            meter: self.meter.clone(),
        });
        #[cfg(feature = "tls")]
        if let Some(client) = &self.tls {
            return plain.start_tls(client).await;
        }
        Ok(plain)
    }

    /// `step` bounded by the connect timeout ([`within`]).
    pub async fn within<T>(
        &self,
        what: &str,
        step: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        within(self.timeout, what, step).await
    }
}

/// `step` (a connect, a handshake, a login) bounded by `limit`: running out is
/// `connect_timeout`, "no WHAT within LIMIT".
pub async fn within<T>(
    limit: Duration,
    what: &str,
    step: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    tokio::time::timeout(limit, step).await.unwrap_or_else(|_| {
        Err(Failure::new(
            ErrorKind::ConnectTimeout,
            format!("no {what} within {limit:?}"),
        ))
    })
}

/// Where a connection's bytes are counted: the run's tally and the transport.
#[derive(Debug, Clone)]
pub struct Meter {
    /// The run's tally (`None`: not counted, as in tests that connect by hand).
    wires: Option<Arc<Wires>>,
    /// Counted as this transport.
    wire: Wire,
}

impl Meter {
    /// A connection opened.
    fn opened(&self) {
        if let Some(w) = &self.wires {
            w.opened(self.wire);
        }
    }

    /// `n` bytes written.
    fn sent(&self, n: usize) {
        if let Some(w) = &self.wires {
            w.sent(self.wire, n);
        }
    }

    /// `n` bytes read.
    pub fn received(&self, n: usize) {
        if let Some(w) = &self.wires {
            w.received(self.wire, n);
        }
    }
}

/// A TCP connection whose bytes are counted by its [`Meter`].
#[derive(Debug)]
pub struct Metered {
    /// The socket (read directly by a driver that waits for readiness: it counts what it
    /// read with `meter`).
    pub tcp: TcpStream,
    /// Where its bytes are counted.
    pub meter: Meter,
    /// Whether reads take the kernel's receive time along, and the last one's.
    stamp: Stamp,
}

impl Metered {
    /// When the bytes of the last read reached this machine's kernel, when the socket
    /// stamps arrivals ([`Stamp`]).
    pub fn arrived(&self) -> Option<std::time::Instant> {
        self.stamp.arrived()
    }

    /// Counts what a write wrote, passing its outcome on.
    fn wrote(&self, written: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = written {
            self.meter.sent(n);
        }
        written
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let read = me.stamp.poll_read(&mut me.tcp, cx, buf);
        me.meter.received(buf.filled().len() - before);
        read
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let written = Pin::new(&mut me.tcp).poll_write(cx, buf);
        me.wrote(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let written = Pin::new(&mut me.tcp).poll_write_vectored(cx, bufs);
        me.wrote(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// The byte stream of a connection: plain TCP, or TLS over it, metered below TLS.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(Metered),
    /// TLS (boxed: the TLS state is large and only some runs use it).
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<Metered>>),
}

impl Stream {
    /// TLS by `client` over this plain connection (at connect, or after a protocol's
    /// STARTTLS).
    #[cfg(feature = "tls")]
    pub async fn start_tls(self, client: &tls::Client) -> Result<Stream, Failure> {
        let Stream::Plain(metered) = self else {
            return Err(Failure::new(ErrorKind::Protocol, "TLS negotiated twice"));
        };
        // Boxed: the TLS handshake's future is most of a plain connection's login
        // otherwise (1.2 KB of every user's login, TLS or not).
        Ok(Stream::Tls(Box::new(
            Box::pin(client.connect(metered)).await?,
        )))
    }
}

impl Stream {
    /// Plain TCP, not counted (a connection made by hand, in tests).
    pub fn unmetered(tcp: TcpStream) -> Stream {
        Stream::Plain(Metered {
            stamp: Stamp::for_socket(&tcp),
            tcp,
            meter: Meter {
                wires: None,
                wire: Wire::Tcp,
            },
        })
    }

    /// When the bytes of the last read reached this machine's kernel, below TLS, when the
    /// socket stamps arrivals ([`Stamp`]).
    pub fn arrived(&self) -> Option<std::time::Instant> {
        match self {
            Stream::Plain(s) => s.arrived(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.get_ref().0.arrived(),
        }
    }

    /// Whether TLS runs over the connection.
    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }

    /// The protocol the server chose by ALPN (`None`: plain, or none chosen).
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Plain(_) => None,
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.get_ref().1.alpn_protocol(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// TCP to `host:port`, from `source` (any free port) when given, trying each address
/// the host resolves to (of the source's family) until one connects.
async fn tcp(host: &str, port: u16, source: Option<IpAddr>) -> Result<TcpStream, Failure> {
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

    fn connector(port: u16, sources: &[&str]) -> Connector {
        Connector {
            target: Some(("127.0.0.1".to_owned(), port)),
            sources: sources.iter().map(|s| s.parse().expect("ip")).collect(),
            timeout: Duration::from_secs(5),
            #[cfg(feature = "tls")]
            tls: None,
            meter: Meter {
                wires: None,
                wire: Wire::Tcp,
            },
        }
    }

    /// Users bind the source addresses round-robin: user `ix` the `ix % len`th.
    #[tokio::test]
    async fn users_bind_their_source_addresses_in_turn() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let c = connector(port, &["127.0.0.2", "127.0.0.3"]);
        for (ix, want) in [(0, "127.0.0.2"), (1, "127.0.0.3"), (2, "127.0.0.2")] {
            let stream = c.connect(ix).await.expect("connect");
            let (_, peer) = listener.accept().await.expect("accept");
            assert_eq!(peer.ip().to_string(), want, "user {ix}");
            assert!(matches!(stream, Stream::Plain(_)));
        }
    }

    /// A step that outlasts the limit is `connect_timeout`, naming what did not come.
    #[tokio::test]
    async fn a_step_past_the_limit_is_a_connect_timeout() {
        let never = std::future::pending::<Result<(), Failure>>();
        let f = within(Duration::from_millis(10), "CONNACK", never)
            .await
            .expect_err("times out");
        assert_eq!(f.kind, ErrorKind::ConnectTimeout);
        assert_eq!(f.detail, "no CONNACK within 10ms");
        let f = Connector {
            target: None,
            ..connector(1, &[])
        }
        .connect(0)
        .await
        .expect_err("no URL");
        assert_eq!(f.detail, "no target URL to connect to");
    }

    /// A source address this host does not have fails the bind, before any packet
    /// leaves; that is the generator's failure, not the server closing anything.
    #[tokio::test]
    async fn a_source_address_not_on_this_host_is_the_generators() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let source = Some("192.0.2.1".parse().expect("TEST-NET-1"));
        let f = tcp("127.0.0.1", port, source)
            .await
            .expect_err("no such source");
        assert_eq!(f.kind, ErrorKind::Generator, "{}", f.detail);
        assert!(
            f.detail
                .starts_with("binding source address 192.0.2.1: the generator ran out of"),
            "{}",
            f.detail
        );
        let ok = tcp("127.0.0.1", port, Some("127.0.0.1".parse().expect("ip"))).await;
        assert!(ok.is_ok(), "{:?}", ok.err());
    }

    /// A name the resolver refuses is the generator's failure. A label of 64 characters is
    /// refused by the resolver itself (labels are at most 63, RFC 1035), so no DNS server is
    /// asked and the test does not depend on one.
    #[tokio::test]
    async fn an_unresolvable_name_is_the_generators() {
        let host = format!("{}.invalid", "a".repeat(64));
        let f = tcp(&host, 80, None).await.expect_err("does not resolve");
        assert_eq!(f.kind, ErrorKind::Generator, "{}", f.detail);
        assert!(f.detail.contains("could not resolve"), "{}", f.detail);
    }

    #[tokio::test]
    async fn a_refused_connection_stays_the_targets() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let f = tcp("127.0.0.1", port, None)
            .await
            .expect_err("nothing listens");
        assert_eq!(f.kind, ErrorKind::ConnectRefused, "{}", f.detail);
    }
}
