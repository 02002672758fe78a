//! The codecs a script gets from Rust, as the global table `codec`: JSON, MessagePack,
//! Protobuf (messages of the `.proto` files `[target.script] proto` names, compiled when
//! the driver is built), base64, hex, HMAC-SHA256 and URL encoding. Rust does the bytes
//! (well-kept crates), so an adapter never carries its own encoder, and a script cannot
//! read or write anything else.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use mlua::{Lua, LuaSerdeExt, Result, String as LuaString, Table, Value};
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};

/// A state with the `codec` table (no Protobuf messages), for the codecs' tests.
#[cfg(test)]
pub fn with_codecs() -> Lua {
    let lua = Lua::new();
    install(&lua, &DescriptorPool::new()).expect("the codecs install");
    lua
}

/// Builds the `codec` table in `lua`, with the Protobuf messages of `protos`.
pub fn install(lua: &Lua, protos: &DescriptorPool) -> Result<()> {
    let codec = lua.create_table()?;
    binary_codecs(lua, &codec, protos)?;
    codec.set("json_encode", lua.create_function(json_encode)?)?;
    codec.set("json_decode", lua.create_function(json_decode)?)?;
    codec.set("json_items", lua.create_function(super::items::json_items)?)?;
    codec.set("json_ack", lua.create_function(super::answers::json_ack)?)?;
    codec.set("no_ack", lua.create_function(super::answers::no_ack)?)?;
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
    codec.set("hmac_sha1", lua.create_function(hmac_sha1)?)?;
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

/// `msgpack_encode`/`msgpack_decode` and `pb_encode`/`pb_decode`.
fn binary_codecs(lua: &Lua, codec: &Table, protos: &DescriptorPool) -> Result<()> {
    codec.set(
        "msgpack_encode",
        lua.create_function(|lua, v: Value| {
            let packed = rmpv::ext::to_value(&v)
                .map_err(|e| mlua::Error::runtime(format!("msgpack_encode: {e}")))?;
            let mut out = Vec::new();
            rmpv::encode::write_value(&mut out, &packed)
                .map_err(|e| mlua::Error::runtime(format!("msgpack_encode: {e}")))?;
            lua.create_string(out)
        })?,
    )?;
    codec.set(
        "msgpack_decode",
        lua.create_function(|lua, s: LuaString| {
            let bytes = s.as_bytes();
            match rmpv::decode::read_value(&mut &bytes[..]) {
                Ok(v) => Ok((lua.to_value(&v)?, None)),
                Err(e) => Ok((Value::Nil, Some(format!("not MessagePack: {e}")))),
            }
        })?,
    )?;
    let pool = protos.clone();
    codec.set(
        "pb_encode",
        lua.create_function(move |lua, (name, v): (String, Value)| {
            let desc = message(&pool, &name)?;
            let json: serde_json::Value = lua.from_value(v)?;
            let msg = DynamicMessage::deserialize(desc, json)
                .map_err(|e| mlua::Error::runtime(format!("pb_encode {name}: {e}")))?;
            lua.create_string(msg.encode_to_vec())
        })?,
    )?;
    let pool = protos.clone();
    codec.set(
        "pb_decode",
        lua.create_function(move |lua, (name, s): (String, LuaString)| {
            let desc = message(&pool, &name)?;
            let msg = match DynamicMessage::decode(desc, &s.as_bytes()[..]) {
                Ok(m) => m,
                Err(e) => return Ok((Value::Nil, Some(format!("not a {name}: {e}")))),
            };
            let options = SerializeOptions::new()
                .use_proto_field_name(true)
                .stringify_64_bit_integers(false);
            let json = msg
                .serialize_with_options(serde_json::value::Serializer, &options)
                .map_err(|e| mlua::Error::runtime(format!("pb_decode {name}: {e}")))?;
            Ok((lua.to_value(&json)?, None))
        })?,
    )?;
    Ok(())
}

/// The message type `name` of the run's `.proto` files.
fn message(pool: &DescriptorPool, name: &str) -> Result<MessageDescriptor> {
    pool.get_message_by_name(name).ok_or_else(|| {
        let known: Vec<String> = pool
            .all_messages()
            .map(|m| m.full_name().to_owned())
            .take(8)
            .collect();
        mlua::Error::runtime(format!(
            "no message type `{name}` in the scenario's .proto files (known: {})",
            known.join(", ")
        ))
    })
}

/// Compiles the `.proto` files `files` (imports searched next to them).
pub fn compile_protos(files: &[std::path::PathBuf]) -> std::result::Result<DescriptorPool, String> {
    if files.is_empty() {
        return Ok(DescriptorPool::new());
    }
    let dirs: Vec<&std::path::Path> = files
        .iter()
        .map(|f| {
            f.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
        })
        .collect();
    let mut compiler = protox::Compiler::new(dirs).map_err(|e| e.to_string())?;
    compiler.include_imports(true);
    compiler.open_files(files).map_err(|e| located(&e, files))?;
    Ok(compiler.descriptor_pool())
}

/// A .proto error as `FILE:LINE: what` when it points into one of `files`.
fn located(e: &protox::Error, files: &[std::path::PathBuf]) -> String {
    use miette::Diagnostic as _;
    let offset = e.labels().and_then(|mut l| l.next()).map(|l| l.offset());
    let file = e
        .file()
        .and_then(|name| files.iter().find(|f| f.ends_with(name)).or(files.first()));
    match (file, offset) {
        (Some(file), Some(offset)) => {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let line = 1 + text.as_bytes()[..offset.min(text.len())]
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            format!("{}:{line}: {e}", file.display())
        }
        _ => e.to_string(),
    }
}

/// `codec.json_encode(value)`: JSON text of a Lua value (tables with keys 1..n are arrays).
fn json_encode(lua: &Lua, v: Value) -> Result<String> {
    let json: serde_json::Value = lua.from_value(v)?;
    Ok(json.to_string())
}

/// `codec.json_decode(text)`: the Lua value of a JSON text; `nil, reason` when it is not
/// JSON (a frame a server sends is data, not a script error).
fn json_decode(lua: &Lua, s: LuaString) -> Result<(Value, Option<String>)> {
    match super::limits::lifted(lua, || super::json::decode(lua, &s.as_bytes()))? {
        Ok(v) => Ok((v, None)),
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

/// `codec.hmac_sha1(key, data)`: the raw 20-byte MAC (Synapse's shared-secret
/// registration signs with it).
fn hmac_sha1(lua: &Lua, (key, data): (LuaString, LuaString)) -> Result<LuaString> {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(&key.as_bytes())
        .map_err(|e| mlua::Error::runtime(format!("hmac_sha1: {e}")))?;
    mac.update(&data.as_bytes());
    lua.create_string(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_round_trip_and_match_known_values() {
        let lua = Lua::new();
        install(&lua, &DescriptorPool::new()).expect("install");
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
        // RFC 2202's second HMAC-SHA1 test case.
        check(
            "return codec.hex_encode(codec.hmac_sha1('Jefe', 'what do ya want for nothing?'))",
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
        );
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

    #[test]
    fn protobuf_and_msgpack_round_trip() {
        let dir = tempfile::tempdir().expect("dir");
        let proto = dir.path().join("t.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; package t; enum Kind { A = 0; B = 1; }\n\
             message M { string name = 1; uint32 n = 2; repeated Kind kinds = 3; }",
        )
        .expect("write");
        let pool = compile_protos(&[proto]).expect("compiles");
        let lua = Lua::new();
        install(&lua, &pool).expect("install");
        let check = |code: &str, want: &str| {
            let got: String = lua
                .load(code)
                .eval()
                .unwrap_or_else(|e| panic!("{code}: {e}"));
            assert_eq!(got, want, "{code}");
        };
        // name = "x" (field 1, length 1), n = 300 (field 2, varint ac 02), kinds = [B]
        // (field 3, packed).
        check(
            "return codec.hex_encode(codec.pb_encode('t.M', { name = 'x', n = 300, kinds = { 'B' } }))",
            "0a0178\
             10ac021a0101",
        );
        check(
            "local m = codec.pb_decode('t.M', codec.hex_decode('0a017810ac021a0101')) \
             return m.name .. m.n .. m.kinds[1]",
            "x300B",
        );
        check(
            "local m, err = codec.pb_decode('t.M', '\\255') return tostring(m) .. ' ' .. err:sub(1, 8)",
            "nil not a t.",
        );
        let err = lua
            .load("return codec.pb_encode('t.Nope', {})")
            .eval::<String>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no message type `t.Nope`") && err.contains("t.M"),
            "{err}"
        );
        check(
            "local v = codec.msgpack_decode(codec.msgpack_encode({ a = 1, b = { 'x', 'y' } })) \
             return v.a .. v.b[1] .. v.b[2]",
            "1xy",
        );
        check(
            "return codec.hex_encode(codec.msgpack_encode({ 1, 2 }))",
            "920102",
        );
    }

    #[test]
    fn a_bad_proto_file_names_its_line() {
        let dir = tempfile::tempdir().expect("dir");
        let proto = dir.path().join("bad.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\";\nmessage M {\n  strin name = 1;\n}\n",
        )
        .expect("write");
        let err = compile_protos(&[proto]).unwrap_err();
        assert!(
            err.contains("bad.proto:3: ") && err.contains("strin"),
            "{err}"
        );
    }
}
