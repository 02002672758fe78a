//! The XML stream of one XMPP connection: bytes in, whole top-level elements out.
//!
//! An XMPP stream is one XML document that never ends while the connection lives: the
//! `<stream:stream>` root opens, then each stanza (and each SASL or stream-management
//! element) is a complete child of it. [`Framer`] cuts that document into those children.
//! quick-xml does the XML; this module only keeps the bytes of an element that has not
//! fully arrived and parses it again once more bytes are in — except when the parse
//! stopped in an element's text and the new bytes hold no `<` or `>`: more text, which
//! can neither complete the element nor break it (a large body arriving in many reads is
//! parsed again only when markup arrives, not once per read). Stanzas are small, so parsing a partial one again costs less than keeping a
//! parser's state across reads, and it keeps [`Framer`] a plain buffer that a cancelled
//! read can never leave half-updated.
//!
//! Elements become a small tree ([`Element`]) with local names: the driver tells stream
//! elements from stanzas by their place (top level) and name, so it needs no namespace
//! resolution beyond the `xmlns` attribute, which is kept as an attribute.

use quick_xml::errors::{Error as XmlError, SyntaxError};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

/// One element: local name, attributes (as written, unescaped), children and text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    /// Local name (`message`, `features`, `a`…), without a prefix.
    pub name: String,
    /// Attributes in document order, qualified names as written (`xmlns`, `xml:lang`).
    pub attrs: Vec<(String, String)>,
    /// Child elements.
    pub children: Vec<Element>,
    /// The text directly inside, unescaped and concatenated.
    pub text: String,
}

impl Element {
    /// The value of attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first child called `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The first child called `name` with namespace `ns`.
    pub fn child_ns(&self, name: &str, ns: &str) -> Option<&Element> {
        self.children
            .iter()
            .find(|c| c.name == name && c.attr("xmlns") == Some(ns))
    }
}

/// What the stream produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// The server's `<stream:stream>` opening, with its attributes.
    Header(Element),
    /// A complete top-level element.
    Element(Element),
    /// `</stream:stream>`: the server ended the stream.
    End,
}

/// Cuts a byte stream into [`Item`]s.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// The stream header has been read (cleared on a stream restart).
    open: bool,
    /// The stream's first bytes were looked at for a byte order mark (cleared on a
    /// restart).
    started: bool,
    /// The buffer's length when the last parse stopped in an element's text waiting for
    /// more bytes; 0 when it did not.
    waiting_inside: usize,
}

/// How a parse of the buffer ended.
enum Parsed {
    /// A complete item and the bytes it used.
    Item(Item, usize),
    /// More bytes are needed; `inside` when the parse stopped in an element's text, where
    /// only markup can complete anything or reveal an error.
    Wait { inside: bool },
}

/// The longest element (or unfinished element) the framer holds on top of the largest
/// body: past it the server is sending something no chat client would accept.
const SLACK: usize = 64 * 1024;

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Framer {
    /// Room for more bytes: the read appends to this buffer.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Expects a new stream header (after STARTTLS or SASL success).
    pub fn restart(&mut self) {
        self.open = false;
        self.started = false;
        self.buf.clear();
        self.waiting_inside = 0;
    }

    /// The next complete item, `Ok(None)` when more bytes are needed. An error is a stream
    /// that is not XML, or an element larger than `max_body` plus some slack.
    pub fn next(&mut self, max_body: usize) -> Result<Option<Item>, String> {
        if !self.started {
            if BOM.starts_with(&self.buf) && self.buf.len() < BOM.len() {
                return Ok(None);
            }
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
            self.started = true;
        }
        let parsed = if self.nothing_new_can_end() {
            Parsed::Wait { inside: true }
        } else {
            self.parse()?
        };
        self.waiting_inside = 0;
        match parsed {
            Parsed::Item(item, used) => {
                self.buf.drain(..used);
                if matches!(item, Item::Header(_)) {
                    self.open = true;
                }
                Ok(Some(item))
            }
            Parsed::Wait { .. } if self.buf.len() > max_body + SLACK => Err(format!(
                "an element of over {} bytes (larger than any message of this run)",
                self.buf.len()
            )),
            Parsed::Wait { inside } => {
                if inside {
                    self.waiting_inside = self.buf.len();
                }
                Ok(None)
            }
        }
    }

    /// The last parse stopped in an element's text and only text came since (no `<` or
    /// `>`): parsing again would wait again. Inside markup (a tag, a comment, `<!…`) a
    /// parse can fail on bytes before the `>`, so there it always parses again.
    fn nothing_new_can_end(&self) -> bool {
        self.waiting_inside > 0
            && self
                .buf
                .get(self.waiting_inside..)
                .is_some_and(|new| !new.iter().any(|b| matches!(b, b'<' | b'>')))
    }

    /// Parses one item from the start of the buffer.
    fn parse(&self) -> Result<Parsed, String> {
        // quick-xml skips a byte order mark at the start of what it reads without counting
        // it in its position: the framer takes the one that may open the stream off itself
        // (`next`); any later one is text between elements, in one read or cut.
        if self.buf.starts_with(BOM) {
            return Err(
                "the stream is not well-formed XML: text between stanzas: a byte order mark"
                    .to_owned(),
            );
        }
        let mut reader = Reader::from_reader(self.buf.as_slice());
        let config = reader.config_mut();
        config.check_end_names = false;
        // `</stream:stream>` closes a root this reader (started after it) never saw.
        config.allow_unmatched_ends = true;
        let mut stack: Vec<Element> = Vec::new();
        loop {
            let ev = match reader.read_event() {
                Ok(ev) => ev,
                // The input ends inside markup: the rest has not arrived yet.
                Err(XmlError::Syntax(
                    SyntaxError::UnclosedTag
                    | SyntaxError::UnclosedComment
                    | SyntaxError::UnclosedCData
                    | SyntaxError::UnclosedPIOrXmlDecl
                    | SyntaxError::InvalidBangMarkup,
                )) => return Ok(Parsed::Wait { inside: false }),
                Err(e) => return Err(format!("the stream is not well-formed XML: {e}")),
            };
            let used = reader.buffer_position() as usize;
            match ev {
                Event::Eof => {
                    return Ok(Parsed::Wait {
                        inside: !stack.is_empty(),
                    })
                }
                Event::Start(s) if !self.open && stack.is_empty() => {
                    return Ok(Parsed::Item(Item::Header(element(&s)?), used));
                }
                Event::Start(s) => stack.push(element(&s)?),
                Event::Empty(s) => {
                    if let Some(el) = place(&mut stack, element(&s)?) {
                        return Ok(Parsed::Item(Item::Element(el), used));
                    }
                }
                Event::End(_) => match stack.pop() {
                    None => return Ok(Parsed::Item(Item::End, used)),
                    Some(mut el) => {
                        el.text = unescape(&el.text)?;
                        if let Some(el) = place(&mut stack, el) {
                            return Ok(Parsed::Item(Item::Element(el), used));
                        }
                    }
                },
                Event::Text(t) => text(&mut stack, &t)?,
                Event::CData(t) => {
                    if let Some(el) = stack.last_mut() {
                        el.text
                            .push_str(&quick_xml::escape::escape(String::from_utf8_lossy(&t)));
                    }
                }
                // The XML declaration, comments, processing instructions, whitespace
                // between stanzas (keep-alives): nothing to keep.
                Event::Decl(_) | Event::Comment(_) | Event::PI(_) | Event::DocType(_) => {}
            }
        }
    }
}

/// `el`, complete: a child of the element open around it, or a stanza when none is.
fn place(stack: &mut [Element], el: Element) -> Option<Element> {
    match stack.last_mut() {
        Some(parent) => {
            parent.children.push(el);
            None
        }
        None => Some(el),
    }
}

/// Text, kept raw in the element open around it until that ends (text cut by the end of
/// the input may end in half an entity); between stanzas only whitespace may come
/// (keep-alives).
fn text(stack: &mut [Element], t: &[u8]) -> Result<(), String> {
    match stack.last_mut() {
        Some(el) => el.text.push_str(&String::from_utf8_lossy(t)),
        None if t.iter().all(u8::is_ascii_whitespace) => {}
        None => {
            return Err(format!(
                "the stream is not well-formed XML: text between stanzas: {}",
                String::from_utf8_lossy(t)
                    .chars()
                    .take(40)
                    .collect::<String>()
            ))
        }
    }
    Ok(())
}

/// An element from its start tag.
fn element(s: &BytesStart<'_>) -> Result<Element, String> {
    if !is_name(s.name().as_ref()) {
        return Err(format!(
            "the stream is not well-formed XML: bad element name `{}`",
            String::from_utf8_lossy(s.name().as_ref())
        ));
    }
    let name = String::from_utf8_lossy(s.local_name().as_ref()).into_owned();
    let mut attrs = Vec::new();
    for a in s.attributes() {
        let a = a.map_err(|e| format!("bad attribute in <{name}>: {e}"))?;
        let value = a
            .unescape_value()
            .map_err(|e| format!("bad attribute in <{name}>: {e}"))?;
        attrs.push((
            String::from_utf8_lossy(a.key.as_ref()).into_owned(),
            value.into_owned(),
        ));
    }
    Ok(Element {
        name,
        attrs,
        children: Vec::new(),
        text: String::new(),
    })
}

/// Whether `name` is an XML name (quick-xml takes whatever stands between `<` and a space,
/// `/` or `>`): a letter, `_`, `:` or a non-ASCII character first, then those, digits,
/// `-` and `.`.
fn is_name(name: &[u8]) -> bool {
    let start = |b: &u8| b.is_ascii_alphabetic() || matches!(b, b'_' | b':') || !b.is_ascii();
    match name.split_first() {
        Some((first, rest)) => {
            start(first)
                && rest
                    .iter()
                    .all(|b| start(b) || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
        }
        None => false,
    }
}

fn unescape(raw: &str) -> Result<String, String> {
    quick_xml::escape::unescape(raw)
        .map(|s| s.into_owned())
        .map_err(|e| format!("bad text: {e}"))
}

/// `s` escaped for text or a quoted attribute.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(f: &mut Framer, bytes: &str) -> Vec<Item> {
        f.buffer().extend_from_slice(bytes.as_bytes());
        let mut out = Vec::new();
        while let Some(item) = f.next(1024).expect("well-formed") {
            out.push(item);
        }
        out
    }

    #[test]
    fn cuts_a_stream_into_elements_across_reads() {
        let mut f = Framer::default();
        let head = "<?xml version='1.0'?><stream:stream xmlns='jabber:client' \
                    xmlns:stream='http://etherx.jabber.org/streams' id='x1' version='1.0'>";
        let items = feed(&mut f, head);
        assert!(matches!(&items[..], [Item::Header(h)] if h.attr("id") == Some("x1")));
        assert!(feed(&mut f, " <message to='a'><body>1 &amp; 2 &l").is_empty());
        let items = feed(&mut f, "t; 3</body></message><r xmlns='urn:xmpp:sm:3'/>");
        let [Item::Element(m), Item::Element(r)] = &items[..] else {
            panic!("{items:?}")
        };
        assert_eq!(m.child("body").map(|b| b.text.as_str()), Some("1 & 2 < 3"));
        assert_eq!(r.name, "r");
        assert_eq!(feed(&mut f, "</stream:stream>"), vec![Item::End]);
    }

    #[test]
    fn a_huge_element_or_bad_xml_is_an_error() {
        let mut f = Framer {
            open: true,
            ..Framer::default()
        };
        f.buffer().extend_from_slice(b"<message>");
        f.buffer().extend_from_slice(&vec![b'x'; 200 * 1024]);
        assert!(f.next(1024).is_err());
        let mut f = Framer {
            open: true,
            ..Framer::default()
        };
        f.buffer().extend_from_slice(b"<a>&bogus;</a>");
        assert!(f.next(1024).is_err());
    }

    /// Garbage a server sends is an error, not an element with a strange name or text
    /// dropped between stanzas (`<<garbage` before an `<iq>` made an element
    /// `<garbage<iq` that passed for the answer to the registration).
    #[test]
    fn garbage_between_stanzas_is_an_error() {
        for garbage in ["<<garbage<iq type='result'/>", "garbage<iq type='result'/>"] {
            let mut f = Framer {
                open: true,
                ..Framer::default()
            };
            f.buffer().extend_from_slice(garbage.as_bytes());
            let err = f.next(1024).expect_err(garbage);
            assert!(
                err.starts_with("the stream is not well-formed XML"),
                "{err}"
            );
        }
        let mut f = Framer {
            open: true,
            ..Framer::default()
        };
        assert_eq!(
            feed(&mut f, " \n\t<stream:error><x-y.z_1/></stream:error>").len(),
            1
        );
    }

    /// Every item and error alike whether the stream comes whole or a byte at a time: the
    /// framer skips parses only where nothing but markup could change the answer, and a
    /// byte order mark after the header is an error in one read as in three (fuzzing found
    /// both).
    #[test]
    fn byte_by_byte_reads_give_what_one_read_gives() {
        let cases = [
            "<a b='x>y'>t<!-- c>d --><![CDATA[e>f]]></a>",
            "<message><body>long text without an end</body></message><r/>",
            " \n<x/> tail",
            "<a><b/></a><c attr=\"q\"/></stream:stream>",
            "<a>&amp;&bogus;</a>",
            "\u{feff}<x/>",
            "<a>text<!DCTA[`[x<y]-& compl\0am:",
            "<x/>\u{feff}\u{feff}<y/>",
        ];
        for case in cases {
            let run = |step: usize| {
                let mut f = Framer {
                    open: true,
                    ..Framer::default()
                };
                let mut items = Vec::new();
                for piece in case.as_bytes().chunks(step) {
                    f.buffer().extend_from_slice(piece);
                    loop {
                        match f.next(1024) {
                            Ok(Some(item)) => items.push(item),
                            Ok(None) => break,
                            Err(_) => return (items, true),
                        }
                    }
                }
                (items, false)
            };
            assert_eq!(run(1), run(case.len()), "{case}");
        }
    }

    /// A byte order mark before the header is skipped, whole or cut in the middle.
    #[test]
    fn a_byte_order_mark_may_start_the_stream() {
        for step in [1, 2, 64] {
            let mut f = Framer::default();
            let mut items = Vec::new();
            for piece in "\u{feff}<stream:stream id='s'>".as_bytes().chunks(step) {
                f.buffer().extend_from_slice(piece);
                while let Some(item) = f.next(1024).expect("well-formed") {
                    items.push(item);
                }
            }
            assert!(
                matches!(&items[..], [Item::Header(h)] if h.attr("id") == Some("s")),
                "{step}: {items:?}"
            );
        }
    }

    /// Only the stream's first bytes may be a byte order mark: a second one is text,
    /// whole or cut (fuzzing found two read as one).
    #[test]
    fn a_second_byte_order_mark_is_an_error() {
        for step in [1, 2, 64] {
            let mut f = Framer::default();
            let mut failed = false;
            for piece in "\u{feff}\u{feff}<stream:stream id='s'>"
                .as_bytes()
                .chunks(step)
            {
                f.buffer().extend_from_slice(piece);
                if f.next(1024).is_err() {
                    failed = true;
                    break;
                }
            }
            assert!(failed, "step {step}");
        }
    }
}
