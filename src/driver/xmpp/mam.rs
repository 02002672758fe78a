//! Message Archive Management (XEP-0313) as the driver's "fetch missed" (`fetch = "mam"`):
//! the query for what a user's archive holds after the last message it had, and what one
//! archived message means for the ledger.

use std::hash::BuildHasher;
use std::time::SystemTime;

use super::codec::{escape, Element};

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

/// The two ways a message a user missed can reach it with `fetch = "mam"`: the archive's
/// answer, and a push (offline storage replaying, or live routing) — a message may come
/// both ways, in either order, and reaches the engine once. The first copy is handed out;
/// the second is dropped when it comes:
/// - the offline storage's copy of an archive result, sometimes much later than the fetch
///   (after `offline_quiet` on a slow server, or with the next presence when ejabberd
///   stored the message after the login had emptied the storage);
/// - the archive's copy of a message pushed while the user was fetching, or of an offline
///   copy, which the next query returns again (such a push does not move the archive
///   position: it may be older than what the query has to return).
///
/// A second push of one message is still a second delivery. Bodies are unique (the
/// envelope is in them) and kept by hash until the end of the next fetch, whose presence
/// and query bring the last copies: two fetches' worth at most.
#[derive(Debug, Default)]
pub struct Copies {
    /// Archive results no push has repeated yet.
    archived: Awaited,
    /// Pushes handed out that moved no archive position and that no archive result has
    /// repeated yet.
    pushed: Awaited,
}

impl Copies {
    /// An archive result: true when it is the first copy (hand it out), false when it
    /// repeats a push that moved no archive position.
    pub fn archived(&mut self, body: &str) -> bool {
        let h = hash(body);
        if self.pushed.take(h) {
            return false;
        }
        self.archived.add(h);
        true
    }

    /// Whether a push repeats an archive result no push repeated before (it has been from
    /// now on).
    pub fn repeats(&mut self, body: &str) -> bool {
        !self.archived.is_empty() && self.archived.take(hash(body))
    }

    /// A push handed out that moved no archive position (while fetching, or an offline
    /// copy): the archive may return it later.
    pub fn pushed_unplaced(&mut self, body: &str) {
        self.pushed.add(hash(body));
    }

    /// A fetch is over: the copies of what came before the fetch before it have come.
    pub fn fetch_done(&mut self) {
        self.archived.rotate();
        self.pushed.rotate();
    }
}

/// Copies of messages still awaited from the other way, by body hash: those of the fetch
/// under way (or the last one), and of the fetch before.
#[derive(Debug, Default)]
struct Awaited {
    current: foldhash::HashMap<u64, u32>,
    previous: foldhash::HashMap<u64, u32>,
}

impl Awaited {
    fn add(&mut self, h: u64) {
        *self.current.entry(h).or_default() += 1;
    }

    fn is_empty(&self) -> bool {
        self.current.is_empty() && self.previous.is_empty()
    }

    /// Takes one awaited copy of `h` off; false when there was none.
    fn take(&mut self, h: u64) -> bool {
        take_one(&mut self.current, h) || take_one(&mut self.previous, h)
    }

    fn rotate(&mut self) {
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

/// The hash `Copies` keeps of a body.
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
    fn an_archive_result_is_dropped_once_from_the_pushes() {
        let mut c = Copies::default();
        assert!(!c.repeats("a"), "nothing fetched yet");
        assert!(c.archived("a"));
        assert!(c.archived("b"));
        assert!(!c.repeats("x"));
        assert!(c.repeats("a"), "the offline copy of a fetched message");
        assert!(!c.repeats("a"), "a second push is a second delivery");
        assert!(c.repeats("b"));
    }

    #[test]
    fn a_push_while_fetching_is_dropped_once_from_the_archive() {
        let mut c = Copies::default();
        c.pushed_unplaced("a");
        c.pushed_unplaced("a");
        assert!(!c.archived("a"), "the archive's copy of a push");
        assert!(!c.archived("a"));
        assert!(c.archived("a"), "a third copy");
        assert!(c.archived("b"));
    }

    #[test]
    fn copies_are_awaited_until_the_next_fetch_is_done() {
        let mut c = Copies::default();
        assert!(c.archived("a"));
        assert!(c.archived("b"));
        c.pushed_unplaced("p");
        c.pushed_unplaced("q");
        c.fetch_done();
        assert!(c.repeats("a"), "a copy after the fetch");
        assert!(!c.archived("p"), "returned by the next query");
        assert!(c.archived("c"));
        c.fetch_done();
        assert!(!c.repeats("b"), "the next fetch brought its last copy");
        assert!(c.archived("q"));
        assert!(c.repeats("c"));
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
