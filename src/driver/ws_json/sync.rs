//! Fetching missed messages (`[target.ws-json.sync]`): the user's conversations, then pages
//! of each after the sequence number up to which the user has everything ([`Cursors`]),
//! following `page_more` (a flag, or a cursor passed on as `{next}`); then the user's
//! stored read receipts (`sync.receipts`), paged the same way after the last one seen; and
//! noting, before traffic, where each conversation and the receipts stand
//! ([`Session::skip_history`]).
//!
//! [`Session::skip_history`]: crate::driver::Session::skip_history

use std::sync::Arc;

use serde_json::value::RawValue;

use super::options;
use super::signals::RECEIPTS;
use super::WsJsonSession;
use crate::driver::kit::cursors::Cursors;
use crate::driver::kit::json_map::path::Path;
use crate::driver::kit::json_map::template::{Template, Values};
use crate::driver::kit::json_map::{clip, path, text_of};
use crate::driver::Failure;
use crate::metrics::ErrorKind;

impl WsJsonSession {
    /// [`Session::skip_history`]: each conversation's latest sequence number from the
    /// listing (`list_last`), or, without it, found by paging once to the end.
    ///
    /// [`Session::skip_history`]: crate::driver::Session::skip_history
    pub(super) async fn note_history(&mut self) -> Result<(), Failure> {
        for (conv, last) in self.conversations().await? {
            match last {
                Some(last) => self.st.cursors.cover(&conv, last),
                None => self.read_conv(&conv, None, None).await?,
            }
        }
        self.read_receipts(None).await
    }

    /// [`Session::fetch_missed`]: every conversation read on from where the user has
    /// everything.
    ///
    /// [`Session::fetch_missed`]: crate::driver::Session::fetch_missed
    pub(super) async fn fetch(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        for (conv, last) in self.conversations().await? {
            self.read_conv(&conv, last, Some(out)).await?;
        }
        self.read_receipts(Some(out)).await
    }

    /// The conversations to sync and their latest sequence numbers (when known).
    async fn conversations(&mut self) -> Result<Vec<(String, Option<u64>)>, Failure> {
        let opts = Arc::clone(&self.opts);
        let Some(sync) = &opts.sync else {
            return Ok(Vec::new());
        };
        let user = self.st.user.clone();
        let vals = Values {
            user: &user,
            ..Values::default()
        };
        let Some(list) = &sync.list else {
            let mut convs: Vec<(String, Option<u64>)> = sync
                .convs
                .iter()
                .map(|t| (t.fill(&vals, 0), None))
                .collect();
            if let Some(g) = &sync.group_conv {
                for group in &self.st.groups {
                    let v = Values { group, ..vals };
                    convs.push((g.fill(&v, 0), None));
                }
            }
            return Ok(convs);
        };
        let reply = self.call(&list.request, vals).await?;
        if let Some(reason) = opts.error_of(&reply) {
            return Err(Failure::new(ErrorKind::Protocol, reason));
        }
        let root = path::parse(&reply).map_err(|e| unreadable(&e, &reply))?;
        list.items.with_items(root, |items| match items {
            Some(Some(items)) => items
                .iter()
                .map(|item| match list.conv.string(item) {
                    Some(c) => Ok((c, list.last.as_ref().and_then(|p| p.u64(item)))),
                    None => Err(Failure::new(
                        ErrorKind::Protocol,
                        format!("no conversation at `{}` in {}", list.conv, clip(item.get())),
                    )),
                })
                .collect(),
            _ => Err(Failure::new(
                ErrorKind::Protocol,
                format!("no array at `{}` in {}", list.items, clip(&reply)),
            )),
        })
    }
    /// Pages through `conv` after the sequence number up to which the user has everything
    /// ([`Cursors`]), up to `last` when the listing gave it, handing what was not seen yet
    /// to `out` — or, without `out`, only noting how far the conversation goes.
    async fn read_conv(
        &mut self,
        conv: &str,
        last: Option<u64>,
        out: Option<&mut Vec<String>>,
    ) -> Result<(), Failure> {
        let opts = Arc::clone(&self.opts);
        let Some(sync) = &opts.sync else {
            return Ok(());
        };
        let pages = Pages {
            items: &sync.page_items,
            holder: sync.page_items_holder.as_ref(),
            key: "page_items",
            body: &sync.item_body,
            seq: &sync.item_seq,
            from: sync.item_from.as_ref(),
        };
        self.read_pages(&sync.page, &pages, conv, last, out).await
    }

    /// Pages through the user's stored read receipts (`sync.receipts`) after the last one
    /// seen, as [`Self::read_conv`] pages a conversation: their tokens to `out`.
    async fn read_receipts(&mut self, out: Option<&mut Vec<String>>) -> Result<(), Failure> {
        let opts = Arc::clone(&self.opts);
        let Some(r) = opts.sync.as_ref().and_then(|s| s.receipts.as_ref()) else {
            return Ok(());
        };
        let pages = Pages {
            items: &r.items,
            holder: r.items_holder.as_ref(),
            key: "receipts_items",
            body: &r.token,
            seq: &r.seq,
            from: None,
        };
        self.read_pages(&r.page, &pages, RECEIPTS, None, out).await
    }

    /// Requests pages of `key` (a conversation, or the receipt inbox) with `request` after
    /// the sequence number up to which the user has everything, up to `last` when known.
    async fn read_pages(
        &mut self,
        request: &Template,
        pages: &Pages<'_>,
        key: &str,
        last: Option<u64>,
        mut out: Option<&mut Vec<String>>,
    ) -> Result<(), Failure> {
        let opts = Arc::clone(&self.opts);
        let Some(sync) = &opts.sync else {
            return Ok(());
        };
        let user = self.st.user.clone();
        let mut after = self.st.cursors.upto(key);
        let mut next = String::new();
        while last.is_none_or(|l| after < l) {
            let vals = Values {
                user: &user,
                conv: key,
                after,
                next: &next,
                ..Values::default()
            };
            let reply = self.call(request, vals).await?;
            if let Some(reason) = opts.error_of(&reply) {
                let what = if key == RECEIPTS { "receipts" } else { key };
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    format!("sync of {what}: {reason}"),
                ));
            }
            let root = path::parse(&reply).map_err(|e| unreadable(&e, &reply))?;
            let cursors = &mut self.st.cursors;
            let top = items_of(pages, root, &reply, |items| {
                page(pages, items, key, &user, after, cursors, out.as_deref_mut())
            })?;
            // A page holds every message between its ends, whatever their numbers.
            cursors.cover(key, top);
            let more;
            (more, next) = more_of(sync, root);
            if top <= after || !more {
                break;
            }
            after = top;
        }
        Ok(())
    }
}

/// How the items of one kind of page are read.
struct Pages<'a> {
    /// Where the array is in the reply.
    items: &'a Path,
    /// What holds `items` when it has more than one step.
    holder: Option<&'a Path>,
    /// The option naming `items`, for errors.
    key: &'static str,
    /// Where an item's body (or token) is.
    body: &'a Path,
    /// Where an item's sequence number is.
    seq: &'a Path,
    /// Where an item's sender is.
    from: Option<&'a Path>,
}

/// Takes the messages of one sync page of `conv` (what was not seen yet into `out`, when
/// given) and returns the highest sequence number in it (`after` when it is empty).
fn page(
    sync: &Pages<'_>,
    items: &[&RawValue],
    conv: &str,
    user: &str,
    after: u64,
    cursors: &mut Cursors,
    mut out: Option<&mut Vec<String>>,
) -> Result<u64, Failure> {
    let mut top = after;
    for item in items {
        let Some(seq) = sync.seq.u64(item) else {
            return Err(Failure::new(
                ErrorKind::Protocol,
                format!(
                    "no sequence number at `{}` in {}",
                    sync.seq,
                    clip(item.get())
                ),
            ));
        };
        top = top.max(seq);
        let Some(out) = out.as_deref_mut() else {
            continue;
        };
        let own = sync
            .from
            .is_some_and(|p| p.string(item).is_some_and(|f| f == user));
        if cursors.with(conv, |s| s.mark(seq)) && !own {
            match sync.body.with(item, |v| v.map(text_of)) {
                Some(body) => out.push(body),
                None => {
                    return Err(Failure::new(
                        ErrorKind::Protocol,
                        format!("no body at `{}` in {}", sync.body, clip(item.get())),
                    ))
                }
            }
        }
    }
    Ok(top)
}

/// The messages of a page reply: the array at `page_items`; none when the value that
/// would hold it is there without it (protobuf-style JSON leaves empty arrays out, as
/// Centrifuge's `history` does). A path that matches nothing else is a protocol error: a
/// wrong path would otherwise read every page as empty.
fn items_of<R>(
    sync: &Pages<'_>,
    root: &RawValue,
    reply: &str,
    f: impl FnOnce(&[&RawValue]) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let holder = || sync.holder.is_some_and(|h| h.exists(root));
    sync.items.with_items(root, |items| match items {
        Some(Some(items)) => f(items),
        None if holder() => f(&[]),
        Some(None) => Err(Failure::new(
            ErrorKind::Protocol,
            format!("no array at `{}` in {}", sync.items, clip(reply)),
        )),
        None => Err(Failure::new(
            ErrorKind::Protocol,
            format!(
                "`{}` = `{}` matches nothing in the page reply {}",
                sync.key,
                sync.items,
                clip(reply)
            ),
        )),
    })
}

/// What `page_more` says of a page reply: whether more pages follow, and the cursor that
/// asks for the next one (`{next}`; empty for a boolean).
fn more_of(sync: &options::SyncRule, root: &RawValue) -> (bool, String) {
    let Some(path) = &sync.page_more else {
        // Without `page_more` pages are asked for until one is empty.
        return (true, String::new());
    };
    path.with(root, |v| match v.map(|v| v.get().trim()) {
        None | Some("false" | "null" | "\"\"") => (false, String::new()),
        Some("true") => (true, String::new()),
        Some(_) => (true, v.map(text_of).unwrap_or_default()),
    })
}

fn unreadable(e: &serde_json::Error, doc: &str) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("unreadable reply ({e}): {}", clip(doc)),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_tungstenite::tungstenite::Message;

    use super::super::WsJsonDriver;
    use crate::driver::kit::cursors::Cursors;
    use crate::driver::{Auth, Config, Driver, Endpoint, Session, UserCtx};
    use crate::metrics::ErrorKind;

    /// A sync page's `page_more` may be a cursor, fed to the next page as
    /// `{next}`; a later fetch starts after the last seq a page covered; a reply whose
    /// array's holder is there without it is an empty page, and one where `page_items`
    /// matches nothing is an error naming the path and the reply. A scripted server pages
    /// by cursor.
    #[tokio::test]
    async fn sync_pages_follow_a_cursor_and_an_unmatched_page_is_an_error() {
        use futures_util::{SinkExt, StreamExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (asked_tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
            let mut pages = 0;
            while let Some(Ok(Message::Text(text))) = ws.next().await {
                let req: serde_json::Value = serde_json::from_str(&text).expect("json");
                let reply = match req["type"].as_str() {
                    Some("login") => r#"{"type":"welcome"}"#.to_owned(),
                    _ => {
                        let (r, after) = (&req["ref"], req["after"].as_u64().unwrap_or(0));
                        let cursor = req["cursor"].as_str().unwrap_or_default().to_owned();
                        asked_tx.send((after, cursor.clone())).expect("asked");
                        pages += 1;
                        let msg = |seq: u64| format!(r#"{{"seq":{seq},"body":"m{seq}"}}"#);
                        match (cursor.as_str(), pages) {
                            ("", 1) => format!(
                                r#"{{"ref":{r},"page":{{"msgs":[{},{}],"next":"p2"}}}}"#,
                                msg(1),
                                msg(2)
                            ),
                            ("p2", _) => {
                                format!(
                                    r#"{{"ref":{r},"page":{{"msgs":[{}],"next":null}}}}"#,
                                    msg(3)
                                )
                            }
                            (_, 3) => format!(r#"{{"ref":{r},"page":{{"next":null}}}}"#),
                            _ => format!(r#"{{"ref":{r},"other":1}}"#),
                        }
                    }
                };
                ws.send(Message::text(reply)).await.expect("send");
            }
        });
        let options: toml::Table = toml::from_str(
            r#"
reply_id = "ref"
login = '{"type":"login","user":"{user}"}'
login_ok = { when = { type = "welcome" } }
push = { when = { type = "msg" }, body = "body", conv = "conv", seq = "seq" }
[sync]
convs = ["inbox.{user}"]
page = '{"type":"page","ref":{req_id},"conv":"{conv}","after":{after},"cursor":"{next}"}'
page_items = "page.msgs"
page_more = "page.next"
item_body = "body"
item_seq = "seq"
"#,
        )
        .expect("options");
        let spec = &<WsJsonDriver as Driver>::SPEC;
        let config = Config {
            spec,
            endpoint: Some(Endpoint::parse(&format!("ws://{addr}/"), spec).expect("url")),
            auth: Auth::None,
            connect_timeout: Duration::from_secs(5),
            heartbeat: None,
            source_addrs: Vec::new(),
            max_body: 100,
            run_id: 1,
            kinds: Vec::new(),
            options,
            dir: Default::default(),
            directory: None,
            relay: None,
            wires: Default::default(),
        };
        let driver = WsJsonDriver::new(&config).expect("driver");
        let user = UserCtx {
            ix: 0,
            id: "u".to_owned(),
        };
        let connect = driver.connect(&user, Cursors::default());
        let Ok(connected) = connect.await else {
            panic!("login failed");
        };
        let mut session = connected.session;
        let mut out = Vec::new();
        session.fetch_missed(&mut out).await.expect("first fetch");
        assert_eq!(out, ["m1", "m2", "m3"]);
        let mut seen = Vec::new();
        while let Ok(a) = asked.try_recv() {
            seen.push(a);
        }
        assert_eq!(seen, [(0, String::new()), (2, "p2".to_owned())]);
        out.clear();
        session.fetch_missed(&mut out).await.expect("an empty page");
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(
            asked.try_recv().ok(),
            Some((3, String::new())),
            "after the last page"
        );
        let err = session.fetch_missed(&mut out).await.expect_err("no array");
        assert_eq!(err.kind, ErrorKind::Protocol);
        assert!(
            err.detail
                .contains("`page_items` = `page.msgs` matches nothing in the page reply {"),
            "{}",
            err.detail
        );
        server.abort();
    }
}
