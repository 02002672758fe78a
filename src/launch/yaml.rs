//! A YAML rendering of a JSON value, for readable Kubernetes manifests.
//!
//! Written by hand on purpose: the manifests are JSON values built in [`super::kube`], and
//! printing such a value as block YAML takes these few lines, while the YAML crates are
//! either unmaintained (serde_yaml is archived) or much larger than this. Strings are
//! double-quoted with JSON's escapes (a subset of YAML's double-quoted style), except that
//! multi-line text (a scenario file) is a literal block; `scripts/test` checks that a YAML
//! parser reads the output back as the same value.

use serde_json::Value;

/// The YAML of `docs`, one document each, separated by `---`.
pub fn render(docs: &[Value]) -> String {
    let mut out = String::new();
    for doc in docs {
        out.push_str("---\n");
        block(&mut out, doc, 0);
    }
    out
}

/// Writes a map or list at `indent` (a scalar on its own line otherwise).
fn block(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                out.push_str(&pad);
                out.push_str(&key(k));
                out.push(':');
                value_after(out, v, indent);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push('-');
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // The item's first key on the dash's line, the rest below it.
                        let mut first = String::new();
                        block(&mut first, item, indent + 2);
                        out.push(' ');
                        out.push_str(&first[indent + 2..]);
                    }
                    _ => value_after(out, item, indent),
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&scalar(v, indent));
            out.push('\n');
        }
    }
}

/// Writes what follows `key:` or `-`: a scalar on the same line, a collection below.
fn value_after(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            block(out, v, indent + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            block(out, v, indent + 2);
        }
        _ => {
            out.push(' ');
            out.push_str(&scalar(v, indent));
            out.push('\n');
        }
    }
}

/// Plain words a YAML 1.1 reader (PyYAML, Kubernetes' go-yaml) takes for something else
/// than a string.
const NOT_STRINGS: [&str; 11] = [
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf",
];

/// A map key: plain when it is a plain word that reads back as a string, quoted otherwise.
fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && !k.starts_with(['-', '.', '/'])
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !NOT_STRINGS.contains(&k.to_ascii_lowercase().as_str())
        && !k.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        k.to_owned()
    } else {
        Value::String(k.to_owned()).to_string()
    }
}

/// A scalar (or an empty collection) in flow style; multi-line text as a literal block
/// indented under `indent`.
fn scalar(v: &Value, indent: usize) -> String {
    match v {
        Value::String(s) if literal_ok(s) => {
            let trailing = s.len() - s.trim_end_matches('\n').len();
            let chomp = match trailing {
                0 => "-",
                1 => "",
                _ => "+",
            };
            let pad = " ".repeat(indent + 2);
            let mut out = format!("|{chomp}");
            for line in s.trim_end_matches('\n').split('\n') {
                out.push('\n');
                if !line.is_empty() {
                    out.push_str(&pad);
                    out.push_str(line);
                }
            }
            for _ in 1..trailing {
                out.push('\n');
            }
            out
        }
        other => other.to_string(),
    }
}

/// Whether `s` reads back unchanged from a literal block: several lines of printable
/// characters whose first line does not start with a space (which would need an
/// indentation indicator).
fn literal_ok(s: &str) -> bool {
    let body = s.trim_end_matches('\n');
    body.contains('\n') && !body.starts_with(' ') && s.chars().all(|c| c == '\n' || !c.is_control())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn maps_lists_and_scalars_in_block_style() {
        let doc = json!({
            "kind": "Job",
            "spec": {"completions": 2, "args": ["run", "--shard", "$(JOB_COMPLETION_INDEX)/2"],
                     "containers": [{"name": "m", "ports": [{"containerPort": 7400}]}],
                     "empty": {}, "none": []},
            "kubernetes.io/hostname": true,
        });
        // serde_json's maps are sorted by key.
        let want = r#"---
kind: "Job"
kubernetes.io/hostname: true
spec:
  args:
    - "run"
    - "--shard"
    - "$(JOB_COMPLETION_INDEX)/2"
  completions: 2
  containers:
    - name: "m"
      ports:
        - containerPort: 7400
  empty: {}
  none: []
"#;
        assert_eq!(render(&[doc]), want);
    }

    #[test]
    fn multi_line_text_is_a_literal_block_with_its_trailing_newlines() {
        let doc = json!({"data": {"a": "x = 1\n\ny = \"2\"\n", "b": "p\nq", "c": "p\nq\n\n"}});
        let want = "---\ndata:\n  a: |\n    x = 1\n\n    y = \"2\"\n  b: |-\n    p\n    q\n  c: |+\n    p\n    q\n\n";
        assert_eq!(render(&[doc]), want);
        // Keys a YAML reader would take for a boolean or a number are quoted.
        let keys = json!({"on": 1, "No": 2, "1.5": 3, "10.toml": 4, "a1": 5});
        assert_eq!(
            render(&[keys]),
            "---\n\"1.5\": 3\n\"10.toml\": 4\n\"No\": 2\na1: 5\n\"on\": 1\n"
        );
        // What a block cannot carry is quoted.
        let odd = json!({"a": " lead\nx", "b": "tab\tx\ny"});
        assert_eq!(
            render(&[odd]),
            "---\na: \" lead\\nx\"\nb: \"tab\\tx\\ny\"\n"
        );
    }
}
