//! Frame templates of the scenario-described protocols (`[target.ws-json]`,
//! `[target.socketio]`): JSON text with `{placeholders}`, compiled once into literal and
//! placeholder segments and filled per frame into one buffer.
//!
//! A placeholder is `{name}` with a lowercase name; every other `{` is JSON. Strings are
//! written JSON-escaped without quotes (write `"user":"{user}"`), numbers as digits
//! (`"ref":{req_id}`).

use std::fmt::Write as _;

/// A value a template can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// The user id.
    User,
    /// The login token (`secret`: the reference server's HMAC token; `username` +
    /// `password`: the password).
    Token,
    /// The username of `[target.auth]` (the user id without one).
    Username,
    /// The password of `[target.auth]`.
    Password,
    /// A request id, unique in the session (1, 2, 3, …).
    ReqId,
    /// The destination: a user id (direct) or a group (group).
    To,
    /// The group to join.
    Group,
    /// The message body (the envelope).
    Body,
    /// The time, milliseconds since the Unix epoch.
    NowMs,
    /// The conversation a sync page is for.
    Conv,
    /// The last sequence number seen in that conversation (0: none).
    After,
    /// The cursor the previous sync page gave at `page_more` (empty on the first page).
    Next,
    /// A signal's token (read receipt, typing, presence), handed back by its recipients.
    Signal,
    /// The user's contacts: a JSON array of wire ids, written as it is (`"add":{contacts}`).
    Contacts,
    /// Of the two users of a direct conversation, the id that sorts first.
    Low,
    /// Of the two users of a direct conversation, the id that sorts last.
    High,
    /// A typing notice's state: `start` or `stop`.
    State,
    /// A presence's status: `online` or `offline`.
    Status,
}

/// Every placeholder, for error messages and lookup.
const ALL: [(Var, &str); 18] = [
    (Var::User, "user"),
    (Var::Token, "token"),
    (Var::Username, "username"),
    (Var::Password, "password"),
    (Var::ReqId, "req_id"),
    (Var::To, "to"),
    (Var::Group, "group"),
    (Var::Body, "body"),
    (Var::NowMs, "now_ms"),
    (Var::Conv, "conv"),
    (Var::After, "after"),
    (Var::Next, "next"),
    (Var::Signal, "signal"),
    (Var::Contacts, "contacts"),
    (Var::Low, "low"),
    (Var::High, "high"),
    (Var::State, "state"),
    (Var::Status, "status"),
];

impl Var {
    /// Its name between the braces.
    pub fn name(self) -> &'static str {
        ALL.iter().find(|(v, _)| *v == self).map_or("", |(_, n)| n)
    }
}

/// The values a template is filled with; what a template does not name may stay empty.
#[derive(Debug, Clone, Copy, Default)]
pub struct Values<'a> {
    /// `{user}`.
    pub user: &'a str,
    /// `{token}`.
    pub token: &'a str,
    /// `{username}`.
    pub username: &'a str,
    /// `{password}`.
    pub password: &'a str,
    /// `{req_id}`.
    pub req_id: u64,
    /// `{to}`.
    pub to: &'a str,
    /// `{group}`.
    pub group: &'a str,
    /// `{body}`.
    pub body: &'a str,
    /// `{conv}`.
    pub conv: &'a str,
    /// `{after}`.
    pub after: u64,
    /// `{next}`.
    pub next: &'a str,
    /// `{signal}`.
    pub signal: &'a str,
    /// `{contacts}`: JSON text, written unescaped.
    pub contacts: &'a str,
    /// `{low}`.
    pub low: &'a str,
    /// `{high}`.
    pub high: &'a str,
    /// `{state}`.
    pub state: &'a str,
    /// `{status}`.
    pub status: &'a str,
}

/// Values that fill a template for its JSON check.
const SAMPLE: Values<'static> = Values {
    user: "u1",
    token: "t",
    username: "u1",
    password: "p",
    req_id: 1,
    to: "u2",
    group: "g1",
    body: "b",
    conv: "c",
    after: 0,
    next: "",
    signal: "R1",
    contacts: r#"["u2"]"#,
    low: "u1",
    high: "u2",
    state: "start",
    status: "online",
};

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Lit(String),
    Var(Var),
}

/// A compiled template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    segs: Vec<Seg>,
    /// Bytes of literal text, to size the buffer.
    lit_len: usize,
}

impl Template {
    /// Compiles `text`, allowing the placeholders in `allowed`; then checks that it is JSON
    /// once filled in. The error says what is wrong.
    pub fn parse(text: &str, allowed: &[Var]) -> Result<Template, String> {
        let t = Template::parse_text(text, allowed)?;
        let mut filled = String::new();
        t.render(&SAMPLE, 0, &mut filled);
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&filled) {
            return Err(format!(
                "is not JSON once filled in ({e}): {filled} (placeholders of strings go \
                 inside quotes, as in \"{{user}}\")"
            ));
        }
        Ok(t)
    }

    /// Compiles `text` (any text, such as a channel name), allowing the placeholders in
    /// `allowed`.
    pub fn parse_text(text: &str, allowed: &[Var]) -> Result<Template, String> {
        let mut segs = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let name_len = after
                .bytes()
                .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
                .count();
            if name_len == 0 || !after[name_len..].starts_with('}') {
                lit.push_str(&rest[..=open]);
                rest = after;
                continue;
            }
            let name = &after[..name_len];
            let names = || {
                allowed
                    .iter()
                    .map(|v| format!("{{{}}}", v.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let var = match ALL.iter().find(|(_, n)| *n == name) {
                Some((v, _)) if allowed.contains(v) => *v,
                Some(_) => {
                    return Err(format!(
                        "placeholder `{{{name}}}` has no value in this template; it takes {}",
                        names()
                    ))
                }
                None => {
                    return Err(format!(
                        "unknown placeholder `{{{name}}}`; this template takes {}",
                        names()
                    ))
                }
            };
            lit.push_str(&rest[..open]);
            if !lit.is_empty() {
                segs.push(Seg::Lit(std::mem::take(&mut lit)));
            }
            segs.push(Seg::Var(var));
            rest = &after[name_len + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            segs.push(Seg::Lit(lit));
        }
        let lit_len = segs
            .iter()
            .map(|s| match s {
                Seg::Lit(l) => l.len(),
                Seg::Var(_) => 0,
            })
            .sum();
        Ok(Template { segs, lit_len })
    }

    /// Whether it names `var`.
    pub fn uses(&self, var: Var) -> bool {
        self.segs.contains(&Seg::Var(var))
    }

    /// The filled template, in a string of the right size.
    pub fn fill(&self, v: &Values<'_>, now_ms: u64) -> String {
        let extra = v.body.len() + v.contacts.len();
        let mut out = String::with_capacity(self.lit_len + extra + 48);
        self.render(v, now_ms, &mut out);
        out
    }

    /// Appends the filled template to `out`.
    pub fn render(&self, v: &Values<'_>, now_ms: u64, out: &mut String) {
        for seg in &self.segs {
            match seg {
                Seg::Lit(l) => out.push_str(l),
                Seg::Var(var) => match var {
                    Var::User => escape(v.user, out),
                    Var::Token => escape(v.token, out),
                    Var::Username => escape(v.username, out),
                    Var::Password => escape(v.password, out),
                    Var::To => escape(v.to, out),
                    Var::Group => escape(v.group, out),
                    Var::Body => escape(v.body, out),
                    Var::Conv => escape(v.conv, out),
                    Var::Next => escape(v.next, out),
                    Var::Signal => escape(v.signal, out),
                    Var::Contacts => out.push_str(v.contacts),
                    Var::Low => escape(v.low, out),
                    Var::High => escape(v.high, out),
                    Var::State => escape(v.state, out),
                    Var::Status => escape(v.status, out),
                    Var::ReqId => {
                        let _ = write!(out, "{}", v.req_id);
                    }
                    Var::After => {
                        let _ = write!(out, "{}", v.after);
                    }
                    Var::NowMs => {
                        let _ = write!(out, "{now_ms}");
                    }
                },
            }
        }
    }
}

/// Appends `s` JSON-escaped (without quotes). By hand: serde_json escapes only into a
/// quoted string of its own, which would be a second buffer per frame.
fn escape(s: &str, out: &mut String) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let rep = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if rep.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(rep);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEND: &[Var] = &[Var::User, Var::ReqId, Var::To, Var::Body, Var::NowMs];

    #[test]
    fn templates_fill_escaped_values() {
        let t = Template::parse(
            r#"{"type":"send","ref":{req_id},"to":{"user":"{to}"},"body":"{body}","t":{now_ms}}"#,
            SEND,
        )
        .expect("template");
        let v = Values {
            req_id: 7,
            to: "bob",
            body: "a\"b\\c\nd\u{1}",
            ..Values::default()
        };
        let out = t.fill(&v, 42);
        assert_eq!(
            out,
            r#"{"type":"send","ref":7,"to":{"user":"bob"},"body":"a\"b\\c\nd\u0001","t":42}"#
        );
        let back: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(back["body"], "a\"b\\c\nd\u{1}");
    }

    #[test]
    fn bad_templates_are_refused_with_reasons() {
        let e = Template::parse(r#"{"u":"{usr}"}"#, SEND).expect_err("unknown");
        assert!(e.contains("unknown placeholder `{usr}`"), "{e}");
        let e = Template::parse(r#"{"g":"{group}"}"#, SEND).expect_err("not here");
        assert!(e.contains("has no value in this template"), "{e}");
        let e = Template::parse(r#"{"u":{user}}"#, SEND).expect_err("unquoted");
        assert!(e.contains("is not JSON once filled in"), "{e}");
        assert!(Template::parse("{}", SEND).is_ok());
    }
}
