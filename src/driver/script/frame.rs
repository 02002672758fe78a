//! What the script driver's transports carry: a frame, and for HTTP where it came from.
//! A leaf of the driver: the socket links and the HTTP transport both hand frames out.

use std::sync::Arc;

use hyper::body::Bytes;

use super::answers::AnswerShape;

/// A frame in or out: its bytes and whether it is text.
#[derive(Debug)]
pub struct Frame {
    /// The frame (an HTTP answer's body as the transport read it).
    pub bytes: Bytes,
    /// A text frame (WebSocket text, or a delimited TCP frame); on HTTP, where `meta`
    /// says what a frame is, whether its body is UTF-8 is not looked at.
    pub text: bool,
    /// Where an HTTP transport's frame came from (`None` on a socket).
    pub meta: Option<Meta>,
}

/// What an HTTP transport says of a frame besides its bytes: `receive`'s fourth argument.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `"response"` (to `u:request`), `"poll"` (to `poll(u)`) or `"event"` (an event of
    /// `u:sse`): `receive`'s `kind`.
    pub kind: &'static str,
    /// The HTTP status (200 for an event).
    pub status: u16,
    /// The reference `u:request` gave, or an event's `id`.
    pub reference: Option<String>,
    /// An event's `event` name.
    pub event: Option<String>,
    /// The answer's headers (none for an event).
    pub headers: http::HeaderMap,
    /// How msgstorm judges a 2xx answer itself (`u:request`'s `answer`), if the script said.
    pub answer: Option<Arc<AnswerShape>>,
}
