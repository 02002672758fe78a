//! The codecs a script gets from Rust, as the global table `codec`: JSON, base64, hex,
//! HMAC-SHA256 and URL encoding. Rust does the bytes (well-kept crates), so an adapter
//! never carries its own encoder, and a script cannot read or write anything else.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use mlua::{Lua, LuaSerdeExt, Result, String as LuaString, Value};

/// Builds the `codec` table in `lua`.
pub fn install(lua: &Lua) -> Result<()> {
    let codec = lua.create_table()?;
    codec.set("json_encode", lua.create_function(json_encode)?)?;
    codec.set("json_decode", lua.create_function(json_decode)?)?;
    codec.set("null", Value::NULL)?;
    codec.set(
        "base64_encode",
        lua.create_function(|_, s: LuaString| {
            Ok(base64::engine::general_purpose::STANDARD.encode(s.as_bytes()))
        })?,
    )?;
    codec.set(
        "base64_decode",
        lua.create_function(|lua, s: LuaString| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(|e| mlua::Error::runtime(format!("base64_decode: {e}")))?;
            lua.create_string(bytes)
        })?,
    )?;
    codec.set(
        "hex_encode",
        lua.create_function(|_, s: LuaString| Ok(hex::encode(s.as_bytes())))?,
    )?;
    codec.set(
        "hex_decode",
        lua.create_function(|lua, s: LuaString| {
            let bytes = hex::decode(s.as_bytes())
                .map_err(|e| mlua::Error::runtime(format!("hex_decode: {e}")))?;
            lua.create_string(bytes)
        })?,
    )?;
    codec.set("hmac_sha256", lua.create_function(hmac_sha256)?)?;
    codec.set(
        "url_encode",
        lua.create_function(|_, s: LuaString| {
            Ok(
                percent_encoding::percent_encode(&s.as_bytes(), percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            )
        })?,
    )?;
    codec.set(
        "url_decode",
        lua.create_function(|lua, s: LuaString| {
            let bytes: Vec<u8> = percent_encoding::percent_decode(&s.as_bytes()).collect();
            lua.create_string(bytes)
        })?,
    )?;
    lua.globals().set("codec", codec)
}

/// `codec.json_encode(value)`: JSON text of a Lua value (tables with keys 1..n are arrays).
fn json_encode(lua: &Lua, v: Value) -> Result<String> {
    let json: serde_json::Value = lua.from_value(v)?;
    Ok(json.to_string())
}

/// `codec.json_decode(text)`: the Lua value of a JSON text; `nil, reason` when it is not
/// JSON (a frame a server sends is data, not a script error).
fn json_decode(lua: &Lua, s: LuaString) -> Result<(Value, Option<String>)> {
    match serde_json::from_slice::<serde_json::Value>(&s.as_bytes()) {
        Ok(json) => Ok((lua.to_value(&json)?, None)),
        Err(e) => Ok((Value::Nil, Some(format!("not JSON: {e}")))),
    }
}

/// `codec.hmac_sha256(key, data)`: the raw 32-byte MAC (hex it with `codec.hex_encode`).
fn hmac_sha256(lua: &Lua, (key, data): (LuaString, LuaString)) -> Result<LuaString> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key.as_bytes())
        .map_err(|e| mlua::Error::runtime(format!("hmac_sha256: {e}")))?;
    mac.update(&data.as_bytes());
    lua.create_string(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_round_trip_and_match_known_values() {
        let lua = Lua::new();
        install(&lua).expect("install");
        let check = |code: &str, want: &str| {
            let got: String = lua
                .load(code)
                .eval()
                .unwrap_or_else(|e| panic!("{code}: {e}"));
            assert_eq!(got, want, "{code}");
        };
        check(
            "return codec.base64_encode('alice:secret')",
            "YWxpY2U6c2VjcmV0",
        );
        check(
            "return codec.base64_decode('YWxpY2U6c2VjcmV0')",
            "alice:secret",
        );
        check("return codec.hex_encode('\\1\\255')", "01ff");
        check(
            "return codec.hex_decode('01ff') == '\\1\\255' and 'ok' or 'no'",
            "ok",
        );
        check("return codec.url_encode('a b&c')", "a%20b%26c");
        check("return codec.url_decode('a%20b%26c')", "a b&c");
        // The reference server's token for user `u` with secret `s` (wire::token).
        check(
            "return codec.hex_encode(codec.hmac_sha256('s', 'u'))",
            &crate::wire::token("u", "s"),
        );
        check(
            r#"local t = codec.json_decode('{"a":[1,2],"b":"x"}') return t.b .. #t.a"#,
            "x2",
        );
        check(
            r#"return codec.json_encode({type = "ping"})"#,
            r#"{"type":"ping"}"#,
        );
        check(
            "local v, err = codec.json_decode('{oops') return tostring(v) .. ' ' .. err:sub(1, 8)",
            "nil not JSON",
        );
    }
}
