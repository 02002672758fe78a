//! One HTTP/1.1 request over a fresh connection with hyper's client: what the scraper's GET
//! and the remote-write POST share (connect, handshake, send; the connection's task is
//! stopped once the answer's body has been read).

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes};
use hyper_util::rt::TokioIo;

/// Sends `request` (its path and query) to `uri`'s host and port (80 by default) with the
/// `Host` header set, and returns the status and up to `max_body` bytes of the answer.
pub async fn send<B>(
    uri: &http::Uri,
    request: http::request::Builder,
    body: B,
    max_body: usize,
) -> Result<(http::StatusCode, Bytes), String>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let host = uri.host().ok_or("the URL has no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let conn = tokio::spawn(conn);
    let authority = uri.authority().map_or(host, |a| a.as_str());
    let request = request
        .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(http::header::HOST, authority)
        .body(body)
        .map_err(|e| format!("bad request: {e}"))?;
    let answer = async {
        let r = sender
            .send_request(request)
            .await
            .map_err(|e| format!("HTTP request: {e}"))?;
        let status = r.status();
        let body = http_body_util::Limited::new(r.into_body(), max_body)
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?;
        Ok((status, body.to_bytes()))
    }
    .await;
    conn.abort();
    answer
}
