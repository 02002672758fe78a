//! Message Archive Management (XEP-0313) as the driver's "fetch missed" (`fetch = "mam"`):
//! the query for what a user's archive holds after the last message it had, and what one
//! archived message means for the ledger.

use std::hash::BuildHasher;
use std::time::SystemTime;

use super::xml::{escape, Element};

/// The MAM namespace (version 2, as ejabberd and Prosody serve it).
pub const NS: &str = "urn:xmpp:mam:2";
/// Result set management (XEP-0059): paging through the archive.
const RSM: &str = "http://jabber.org/protocol/rsm";
/// Stanza forwarding (XEP-0297): an archived message inside a result.
const FORWARD: &str = "urn:xmpp:forward:0";
/// Unique and stable stanza ids (XEP-0359): the archive id of a live message.
const SID: &str = "urn:xmpp:sid:0";
/// Messages asked for per page.
const PAGE: u32 = 250;

/// Where a query starts in the archive.
#[derive(Debug, Clone, Copy)]
pub enum Since<'a> {
    /// After the archived message with this id (the last one the user had).
    After(&'a str),
    /// From this moment on (a user that never had an archived message: the run's start).
    Time(SystemTime),
}

/// The `<iq>` of query `id`: a page of the archive from `since` on.
pub fn query(id: &str, since: Since<'_>) -> String {
    let (start, after) = match since {
        Since::After(a) => (String::new(), format!("<after>{}</after>", escape(a))),
        Since::Time(t) => (
            format!(
                "<field var='start'><value>{}</value></field>",
                humantime::format_rfc3339_seconds(t)
            ),
            String::new(),
        ),
    };
    format!(
        "<iq type='set' id='{id}'><query xmlns='{NS}' queryid='{id}'>\
         <x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE' type='hidden'>\
         <value>{NS}</value></field>{start}</x>\
         <set xmlns='{RSM}'><max>{PAGE}</max>{after}</set></query></iq>"
    )
}

/// One message of a query's result.
#[derive(Debug, PartialEq, Eq)]
pub struct Archived {
    /// Its id in the archive.
    pub id: String,
    /// Its body, when another user sent it to this one in 1:1 chat (the archive also holds
    /// the user's own messages; rooms come back through their history instead).
    pub body: Option<String>,
}

/// The archived message `e` carries when it is a result of query `qid` for `me` (a bare
/// JID).
pub fn result(e: &Element, qid: &str, me: &str) -> Option<Archived> {
    let r = e.child_ns("result", NS)?;
    if r.attr("queryid") != Some(qid) {
        return None;
    }
    let id = r.attr("id")?.to_owned();
    let msg = r.child_ns("forwarded", FORWARD)?.child("message")?;
    let from = msg.attr("from").unwrap_or_default();
    let from_me = bare(from).eq_ignore_ascii_case(me);
    let body = match msg.attr("type") {
        Some("groupchat" | "error") => None,
        _ if from_me => None,
        _ => msg.child("body").map(|b| b.text.clone()),
    };
    Some(Archived { id, body })
}

/// Whether `iq` ends query `id`: `Some(true)` when the archive has no more pages.
pub fn fin(iq: &Element) -> Option<bool> {
    let fin = iq.child_ns("fin", NS)?;
    Some(matches!(fin.attr("complete"), Some("true" | "1")))
}

/// The id `me`'s archive gave the live message `e` (XEP-0359 `<stanza-id by=me>`).
pub fn stanza_id<'a>(e: &'a Element, me: &str) -> Option<&'a str> {
    e.children
        .iter()
        .find(|c| {
            c.name == "stanza-id"
                && c.attr("xmlns") == Some(SID)
                && c.attr("by").is_some_and(|by| by.eq_ignore_ascii_case(me))
        })
        .and_then(|c| c.attr("id"))
}

/// The messages a user's archive returned that no push has repeated yet, by a hash of
/// their bodies (unique, with the envelope in them). The offline storage pushes its own
/// copy of each of them, sometimes much later: after `offline_quiet` ended the fetch on a
/// slow server, or at the next initial presence when ejabberd stored the message after
/// the login had emptied the storage. Such a copy is the same message, not a second
/// delivery; a second push of one message still is one. Kept until the end of the next
/// fetch, whose presence brings the last copies: two fetches' results at most.
#[derive(Debug, Default)]
pub struct Fetched {
    /// How many copies of each body the fetch under way (or the last one) returned that
    /// no push has repeated yet.
    current: foldhash::HashMap<u64, u32>,
    /// The same for the fetch before.
    previous: foldhash::HashMap<u64, u32>,
}

impl Fetched {
    /// Remembers a body the archive returned.
    pub fn add(&mut self, body: &str) {
        *self.current.entry(hash(body)).or_default() += 1;
    }

    /// Whether a pushed `body` repeats a fetched message that no push repeated before (it
    /// has been from now on).
    pub fn repeats(&mut self, body: &str) -> bool {
        if self.current.is_empty() && self.previous.is_empty() {
            return false;
        }
        let h = hash(body);
        take_one(&mut self.current, h) || take_one(&mut self.previous, h)
    }

    /// A fetch is over: the copies of what the one before it returned came with its
    /// presence, at the latest.
    pub fn fetch_done(&mut self) {
        self.previous = std::mem::take(&mut self.current);
    }
}

/// Takes one copy of hash `h` off `left`; false when there was none.
fn take_one(left: &mut foldhash::HashMap<u64, u32>, h: u64) -> bool {
    match left.get_mut(&h) {
        Some(n) if *n > 1 => *n -= 1,
        Some(_) => {
            left.remove(&h);
        }
        None => return false,
    }
    true
}

/// The hash `Fetched` keeps of a body.
fn hash(body: &str) -> u64 {
    foldhash::fast::FixedState::default().hash_one(body)
}

/// `user@domain` of `user@domain/resource`.
fn bare(jid: &str) -> &str {
    jid.split_once('/').map_or(jid, |(b, _)| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fetched_body_is_repeated_once_by_pushes() {
        let mut f = Fetched::default();
        assert!(!f.repeats("a"), "nothing fetched yet");
        f.add("a");
        f.add("b");
        assert!(!f.repeats("c"));
        assert!(f.repeats("a"), "the offline copy of a fetched message");
        assert!(!f.repeats("a"), "a second push is a second delivery");
        assert!(f.repeats("b"));
    }

    #[test]
    fn fetched_bodies_are_kept_until_the_next_fetch_is_done() {
        let mut f = Fetched::default();
        f.add("a");
        f.add("b");
        f.fetch_done();
        assert!(f.repeats("a"), "a copy after the fetch");
        f.add("c");
        f.fetch_done();
        assert!(
            !f.repeats("b"),
            "the next fetch's presence brought its last copy"
        );
        assert!(f.repeats("c"));
    }

    fn el(name: &str, attrs: &[(&str, &str)], children: Vec<Element>, text: &str) -> Element {
        Element {
            name: name.to_owned(),
            attrs: attrs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            children,
            text: text.to_owned(),
        }
    }

    fn archived(qid: &str, from: &str, kind: &str) -> Element {
        let body = el("body", &[], vec![], "hello");
        let msg = el("message", &[("from", from), ("type", kind)], vec![body], "");
        let fwd = el("forwarded", &[("xmlns", FORWARD)], vec![msg], "");
        let result = el(
            "result",
            &[("xmlns", NS), ("queryid", qid), ("id", "A1")],
            vec![fwd],
            "",
        );
        el("message", &[], vec![result], "")
    }

    #[test]
    fn results_keep_what_others_sent_in_chat() {
        let me = "u1@localhost";
        let got = result(&archived("q1", "u2@localhost/r", "chat"), "q1", me);
        assert_eq!(
            got,
            Some(Archived {
                id: "A1".to_owned(),
                body: Some("hello".to_owned())
            })
        );
        // Another query's result is not ours; our own messages and rooms carry no body.
        assert_eq!(
            result(&archived("q1", "u2@localhost", "chat"), "q2", me),
            None
        );
        for (from, kind) in [("U1@localhost/r", "chat"), ("room@c/nick", "groupchat")] {
            let got = result(&archived("q1", from, kind), "q1", me).expect("a result");
            assert_eq!(got.body, None, "{from} {kind}");
        }
    }

    #[test]
    fn queries_start_after_an_id_or_at_a_time() {
        let q = query("q1", Since::After("A<1"));
        assert!(
            q.contains("<after>A&lt;1</after>") && !q.contains("'start'"),
            "{q}"
        );
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(86_400);
        let q = query("q1", Since::Time(t));
        assert!(q.contains("<value>1970-01-02T00:00:00Z</value>"), "{q}");
        assert!(
            q.contains("queryid='q1'") && q.contains("<max>250</max>"),
            "{q}"
        );
    }

    #[test]
    fn stanza_ids_are_those_of_our_archive() {
        let sid = |by| {
            el(
                "stanza-id",
                &[("xmlns", SID), ("by", by), ("id", "S9")],
                vec![],
                "",
            )
        };
        let m = el("message", &[], vec![sid("room@c"), sid("u1@localhost")], "");
        assert_eq!(stanza_id(&m, "u1@localhost"), Some("S9"));
        assert_eq!(stanza_id(&m, "u2@localhost"), None);
        let fin_el = el("fin", &[("xmlns", NS), ("complete", "true")], vec![], "");
        assert_eq!(fin(&el("iq", &[], vec![fin_el], "")), Some(true));
    }
}
