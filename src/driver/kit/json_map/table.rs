//! The JSON-mapping readers of a driver's options [`Table`]: JSON paths, frame templates
//! and matchers, each mistake an [`OptionError`] naming the dotted key in the table's one
//! wording.

use super::path::{Matcher, Path, Want};
use super::template::{Template, Var};
use crate::driver::kit::options::Table;
use crate::driver::OptionError;

/// The keys every matcher table takes.
const MATCH_KEYS: &[&str] = &["when", "has", "text"];

impl Table<'_> {
    /// The JSON path at `key`, parsed.
    pub(crate) fn path(&self, key: &str) -> Result<Option<Path>, OptionError> {
        self.str(key)?
            .map(|s| Path::parse(s).map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// The JSON path at `key`, which must be there.
    pub(crate) fn need_path(&self, key: &str) -> Result<Path, OptionError> {
        self.path(key)?
            .ok_or_else(|| self.bad(key, "is required: the JSON path of the value"))
    }

    /// The JSON frame template at `key`, compiled with the placeholders `vars`.
    pub(crate) fn template(
        &self,
        key: &str,
        vars: &[Var],
    ) -> Result<Option<Template>, OptionError> {
        self.str(key)?
            .map(|s| Template::parse(s, vars).map_err(|e| self.bad(key, e)))
            .transpose()
    }

    /// A template or an array of templates (`name` or `name = [...]`).
    pub(crate) fn templates(
        &self,
        key: &str,
        vars: &[Var],
        json: bool,
    ) -> Result<Vec<Template>, OptionError> {
        let one = |s: &str| {
            if json {
                Template::parse(s, vars)
            } else {
                Template::parse_text(s, vars)
            }
            .map_err(|e| self.bad(key, e))
        };
        match self.t.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::String(s)) => Ok(vec![one(s)?]),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => one(s),
                    other => {
                        Err(self.bad(key, format!("must hold strings, got {}", other.type_str())))
                    }
                })
                .collect(),
            Some(v) => Err(self.bad(
                key,
                format!(
                    "must be a string or an array of strings, got {}",
                    v.type_str()
                ),
            )),
        }
    }

    /// The `when` / `has` / `text` conditions of this table.
    pub(crate) fn matcher(&self) -> Result<Matcher, OptionError> {
        let mut m = Matcher::default();
        if let Some(when) = self.sub("when")? {
            for (k, v) in when.t {
                let path = Path::parse(k).map_err(|e| when.bad(k, e))?;
                let want = match v {
                    toml::Value::String(s) => Want::Str(s.clone()),
                    toml::Value::Integer(i) => Want::Int(*i),
                    toml::Value::Float(f) => Want::Float(*f),
                    toml::Value::Boolean(b) => Want::Bool(*b),
                    other => {
                        return Err(when.bad(
                            k,
                            format!(
                                "must be a string, number or boolean to compare with, got {}",
                                other.type_str()
                            ),
                        ))
                    }
                };
                m.when.push((path, want));
            }
        }
        match self.t.get("has") {
            None => {}
            Some(toml::Value::Array(items)) => {
                for v in items {
                    let toml::Value::String(s) = v else {
                        return Err(self.bad("has", "must be an array of JSON paths (strings)"));
                    };
                    m.has.push(Path::parse(s).map_err(|e| self.bad("has", e))?);
                }
            }
            Some(v) => {
                return Err(self.bad(
                    "has",
                    format!("must be an array of JSON paths, got {}", v.type_str()),
                ))
            }
        }
        if let Some(text) = self.str("text")? {
            m.text = Some(text.trim().to_owned());
        }
        Ok(m)
    }

    /// A matcher that must have a condition (it would match every frame otherwise).
    pub(crate) fn some_matcher(&self) -> Result<Matcher, OptionError> {
        let m = self.matcher()?;
        if m.is_empty() {
            return Err(OptionError {
                key: self.at.clone(),
                msg: "has no condition, so it would match every frame; add `when = { PATH = \
                      VALUE }`, `has = [PATH]` or `text = FRAME`"
                    .to_owned(),
            });
        }
        Ok(m)
    }

    /// Refuses any key but the matcher's and `own`.
    pub(crate) fn keys_with(&self, own: &[&str]) -> Result<(), OptionError> {
        let mut keys = MATCH_KEYS.to_vec();
        keys.extend_from_slice(own);
        self.only(&keys)
    }
}
