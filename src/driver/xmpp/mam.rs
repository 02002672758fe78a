//! Message Archive Management (XEP-0313) as the driver's "fetch missed" (`fetch = "mam"`):
//! the query for what a user's archive holds after the last message it had, and what one
//! archived message means for the ledger.

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

/// `user@domain` of `user@domain/resource`.
fn bare(jid: &str) -> &str {
    jid.split_once('/').map_or(jid, |(b, _)| b)
}

#[cfg(test)]
mod tests {
    use super::*;

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
