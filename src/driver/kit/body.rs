//! [`Body`]: a delivered message body, handed from a driver to the engine without a copy.

use std::fmt;
use std::ops::Range;

use tokio_tungstenite::tungstenite::Utf8Bytes;

/// A delivered message body. A driver that read it from a frame's text hands over a part
/// of that frame ([`Body::within`]): the frame's buffer moves into the body, so a delivery
/// costs no allocation and no copy however large its body. Any other text becomes
/// a body as it is (`From<String>`, no copy either).
#[derive(Clone)]
pub struct Body {
    /// The text the body is part of.
    text: Utf8Bytes,
    /// Where in `text` (on character boundaries).
    range: Range<usize>,
}

impl Body {
    /// Where `part`, a slice borrowed from `frame`, lies in it ([`Body::within`]); any
    /// other `part` is given back as an owned copy.
    pub fn place(frame: &Utf8Bytes, part: &str) -> Result<Place, String> {
        let start = (part.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
        let range = start..start.wrapping_add(part.len());
        match frame.get(range.clone()) {
            Some(inside) if std::ptr::eq(inside, part) => Ok(Place(range)),
            _ => Err(part.to_owned()),
        }
    }

    /// The part of `frame` at `place` ([`Body::place`] of the same frame), keeping the
    /// frame's buffer: no copy, and no reference count taken.
    pub fn within(frame: Utf8Bytes, place: Place) -> Body {
        Body {
            text: frame,
            range: place.0,
        }
    }

    /// The body's text.
    pub fn as_str(&self) -> &str {
        // The range was checked against `text` when the body was made.
        self.text.get(self.range.clone()).unwrap_or_default()
    }
}

/// Where a part of a frame lies in it, on character boundaries ([`Body::place`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place(Range<usize>);

impl From<String> for Body {
    fn from(text: String) -> Self {
        let range = 0..text.len();
        Body {
            text: Utf8Bytes::from(text),
            range,
        }
    }
}

impl From<Utf8Bytes> for Body {
    fn from(text: Utf8Bytes) -> Self {
        let range = 0..text.len();
        Body { text, range }
    }
}

impl From<&str> for Body {
    fn from(text: &str) -> Self {
        Body::from(text.to_owned())
    }
}

impl From<Body> for String {
    fn from(body: Body) -> Self {
        body.as_str().to_owned()
    }
}

impl std::ops::Deref for Body {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Body {}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part of a frame shares the frame's buffer; anything else is copied.
    #[test]
    fn a_part_of_a_frame_shares_its_buffer() {
        let frame = Utf8Bytes::from(r#"{"body":"héllo"}"#.to_owned());
        let part = &frame.as_str()[9..15];
        let at = part.as_ptr();
        let elsewhere = String::from("héllo");
        assert_eq!(Body::place(&frame, &elsewhere), Err(elsewhere.clone()));
        let place = Body::place(&frame, part).expect("a part of the frame");
        let body = Body::within(frame, place);
        assert_eq!(body.as_str(), "héllo");
        assert!(std::ptr::eq(body.as_str().as_ptr(), at));
        assert_eq!(format!("{body:?}"), r#""héllo""#);
        assert_eq!(String::from(body), "héllo");
    }
}
