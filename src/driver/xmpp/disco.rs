//! Finding the server's multi-user chat service (XEP-0030 service discovery) when
//! `muc_domain` is not set: the items of the domain (`disco#items`), then each item's
//! `disco#info`, for the first that is a text conference service speaking
//! `http://jabber.org/protocol/muc` (XEP-0045 §6.1). A server names its MUC service as it
//! likes (`conference.`, `muc.`, `rooms.` …): guessing `conference.<domain>` made every
//! join fail on the others.

use super::codec::{escape, Element};

/// Service discovery: the items of an entity.
pub const ITEMS: &str = "http://jabber.org/protocol/disco#items";
/// Service discovery: what an entity is and speaks.
pub const INFO: &str = "http://jabber.org/protocol/disco#info";

/// The `<iq>` of request `id` asking `to` for `ns` (`ITEMS` or `INFO`).
pub fn query(id: &str, to: &str, ns: &str) -> String {
    format!(
        "<iq type='get' id='{id}' to='{}'><query xmlns='{ns}'/></iq>",
        escape(to)
    )
}

/// The JIDs a `disco#items` result lists, in its order.
pub fn items(result: &Element) -> Vec<String> {
    result
        .child_ns("query", ITEMS)
        .map(|q| {
            q.children
                .iter()
                .filter(|c| c.name == "item")
                .filter_map(|c| c.attr("jid"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a `disco#info` result describes a MUC service: the MUC feature, or a
/// `conference`/`text` identity.
pub fn is_muc(result: &Element) -> bool {
    let Some(q) = result.child_ns("query", INFO) else {
        return false;
    };
    q.children.iter().any(|c| {
        (c.name == "feature" && c.attr("var") == Some(super::ns::MUC))
            || (c.name == "identity"
                && c.attr("category") == Some("conference")
                && c.attr("type") == Some("text"))
    })
}

/// The room JIDs ejabberd and Prosody list under a MUC service are `room@service`; a
/// service itself has no `@`. Only those are worth a `disco#info`.
pub fn is_service(jid: &str) -> bool {
    !jid.contains(['@', '/'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::xmpp::codec::{Framer, Item};

    fn element(xml: &str) -> Element {
        let mut f = Framer::default();
        f.buffer().extend_from_slice(
            format!("<stream:stream xmlns='jabber:client' xmlns:stream='x'>{xml}").as_bytes(),
        );
        assert!(matches!(f.next(1 << 20), Ok(Some(Item::Header(_)))));
        match f.next(1 << 20) {
            Ok(Some(Item::Element(e))) => e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn items_and_muc_services_are_read_from_results() {
        let items_xml = format!(
            "<iq type='result' id='d1'><query xmlns='{ITEMS}'><item jid='upload.example'/>\
             <item jid='rooms.example' name='Chatrooms'/><item jid='lobby@rooms.example'/>\
             </query></iq>"
        );
        let got = items(&element(&items_xml));
        assert_eq!(
            got,
            ["upload.example", "rooms.example", "lobby@rooms.example"]
        );
        let services: Vec<_> = got.iter().filter(|j| is_service(j)).collect();
        assert_eq!(services, ["upload.example", "rooms.example"]);
        let muc = format!(
            "<iq type='result'><query xmlns='{INFO}'><identity category='conference' \
             type='text' name='Chatrooms'/><feature var='http://jabber.org/protocol/muc'/>\
             </query></iq>"
        );
        assert!(is_muc(&element(&muc)));
        let upload = format!(
            "<iq type='result'><query xmlns='{INFO}'><identity category='store' \
             type='file'/><feature var='urn:xmpp:http:upload:0'/></query></iq>"
        );
        assert!(!is_muc(&element(&upload)));
        assert!(!is_muc(&element("<iq type='error'/>")));
        assert!(query("d2", "a'b", INFO).contains("to='a&apos;b'"));
    }
}
