//! Server-Sent Events (`u:sse(path)`): a stream's events, cut by the SSE rules and told to
//! the user's transport as frames of kind `"event"`.

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use tokio::sync::mpsc;

use super::super::frame::{Frame, Meta};
use super::Heard;
use crate::driver::Failure;
use crate::metrics::ErrorKind;

/// Reads a Server-Sent Events stream, telling each event that carries data.
pub(super) async fn stream_events(
    mut body: Incoming,
    tell: mpsc::UnboundedSender<Heard>,
    max: usize,
) {
    let mut buf = Vec::new();
    loop {
        let chunk = match body.frame().await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Some(Err(e)) => {
                let _ = tell.send(Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    format!("event stream: {e}"),
                )));
                return;
            }
            None => {
                let _ = tell.send(Err(Failure::new(
                    ErrorKind::ClosedByPeer,
                    "the event stream ended",
                )));
                return;
            }
        };
        buf.extend_from_slice(&chunk);
        while let Some(event) = take_event(&mut buf) {
            if tell.send(Ok(event)).is_err() {
                return;
            }
        }
        if buf.len() > max {
            let _ = tell.send(Err(Failure::new(
                ErrorKind::Protocol,
                format!("an event of more than {max} bytes"),
            )));
            return;
        }
    }
}

/// The first whole event in `buf` (taken out of it) that carries data, by the SSE rules:
/// events end with a blank line; `data:` lines join with a newline, `event:` and `id:`
/// name it, lines starting with `:` are comments.
fn take_event(buf: &mut Vec<u8>) -> Option<Frame> {
    loop {
        let text = String::from_utf8_lossy(buf).replace("\r\n", "\n");
        let end = text.find("\n\n")?;
        let block = text[..end].to_owned();
        let rest = text.as_bytes()[end + 2..].to_vec();
        *buf = rest;
        let (mut data, mut event, mut id) = (Vec::new(), None, None);
        for line in block.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => data.push(value.to_owned()),
                "event" => event = Some(value.to_owned()),
                "id" => id = Some(value.to_owned()),
                _ => {}
            }
        }
        if data.is_empty() {
            continue;
        }
        return Some(Frame {
            bytes: data.join("\n").into_bytes().into(),
            text: true,
            meta: Some(Meta {
                kind: "event",
                status: 200,
                reference: id,
                event,
                headers: http::HeaderMap::new(),
                answer: None,
            }),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_by_blank_lines_with_their_names_and_ids() {
        let mut buf = b": hello\n\nevent: msg\nid: 7\ndata: {\"a\":1}\ndata: more\n\nretry: 5\n\ndata: x\r\n\r\ndata: part"
            .to_vec();
        let first = take_event(&mut buf).expect("an event");
        assert_eq!(first.bytes, &b"{\"a\":1}\nmore"[..]);
        let meta = first.meta.expect("meta");
        assert_eq!(
            (meta.event.as_deref(), meta.reference.as_deref()),
            (Some("msg"), Some("7"))
        );
        let second = take_event(&mut buf).expect("a second event");
        assert_eq!(second.bytes, &b"x"[..]);
        assert!(take_event(&mut buf).is_none(), "an event not ended yet");
        assert_eq!(buf, b"data: part");
    }
}
