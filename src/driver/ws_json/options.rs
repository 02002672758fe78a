//! `[target.ws-json]`: the protocol described as templates and JSON paths, checked and
//! compiled once before anything connects.
//!
//! Every key is documented in `docs/drivers/ws-json.md`. A mistake is an [`OptionError`]
//! naming `target.ws-json.KEY` (or `target.ws-json.TABLE.KEY`).

use crate::driver::kit::json_map::path::{self, Doc, Index, Matcher, Path};
use crate::driver::kit::json_map::template::{Template, Var};
use crate::driver::kit::json_map::{clip, text_of};
use crate::driver::kit::options::Table;
use crate::driver::OptionError;

use super::signals::SignalOptions;

/// The driver's name, as in `[target.ws-json]`.
pub const NAME: &str = "ws-json";

/// Placeholders of the login frame.
const LOGIN_VARS: &[Var] = &[
    Var::User,
    Var::Token,
    Var::Username,
    Var::Password,
    Var::ReqId,
    Var::NowMs,
];
/// Placeholders of the frames sent after login.
const AFTER_LOGIN_VARS: &[Var] = &[Var::User, Var::Token, Var::ReqId, Var::NowMs];
/// Placeholders of a send.
const SEND_VARS: &[Var] = &[Var::User, Var::ReqId, Var::To, Var::Body, Var::NowMs];
/// Placeholders of a join.
const JOIN_VARS: &[Var] = &[Var::User, Var::ReqId, Var::Group, Var::NowMs];
/// Placeholders of a heartbeat, a logout and a ping's reply.
const PLAIN_VARS: &[Var] = &[Var::User, Var::ReqId, Var::NowMs];
/// Placeholders of a sync page request.
const PAGE_VARS: &[Var] = &[
    Var::User,
    Var::ReqId,
    Var::Conv,
    Var::After,
    Var::Next,
    Var::NowMs,
];

/// A frame the server sends that is an error.
#[derive(Debug, Clone)]
pub struct ErrorRule {
    /// Which frames.
    pub matcher: Matcher,
    /// Where the reason is.
    pub reason: Option<Path>,
}

/// A frame that accepts a send (its request id at `reply_id`).
#[derive(Debug, Clone)]
pub struct AckRule {
    /// Which frames (with no condition: any non-error reply to a send).
    pub matcher: Matcher,
    /// Where the conversation of the accepted message is (with `seq`).
    pub conv: Option<Path>,
    /// Where its sequence number is.
    pub seq: Option<Path>,
}

/// A pushed message.
#[derive(Debug, Clone)]
pub struct PushRule {
    /// Which frames.
    pub matcher: Matcher,
    /// Where the body is.
    pub body: Path,
    /// Where the sender is (own messages are not deliveries).
    pub from: Option<Path>,
    /// Where the conversation is (with `seq`: merging with sync, duplicates).
    pub conv: Option<Path>,
    /// Where the sequence number in the conversation is.
    pub seq: Option<Path>,
}

/// A server ping and the frame that answers it.
#[derive(Debug, Clone)]
pub struct PingRule {
    /// Which frames.
    pub matcher: Matcher,
    /// The answer.
    pub reply: Template,
}

/// Where a user's conversations come from when it fetches what it missed.
#[derive(Debug, Clone)]
pub struct ListRule {
    /// The request listing them.
    pub request: Template,
    /// Where the array of conversations is in the reply.
    pub items: Path,
    /// Where an item's conversation id is.
    pub conv: Path,
    /// Where an item's latest sequence number is.
    pub last: Option<Path>,
}

/// Fetching missed messages: conversations, then pages of each.
#[derive(Debug, Clone)]
pub struct SyncRule {
    /// The conversations from the server.
    pub list: Option<ListRule>,
    /// Conversations of every user (`{user}`), when there is no list.
    pub convs: Vec<Template>,
    /// The conversation of a joined group (`{group}`), when there is no list.
    pub group_conv: Option<Template>,
    /// The request of one page.
    pub page: Template,
    /// Where the array of messages is in the reply.
    pub page_items: Path,
    /// What holds `page_items` when it has more than one step: a reply with that but
    /// without the array is an empty page (protobuf-style JSON leaves empty arrays out).
    pub page_items_holder: Option<Path>,
    /// Where "more pages follow" is in the reply: a boolean, or a cursor (any other value:
    /// more follow, and the next page's `{next}` is it).
    pub page_more: Option<Path>,
    /// Where a message's body is.
    pub item_body: Path,
    /// Where a message's sequence number is.
    pub item_seq: Path,
    /// Where a message's sender is.
    pub item_from: Option<Path>,
    /// The user's stored read receipts, paged as messages are.
    pub receipts: Option<ReceiptPages>,
}

/// Fetching the read receipts the server stored for the user (`sync.receipts…`).
#[derive(Debug, Clone)]
pub struct ReceiptPages {
    /// The request of one page (`{after}`: the receipt inbox's last sequence number seen).
    pub page: Template,
    /// Where the array of receipts is in the reply.
    pub items: Path,
    /// What holds `items` when it has more than one step (as `page_items_holder`).
    pub items_holder: Option<Path>,
    /// Where a receipt's token is.
    pub token: Path,
    /// Where a receipt's sequence number in the inbox is (as pushed at `signal.seq`).
    pub seq: Path,
}

/// The resolved `[target.ws-json]`.
#[derive(Debug, Clone)]
pub struct Options {
    /// A text frame may hold several JSON documents, one per line.
    pub lines: bool,
    /// Where a reply carries the request id it answers.
    pub reply_id: Option<Path>,
    /// The login frame.
    pub login: Option<Template>,
    /// Which frame says the login succeeded.
    pub login_ok: Option<Matcher>,
    /// Requests sent after login, each answered before the next.
    pub after_login: Vec<Template>,
    /// A direct message.
    pub direct: Option<Template>,
    /// A group message.
    pub group: Option<Template>,
    /// Joining a group: tried in order until one is answered without an error.
    pub join: Vec<Template>,
    /// The heartbeat (none: a WebSocket ping).
    pub heartbeat: Option<Template>,
    /// Sent before closing.
    pub logout: Option<Template>,
    /// Error frames.
    pub error: Option<ErrorRule>,
    /// Acceptances of sends.
    pub ack: Option<AckRule>,
    /// Pushed messages.
    pub push: Option<PushRule>,
    /// Server pings.
    pub ping: Option<PingRule>,
    /// Frames to ignore.
    pub ignore: Vec<Matcher>,
    /// Fetching missed messages.
    pub sync: Option<SyncRule>,
    /// Signals: their frames and the rule of pushed ones.
    pub signals: SignalOptions,
    /// The top-level keys of the paths every received frame is interpreted by.
    pub index: Index,
}

/// The keys of `[target.ws-json]`.
const KEYS: &[&str] = &[
    "lines",
    "reply_id",
    "login",
    "login_ok",
    "after_login",
    "direct",
    "group",
    "join",
    "heartbeat",
    "logout",
    "error",
    "ack",
    "push",
    "ping",
    "ignore",
    "sync",
    "contacts",
    "receipt",
    "group_receipt",
    "typing",
    "group_typing",
    "presence",
    "receipt_ok",
    "signal",
    // For wss://, read by the shared WebSocket transport (`ws::TLS_KEYS`).
    "ca_file",
    "server_name",
];

impl Options {
    /// Reads `table` (the raw `[target.ws-json]`); `kinds` are the scenario's traffic
    /// kinds, whose templates are required.
    pub fn parse(table: &toml::Table, kinds: &[&str]) -> Result<Self, OptionError> {
        let top = Table::new(table, NAME);
        top.only(KEYS)?;
        let error = error_rule(&top)?;
        let ack = ack_rule(&top)?;
        let push = push_rule(&top)?;
        let ping = ping_rule(&top)?;
        let ignore = ignore_rules(table, &top)?;
        let login_ok = login_ok_rule(&top)?;
        let signals = SignalOptions::parse(&top, ack.is_some())?;
        let opts = Options {
            lines: top.bool("lines")?,
            reply_id: top.path("reply_id")?,
            login: top.template("login", LOGIN_VARS)?,
            login_ok,
            after_login: top.templates("after_login", AFTER_LOGIN_VARS, true)?,
            direct: top.template("direct", SEND_VARS)?,
            group: top.template("group", SEND_VARS)?,
            join: top.templates("join", JOIN_VARS, true)?,
            heartbeat: top.template("heartbeat", PLAIN_VARS)?,
            logout: top.template("logout", PLAIN_VARS)?,
            error,
            ack,
            push,
            ping,
            ignore,
            sync: match top.sub("sync")? {
                Some(t) => Some(sync(&t)?),
                None => None,
            },
            signals,
            index: Index::default(),
        };
        opts.check(&top, kinds)?;
        let mut opts = opts;
        opts.build_index();
        Ok(opts)
    }

    /// Gives the paths received frames are interpreted by their slots in [`Options::index`],
    /// the most used first.
    fn build_index(&mut self) {
        let mut index = Index::default();
        let matcher = |m: &mut Matcher, index: &mut Index| {
            m.when.iter_mut().for_each(|(p, _)| index.add(p));
            m.has.iter_mut().for_each(|p| index.add(p));
        };
        if let Some(p) = &mut self.push {
            matcher(&mut p.matcher, &mut index);
            for path in [
                Some(&mut p.body),
                p.from.as_mut(),
                p.conv.as_mut(),
                p.seq.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                index.add(path);
            }
        }
        if let Some(p) = &mut self.reply_id {
            index.add(p);
        }
        if let Some(e) = &mut self.error {
            matcher(&mut e.matcher, &mut index);
            if let Some(p) = &mut e.reason {
                index.add(p);
            }
        }
        if let Some(a) = &mut self.ack {
            matcher(&mut a.matcher, &mut index);
            for path in [a.conv.as_mut(), a.seq.as_mut()].into_iter().flatten() {
                index.add(path);
            }
        }
        if let Some(p) = &mut self.ping {
            matcher(&mut p.matcher, &mut index);
        }
        for m in &mut self.ignore {
            matcher(m, &mut index);
        }
        self.signals.index(&mut index);
        self.index = index;
    }

    /// What the options need of each other and of the traffic.
    fn check(&self, top: &Table<'_>, kinds: &[&str]) -> Result<(), OptionError> {
        if self.login.is_some() && self.login_ok.is_none() {
            return Err(top.bad(
                "login_ok",
                "is required with `login`: which frame says the login succeeded, as in \
                 `login_ok = { when = { type = \"welcome\" } }`",
            ));
        }
        for (kind, template, key) in [
            ("direct", &self.direct, "direct"),
            ("group", &self.group, "group"),
        ] {
            if kinds.contains(&kind) && template.is_none() {
                return Err(top.bad(
                    key,
                    format!(
                        "is required: the scenario has `{kind}` traffic; give the frame that \
                         sends it, as in `{key} = '{{\"to\":\"{{to}}\",\"body\":\"{{body}}\"}}'`"
                    ),
                ));
            }
        }
        if kinds.iter().any(|k| *k == "direct" || *k == "group") && self.push.is_none() {
            return Err(top.bad(
                "push",
                "is required: the scenario sends messages; say which frame is a pushed \
                 message and where its body is (`[target.ws-json.push]` with `when` and `body`)",
            ));
        }
        self.check_signals(top, kinds)?;
        let replies = !self.join.is_empty()
            || !self.after_login.is_empty()
            || self.ack.is_some()
            || self.sync.is_some();
        if replies && self.reply_id.is_none() {
            let why = if self.ack.is_some() {
                "`ack`"
            } else if self.sync.is_some() {
                "`sync`"
            } else if self.join.is_empty() {
                "`after_login`"
            } else {
                "`join`"
            };
            return Err(top.bad(
                "reply_id",
                format!(
                    "is required with {why}: the JSON path where a reply carries the \
                     `{{req_id}}` of its request"
                ),
            ));
        }
        if let Some(sync) = &self.sync {
            let merges = self
                .push
                .as_ref()
                .is_some_and(|p| p.conv.is_some() && p.seq.is_some());
            if !merges {
                return Err(OptionError {
                    key: format!("{}.sync", top.at),
                    msg: "needs `push.conv` and `push.seq`: a message both pushed and fetched \
                          is told apart from a duplicate by its conversation and sequence \
                          number"
                        .to_owned(),
                });
            }
            if sync.list.is_none() && sync.convs.is_empty() && sync.group_conv.is_none() {
                return Err(OptionError {
                    key: format!("{}.sync", top.at),
                    msg: "names no conversations: give `list` (a request listing them) or \
                          `convs` / `group_conv`"
                        .to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// `[target.ws-json.error]`: how a refusal is recognised, and its reason.
fn error_rule(top: &Table<'_>) -> Result<Option<ErrorRule>, OptionError> {
    Ok(match top.sub("error")? {
        Some(t) => {
            t.keys_with(&["reason"])?;
            Some(ErrorRule {
                matcher: t.some_matcher()?,
                reason: t.path("reason")?,
            })
        }
        None => None,
    })
}

/// `[target.ws-json.ack]`: how the server's acceptance of a send is recognised.
fn ack_rule(top: &Table<'_>) -> Result<Option<AckRule>, OptionError> {
    Ok(match top.sub("ack")? {
        Some(t) => {
            t.keys_with(&["conv", "seq"])?;
            let rule = AckRule {
                matcher: t.matcher()?,
                conv: t.path("conv")?,
                seq: t.path("seq")?,
            };
            if rule.conv.is_some() != rule.seq.is_some() {
                return Err(t.bad("conv", "`conv` and `seq` go together"));
            }
            Some(rule)
        }
        None => None,
    })
}

/// `[target.ws-json.push]`: how a delivered message is recognised and read.
fn push_rule(top: &Table<'_>) -> Result<Option<PushRule>, OptionError> {
    Ok(match top.sub("push")? {
        Some(t) => {
            t.keys_with(&["body", "from", "conv", "seq"])?;
            let rule = PushRule {
                matcher: t.some_matcher()?,
                body: t.need_path("body")?,
                from: t.path("from")?,
                conv: t.path("conv")?,
                seq: t.path("seq")?,
            };
            if rule.conv.is_some() != rule.seq.is_some() {
                return Err(t.bad(
                    if rule.conv.is_some() { "seq" } else { "conv" },
                    "`conv` and `seq` go together (the sequence number of a message in \
                     its conversation)",
                ));
            }
            Some(rule)
        }
        None => None,
    })
}

/// `[target.ws-json.ping]`: the server's pings and the frame that answers them.
fn ping_rule(top: &Table<'_>) -> Result<Option<PingRule>, OptionError> {
    Ok(match top.sub("ping")? {
        Some(t) => {
            t.keys_with(&["reply"])?;
            Some(PingRule {
                matcher: t.some_matcher()?,
                // Any text: some protocols ping and pong outside JSON (`#1`, an empty frame).
                reply: t
                    .str("reply")?
                    .map(|s| Template::parse_text(s, PLAIN_VARS).map_err(|e| t.bad("reply", e)))
                    .transpose()?
                    .ok_or_else(|| t.bad("reply", "is required: the frame that answers"))?,
            })
        }
        None => None,
    })
}

/// `[target.ws-json.login_ok]`: the frame that says a login succeeded.
fn login_ok_rule(top: &Table<'_>) -> Result<Option<Matcher>, OptionError> {
    Ok(match top.sub("login_ok")? {
        Some(t) => {
            t.keys_with(&[])?;
            Some(t.some_matcher()?)
        }
        None => None,
    })
}

/// `[[target.ws-json.ignore]]`: frames to pass over, each by its matcher.
fn ignore_rules(table: &toml::Table, top: &Table<'_>) -> Result<Vec<Matcher>, OptionError> {
    Ok(match table.get("ignore") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                let toml::Value::Table(t) = item else {
                    return Err(top.bad("ignore", "must be an array of tables ([[…ignore]])"));
                };
                let t = Table {
                    t,
                    at: format!("target.{NAME}.ignore"),
                };
                t.keys_with(&[])?;
                out.push(t.some_matcher()?);
            }
            out
        }
        Some(v) => {
            return Err(top.bad(
                "ignore",
                format!("must be an array of tables, got {}", v.type_str()),
            ))
        }
    })
}

/// `sync.receipts…`: paging the user's stored read receipts.
fn receipt_pages(t: &Table<'_>) -> Result<Option<ReceiptPages>, OptionError> {
    let Some(page) = t.template("receipts", PAGE_VARS)? else {
        let stray = ["receipts_items", "receipts_token", "receipts_seq"];
        if let Some(k) = stray.into_iter().find(|k| t.t.contains_key(*k)) {
            return Err(t.bad(k, "applies to `receipts`, which is not given"));
        }
        return Ok(None);
    };
    let items = t.need_path("receipts_items")?;
    Ok(Some(ReceiptPages {
        page,
        items_holder: items.parent(),
        items,
        token: t.need_path("receipts_token")?,
        seq: t.need_path("receipts_seq")?,
    }))
}

/// Reads `[target.ws-json.sync]`.
fn sync(t: &Table<'_>) -> Result<SyncRule, OptionError> {
    t.only(&[
        "list",
        "list_items",
        "list_conv",
        "list_last",
        "convs",
        "group_conv",
        "page",
        "page_items",
        "page_more",
        "item_body",
        "item_seq",
        "item_from",
        "receipts",
        "receipts_items",
        "receipts_token",
        "receipts_seq",
    ])?;
    let list = match t.template("list", PLAIN_VARS)? {
        Some(request) => Some(ListRule {
            request,
            items: t.need_path("list_items")?,
            conv: t.need_path("list_conv")?,
            last: t.path("list_last")?,
        }),
        None => {
            if let Some(k) = ["list_items", "list_conv", "list_last"]
                .into_iter()
                .find(|k| t.t.contains_key(*k))
            {
                return Err(t.bad(k, "applies to `list`, which is not given"));
            }
            None
        }
    };
    let group_conv = t
        .str("group_conv")?
        .map(|s| Template::parse_text(s, &[Var::Group]).map_err(|e| t.bad("group_conv", e)))
        .transpose()?;
    if list.is_some() && (t.t.contains_key("convs") || group_conv.is_some()) {
        return Err(t.bad(
            "convs",
            "`convs` and `group_conv` name conversations when there is no `list`; give one way",
        ));
    }
    let page_items = t.need_path("page_items")?;
    let receipts = receipt_pages(t)?;
    Ok(SyncRule {
        list,
        convs: t.templates("convs", &[Var::User], false)?,
        group_conv,
        page: t
            .template("page", PAGE_VARS)?
            .ok_or_else(|| t.bad("page", "is required: the request of one page"))?,
        page_items_holder: page_items.parent(),
        page_items,
        page_more: t.path("page_more")?,
        item_body: t.need_path("item_body")?,
        item_seq: t.need_path("item_seq")?,
        item_from: t.path("item_from")?,
        receipts,
    })
}

impl Options {
    /// What the signal keys need of the traffic and of `sync`.
    fn check_signals(&self, top: &Table<'_>, kinds: &[&str]) -> Result<(), OptionError> {
        if kinds.contains(&"group")
            && self.signals.receipt.is_some()
            && self.signals.group_receipt.is_none()
        {
            return Err(top.bad(
                "group_receipt",
                "is required with `receipt` and `group` traffic: the frame of a read receipt \
                 for a group message (`{to}` is its sender, `{group}` the group)",
            ));
        }
        if kinds.contains(&"group")
            && self.signals.typing.is_some()
            && self.signals.group_typing.is_none()
        {
            return Err(top.bad(
                "group_typing",
                "is required with `typing` and `group` traffic: the frame of a typing notice \
                 into a group (`{group}`, `{state}`)",
            ));
        }
        let pushed_seq = self.signals.push.as_ref().is_some_and(|p| p.seq.is_some());
        let fetched = self.sync.as_ref().is_some_and(|s| s.receipts.is_some());
        if fetched && !pushed_seq {
            return Err(OptionError {
                key: format!("{}.signal.seq", top.at),
                msg: "is required with `sync.receipts`: a receipt both pushed and fetched is \
                      told apart from a duplicate by its sequence number"
                    .to_owned(),
            });
        }
        Ok(())
    }

    /// The reason of `doc` when it is an error frame.
    pub(super) fn error_reason<D: Doc + ?Sized>(&self, doc: &str, root: &D) -> Option<String> {
        let rule = self.error.as_ref()?;
        if !rule.matcher.matches(doc, root) {
            return None;
        }
        Some(
            rule.reason
                .as_ref()
                .and_then(|p| p.with(root, |v| v.map(text_of)))
                .unwrap_or_else(|| clip(doc).to_owned()),
        )
    }

    /// The reason of the reply `doc` when it is an error frame (or not JSON at all).
    pub(super) fn error_of(&self, doc: &str) -> Option<String> {
        match path::parse(doc) {
            Ok(root) => self.error_reason(doc, root),
            Err(e) => Some(format!("unreadable reply ({e}): {}", clip(doc))),
        }
    }
}
