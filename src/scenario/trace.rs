//! Trace files for `kind = "trace"`: recorded messages, one per line, as CSV
//! (`time,from,to[,size]`, an optional header line, `#` comments) or JSON lines
//! (`{"time": 1.5, "from": "alice", "to": "bob", "size": 120}`, or `"group": "g1"` instead
//! of `"to"`). A CSV `to` of `group:NAME` sends into a group. Trace ids are mapped onto the
//! run's users in order of first appearance; a group's members are the users who send into
//! it. Every malformed line is an error naming the file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::plan::{GroupSpec, TraceSender, TraceTarget, UserIx};
use crate::{Error, Result};

/// One message of a trace, as read.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    /// Its line in the file.
    line: usize,
    /// Seconds, any origin.
    time: f64,
    /// Sender's trace id.
    from: String,
    /// Recipient's trace id, or a group's name.
    to: To,
    /// Body bytes, if the trace says.
    size: Option<usize>,
}

/// Where a traced message went.
#[derive(Debug, Clone, PartialEq)]
enum To {
    /// A user.
    User(String),
    /// A group.
    Group(String),
}

/// A JSON line of a trace.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine {
    time: f64,
    from: String,
    to: Option<String>,
    group: Option<String>,
    size: Option<usize>,
}

/// A trace mapped onto the run's users.
#[derive(Debug)]
pub struct Trace {
    /// Each sender's targets and sends, by user.
    pub senders: Vec<TraceSender>,
    /// The trace's groups, members sorted.
    pub groups: Vec<GroupSpec>,
    /// From the first message to the last, at the replay's speed.
    pub span: Duration,
}

/// Reads `file` (`key` names it in errors) and maps it onto `users` users at `speed` ×; a
/// message the trace gives no size has size 0 (drawn from the pattern's `size` when sent).
pub fn read(file: &Path, key: &str, users: u32, speed: f64) -> Result<Trace> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
    let json = matches!(
        file.extension().and_then(|e| e.to_str()),
        Some("jsonl" | "ndjson" | "json")
    );
    let err = |line: usize, msg: String| Error::Scenario {
        file: file.to_path_buf(),
        line,
        key: key.to_owned(),
        msg,
    };
    let lines = if json {
        json_lines(&text, &err)?
    } else {
        csv_lines(&text, &err)?
    };
    if lines.is_empty() {
        return Err(err(1, "the trace holds no message".to_owned()));
    }
    map(lines, users, speed, file.to_path_buf(), key)
}

/// The messages of a JSON-lines trace.
fn json_lines(text: &str, err: &impl Fn(usize, String) -> Error) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let j: JsonLine = serde_json::from_str(raw).map_err(|e| err(i + 1, e.to_string()))?;
        let to = match (j.to, j.group) {
            (Some(u), None) => To::User(u),
            (None, Some(g)) => To::Group(g),
            _ => {
                return Err(err(
                    i + 1,
                    "needs exactly one of \"to\" and \"group\"".into(),
                ))
            }
        };
        out.push(checked(i + 1, j.time, j.from, to, j.size, err)?);
    }
    Ok(out)
}

/// The messages of a CSV trace.
fn csv_lines(text: &str, err: &impl Fn(usize, String) -> Error) -> Result<Vec<Line>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let r = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            err(line, e.to_string())
        })?;
        let line = r.position().map_or(0, |p| p.line() as usize);
        if i == 0 && r.get(0).is_some_and(|f| f.parse::<f64>().is_err()) {
            continue; // the header
        }
        if !(3..=4).contains(&r.len()) {
            return Err(err(
                line,
                format!("a line is `time,from,to[,size]`, got {} fields", r.len()),
            ));
        }
        let time = r[0]
            .parse::<f64>()
            .map_err(|_| err(line, format!("time `{}` is not a number of seconds", &r[0])))?;
        let to = match r[2].strip_prefix("group:") {
            Some(g) => To::Group(g.to_owned()),
            None => To::User(r[2].to_owned()),
        };
        let size = match r.get(3) {
            None | Some("") => None,
            Some(s) => Some(
                s.parse::<usize>()
                    .map_err(|_| err(line, format!("size `{s}` is not a number of bytes")))?,
            ),
        };
        out.push(checked(line, time, r[1].to_owned(), to, size, err)?);
    }
    Ok(out)
}

/// One message, its values checked.
fn checked(
    line: usize,
    time: f64,
    from: String,
    to: To,
    size: Option<usize>,
    err: &impl Fn(usize, String) -> Error,
) -> Result<Line> {
    if !time.is_finite() || time < 0.0 {
        return Err(err(line, format!("time must be ≥ 0 seconds, got {time}")));
    }
    if from.is_empty() || matches!(&to, To::User(u) | To::Group(u) if u.is_empty()) {
        return Err(err(
            line,
            "a sender and a recipient or group are required".into(),
        ));
    }
    if matches!(&to, To::User(u) if *u == from) {
        return Err(err(line, format!("`{from}` sends to itself")));
    }
    if size.is_some_and(|s| s == 0 || s > super::values::MAX_SIZE) {
        return Err(err(
            line,
            format!("size must be in 1..={} bytes", super::values::MAX_SIZE),
        ));
    }
    Ok(Line {
        line,
        time,
        from,
        to,
        size,
    })
}

/// A trace's senders and groups as its lines are mapped.
#[derive(Default)]
struct Built {
    /// The groups so far, by first appearance.
    groups: Vec<GroupSpec>,
    /// Each group's index in `groups`, by name.
    group_ix: HashMap<String, u32>,
    /// Each sender's targets and sends so far.
    senders: HashMap<UserIx, TraceSender>,
}

impl Built {
    /// Group `name`, with `from` among its senders and members.
    fn group(&mut self, name: &str, from: UserIx) -> TraceTarget {
        let groups = &mut self.groups;
        let g = *self.group_ix.entry(name.to_owned()).or_insert_with(|| {
            groups.push(GroupSpec {
                name: name.to_owned(),
                members: Vec::new(),
                senders: Vec::new(),
            });
            groups.len() as u32 - 1
        });
        let spec = &mut self.groups[g as usize];
        if !spec.senders.contains(&from) {
            spec.senders.push(from);
            spec.members.push(from);
        }
        TraceTarget::Group(g)
    }

    /// A message of `from` to `target` due `at`, `bytes` long.
    fn send(&mut self, from: UserIx, target: TraceTarget, at: Duration, bytes: usize) {
        let s = self.senders.entry(from).or_insert_with(|| TraceSender {
            user: from,
            targets: Vec::new(),
            sends: Vec::new(),
            sizes: Vec::new(),
        });
        let pos = match s.targets.iter().position(|t| *t == target) {
            Some(p) => p,
            None => {
                s.targets.push(target);
                s.targets.len() - 1
            }
        };
        s.sends.push((at, pos as u32));
        s.sizes.push(bytes as u32);
    }
}

/// Maps the messages onto users `0..users` and streams, in time order.
fn map(mut lines: Vec<Line>, users: u32, speed: f64, file: PathBuf, key: &str) -> Result<Trace> {
    lines.sort_by(|a, b| a.time.total_cmp(&b.time).then(a.line.cmp(&b.line)));
    let t0 = lines[0].time;
    let mut ids: HashMap<String, UserIx> = HashMap::new();
    let mut user = |id: &str, line: usize| -> Result<UserIx> {
        if let Some(&u) = ids.get(id) {
            return Ok(u);
        }
        let u = ids.len() as UserIx;
        if u >= users {
            return Err(Error::Scenario {
                file: file.clone(),
                line,
                key: key.to_owned(),
                msg: format!(
                    "`{id}` is trace user {} of a population of {users}: raise population.users",
                    u + 1
                ),
            });
        }
        ids.insert(id.to_owned(), u);
        Ok(u)
    };
    let mut built = Built::default();
    for l in &lines {
        let from = user(&l.from, l.line)?;
        let target = match &l.to {
            To::User(id) => TraceTarget::User(user(id, l.line)?),
            To::Group(name) => built.group(name, from),
        };
        built.send(
            from,
            target,
            Duration::from_secs_f64((l.time - t0) / speed),
            l.size.unwrap_or(0),
        );
    }
    let Built {
        mut groups,
        senders,
        ..
    } = built;
    for g in &mut groups {
        g.members.sort_unstable();
        g.senders.sort_unstable();
    }
    let mut senders: Vec<TraceSender> = senders.into_values().collect();
    senders.sort_unstable_by_key(|s| s.user);
    let last = lines.last().map_or(t0, |l| l.time);
    Ok(Trace {
        senders,
        groups,
        span: Duration::from_secs_f64((last - t0) / speed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `text` as `name` in a fresh folder and reads it onto `users` users.
    fn read_text(name: &str, text: &str, users: u32) -> Result<Trace> {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("write the trace");
        read(&file, "traffic[0].file", users, 2.0)
    }

    #[test]
    fn a_csv_trace_maps_ids_in_order_of_appearance_at_the_replay_speed() {
        let t = read_text(
            "t.csv",
            "time,from,to,size\n# a comment\n10.0,alice,bob,50\n11.0,bob,alice\n12.0,carol,group:team\n13.0,alice,group:team,70\n",
            5,
        )
        .expect("a valid trace");
        assert_eq!(t.span, Duration::from_millis(1500), "3 s at 2×");
        let alice = &t.senders[0];
        assert_eq!(
            (alice.user, alice.targets.clone()),
            (0, vec![TraceTarget::User(1), TraceTarget::Group(0)])
        );
        assert_eq!(
            alice.sends,
            vec![(Duration::ZERO, 0), (Duration::from_millis(1500), 1)]
        );
        assert_eq!(alice.sizes, vec![50, 70]);
        assert_eq!(
            t.senders[1].sizes,
            vec![0],
            "drawn from the pattern's size when sent"
        );
        assert_eq!(
            t.groups[0].members,
            vec![0, 2],
            "the group's senders are its members"
        );
    }

    #[test]
    fn a_json_lines_trace_reads_users_and_groups() {
        let t = read_text(
            "t.jsonl",
            "{\"time\": 0, \"from\": \"a\", \"to\": \"b\"}\n{\"time\": 1, \"from\": \"b\", \"group\": \"g\", \"size\": 9}\n",
            2,
        )
        .expect("a valid trace");
        assert_eq!(t.senders.len(), 2);
        assert_eq!(t.senders[1].targets, vec![TraceTarget::Group(0)]);
    }

    #[test]
    fn a_malformed_trace_line_is_an_error_naming_its_file_and_line() {
        let cases = [
            (
                "t.csv",
                "0,a,b\nsoon,a,b\n",
                2,
                "time `soon` is not a number",
            ),
            ("t.csv", "0,a,b\n1,a\n", 2, "got 2 fields"),
            ("t.csv", "0,a,a\n", 1, "sends to itself"),
            (
                "t.csv",
                "0,a,b\n1,c,d\n",
                2,
                "`c` is trace user 3 of a population of 2",
            ),
            ("t.csv", "0,a,b,0\n", 1, "size must be in 1..="),
            ("t.csv", "-1,a,b\n", 1, "time must be ≥ 0"),
            (
                "t.jsonl",
                "{\"time\": 0, \"from\": \"a\"}\n",
                1,
                "exactly one of",
            ),
            (
                "t.jsonl",
                "{\"time\": 0, \"from\": \"a\", \"to\": \"b\", \"x\": 1}\n",
                1,
                "unknown field",
            ),
            ("t.csv", "# nothing\n", 1, "no message"),
        ];
        for (name, text, line, msg) in cases {
            match read_text(name, text, 2) {
                Err(Error::Scenario {
                    file,
                    line: l,
                    key,
                    msg: m,
                }) => {
                    assert!(file.ends_with(name), "{file:?}");
                    assert_eq!(
                        (l, key.as_str()),
                        (line, "traffic[0].file"),
                        "{text:?}: {m}"
                    );
                    assert!(m.contains(msg), "{text:?}: {m}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
