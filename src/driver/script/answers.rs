//! Answers by shape: `codec.json_ack(shape)` and `codec.no_ack()` make a reader, once, that
//! an adapter gives a request (`u:request(method, path, body, headers, ref, answer)`), so
//! that msgstorm judges the request's 2xx answer itself, with no call of `receive`: as the
//! acceptance of `ref` with the fields `shape` names read from the JSON body (`json_ack`),
//! or as nothing (`no_ack`: a signal's answer, which acknowledges nothing). Any other
//! answer — a status outside 2xx, a body that is not a JSON object, a `json_ack` request
//! without a `ref` — goes to `receive` as it would without the shape, so the adapter keeps
//! the say over failures.

use std::sync::Arc;

use mlua::{Lua, Table, UserData, Value};

use super::items::{fields_of, Reader};
use super::said::{lua_type, Said, Scalar};

/// What a request's 2xx answer is.
#[derive(Debug)]
pub enum AnswerShape {
    /// The acceptance of the request's reference, with the fields the reader names.
    Ack(Reader),
    /// Nothing: the answer acknowledges nothing.
    Nothing,
}

/// An answer shape as the script holds it.
#[derive(Debug, Clone)]
pub struct Shape(pub Arc<AnswerShape>);

impl UserData for Shape {}

/// The keys a `json_ack` shape may name: where the acceptance says the message went.
const ACK_KEYS: [&str; 3] = ["conv", "seq", "from"];

/// `codec.json_ack(shape)`: a 2xx answer is the acceptance of the request's reference,
/// `shape` mapping `conv`, `seq` and `from` to the answer's fields (`{ conv = "room" }`).
pub fn json_ack(_: &Lua, shape: Option<Table>) -> mlua::Result<Shape> {
    let fields = match shape {
        Some(t) => fields_of("json_ack", &t)?,
        None => Vec::new(),
    };
    if let Some((_, slot)) = fields
        .iter()
        .find(|(_, slot)| !ACK_KEYS.contains(&Said::KEYS[*slot]))
    {
        return Err(mlua::Error::runtime(format!(
            "json_ack: shape key `{}` is none of {}",
            Said::KEYS[*slot],
            ACK_KEYS.join(", ")
        )));
    }
    Ok(Shape(Arc::new(AnswerShape::Ack(Reader::of_object(fields)))))
}

/// The answer shape `v` holds (nil: none); anything else is an error, its type given to
/// `bad` to say.
pub fn shape_of(
    v: Value,
    bad: impl FnOnce(&str) -> mlua::Error,
) -> mlua::Result<Option<Arc<AnswerShape>>> {
    match v {
        Value::Nil => Ok(None),
        Value::UserData(ud) if ud.is::<Shape>() => Ok(Some(Arc::clone(&ud.borrow::<Shape>()?.0))),
        other => Err(bad(&format!(
            "must be a shape of codec.json_ack or codec.no_ack, not a {}",
            lua_type(&other)
        ))),
    }
}

/// `codec.no_ack()`: a 2xx answer says nothing.
pub fn no_ack(_: &Lua, (): ()) -> mlua::Result<Shape> {
    Ok(Shape(Arc::new(AnswerShape::Nothing)))
}

impl AnswerShape {
    /// What the answer `body` with `status` to the request `reference` is, or `None` when
    /// the shape does not read it (then it goes to `receive`).
    pub fn judge(&self, status: u16, reference: Option<&str>, body: &[u8]) -> Option<Vec<Said>> {
        if !(200..300).contains(&status) {
            return None;
        }
        match self {
            AnswerShape::Nothing => Some(Vec::new()),
            AnswerShape::Ack(reader) => {
                let mut said = reader.one(body).ok()?;
                said.ack = Some(Scalar::Text(reference?.to_owned()));
                Some(vec![said])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        crate::driver::script::codecs::with_codecs()
    }

    fn shape(lua: &Lua, code: &str) -> Arc<AnswerShape> {
        let s: mlua::AnyUserData = lua.load(code).eval().expect("a shape");
        Arc::clone(&s.borrow::<Shape>().expect("a Shape").0)
    }

    #[test]
    fn a_json_ack_reads_a_2xx_answer_as_the_acceptance_of_its_reference() {
        let lua = lua();
        let ack = shape(
            &lua,
            r#"return codec.json_ack { conv = "room", seq = "n" }"#,
        );
        let said = ack
            .judge(
                201,
                Some("7"),
                br#"{"room":"d:a:b","n":12,"event_id":"$x"}"#,
            )
            .expect("read");
        assert_eq!(said.len(), 1);
        let said = &said[0];
        assert_eq!(said.ack, Some(Scalar::Text("7".into())));
        assert_eq!(said.conv, Some(Scalar::Text("d:a:b".into())));
        assert_eq!(said.seq, Some(Scalar::Int(12)));
        assert!(said.push.is_none() && said.error.is_none());
    }

    #[test]
    fn an_answer_the_shape_cannot_read_is_left_to_receive() {
        let lua = lua();
        let ack = shape(&lua, r#"return codec.json_ack { conv = "conv" }"#);
        assert!(ack.judge(404, Some("7"), br#"{"conv":"c"}"#).is_none());
        assert!(ack.judge(200, Some("7"), b"not json").is_none());
        assert!(ack.judge(200, Some("7"), b"[1]").is_none());
        assert!(ack.judge(200, None, br#"{"conv":"c"}"#).is_none());
        let nothing = shape(&lua, "return codec.no_ack()");
        assert!(nothing
            .judge(200, Some("signal"), b"")
            .expect("read")
            .is_empty());
        assert!(nothing.judge(500, Some("signal"), b"").is_none());
    }

    #[test]
    fn an_answer_argument_is_a_shape_nil_or_an_error_naming_its_type() {
        let lua = lua();
        let made: Value = lua.load("return codec.no_ack()").eval().expect("a shape");
        let bad = |what: &str| mlua::Error::runtime(format!("`answer` {what}"));
        assert!(shape_of(made, bad).expect("a shape").is_some());
        assert!(shape_of(Value::Nil, bad).expect("none").is_none());
        let e = shape_of(Value::Boolean(true), bad).expect_err("not a shape");
        assert!(
            e.to_string().contains(
                "`answer` must be a shape of codec.json_ack or codec.no_ack, not a boolean"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_json_ack_shape_names_only_where_the_message_went() {
        let lua = lua();
        for (code, want) in [
            (
                r#"codec.json_ack { push = "body" }"#,
                "json_ack: shape key `push` is none of conv, seq, from",
            ),
            (
                r#"codec.json_ack { conf = "conv" }"#,
                "json_ack: shape key `conf` is none of ack",
            ),
            (
                r#"codec.json_ack { conv = {} }"#,
                "json_ack: a shape maps names to names",
            ),
        ] {
            let e = lua.load(code).exec().expect_err(code);
            assert!(e.to_string().contains(want), "{code}: {e}");
        }
    }
}
