//! A shard's `result.json` framed in its log (`msgstorm run --log-result`), so that a
//! launcher whose only output channel is the log (a Kubernetes pod, read with `kubectl
//! logs`) still brings every shard's result back: a begin line naming the shard, the run,
//! the length and CRC-32 of the file, the file in base64 lines, an end line. Lines may carry
//! a prefix (`kubectl logs --prefix` puts `[pod/…/…] ` before each); a frame's lines share
//! the prefix of its begin line, so the frames of several pods in one stream interleave
//! freely.

use base64::Engine as _;

const BEGIN: &str = "-----BEGIN MSGSTORM RESULT ";
const END: &str = "-----END MSGSTORM RESULT-----";
const TAIL: &str = "-----";
/// Base64 characters per line (as PEM does).
const LINE: usize = 76;

/// The framed form of one result file of shard `shard` (`I/N`) of run `run`.
pub fn encode(shard: &str, run: &str, bytes: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut out = format!(
        "{BEGIN}shard={shard} run={run} bytes={} crc32={:08x}{TAIL}\n",
        bytes.len(),
        crc32fast::hash(bytes)
    );
    // Base64 is ASCII: splitting at any byte is a character boundary.
    for chunk in b64.as_bytes().chunks(LINE) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// One frame found in a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// `I/N` from the begin line.
    pub shard: String,
    /// The run id from the begin line.
    pub run: String,
    /// 1-based line of the begin line.
    pub line: usize,
    /// The result file.
    pub bytes: Vec<u8>,
}

/// A frame under way.
struct Open {
    prefix: String,
    head: Head,
    line: usize,
    b64: String,
}

/// What a begin line says.
struct Head {
    shard: String,
    run: String,
    len: usize,
    crc: u32,
}

fn head(text: &str) -> Option<Head> {
    let body = text.strip_suffix(TAIL)?;
    let mut head = Head {
        shard: String::new(),
        run: String::new(),
        len: usize::MAX,
        crc: 0,
    };
    let mut crc = None;
    for word in body.split_whitespace() {
        let (k, v) = word.split_once('=')?;
        match k {
            "shard" => head.shard = v.to_owned(),
            "run" => head.run = v.to_owned(),
            "bytes" => head.len = v.parse().ok()?,
            "crc32" => crc = u32::from_str_radix(v, 16).ok(),
            _ => {}
        }
    }
    head.crc = crc?;
    (!head.shard.is_empty() && head.len != usize::MAX).then_some(head)
}

/// Every frame in `log`, in order of their end lines; a damaged frame (wrong length or
/// checksum, bad base64, no end) is an error naming its begin line.
pub fn decode(log: &str) -> Vec<Result<Frame, String>> {
    let mut open: Vec<Open> = Vec::new();
    let mut found = Vec::new();
    for (n, raw) in log.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if let Some(at) = line.find(BEGIN) {
            let prefix = &line[..at];
            open.retain(|o| o.prefix != prefix);
            match head(&line[at + BEGIN.len()..]) {
                Some(head) => open.push(Open {
                    prefix: prefix.to_owned(),
                    head,
                    line: n + 1,
                    b64: String::new(),
                }),
                None => found.push(Err(format!("line {}: a damaged begin line", n + 1))),
            }
            continue;
        }
        let Some(i) = open
            .iter()
            .position(|o| line.starts_with(o.prefix.as_str()))
        else {
            continue;
        };
        let rest = &line[open[i].prefix.len()..];
        if rest == END {
            found.push(close(open.swap_remove(i)));
        } else {
            open[i].b64.push_str(rest.trim());
        }
    }
    found.extend(open.into_iter().map(|o| {
        Err(format!(
            "line {}: the result has no end line (log cut short?)",
            o.line
        ))
    }));
    found
}

fn close(o: Open) -> Result<Frame, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(o.b64.as_bytes())
        .map_err(|e| format!("line {}: the result is not base64: {e}", o.line))?;
    if bytes.len() != o.head.len || crc32fast::hash(&bytes) != o.head.crc {
        return Err(format!(
            "line {}: the result of shard {} is damaged (length or checksum differ)",
            o.line, o.head.shard
        ));
    }
    Ok(Frame {
        shard: o.head.shard,
        run: o.head.run,
        line: o.line,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_several_prefixed_pods_interleave() {
        let a = encode("0/2", "ab", &[7u8; 200]);
        let b = encode("1/2", "ab", b"{\"x\":1}");
        let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
        let mut log = String::from("report text\n");
        for i in 0..a.len().max(b.len()) {
            for (p, f) in [("[pod/j-0/c] ", &a), ("[pod/j-1/c] ", &b)] {
                if let Some(l) = f.get(i) {
                    log.push_str(&format!("{p}{l}\n"));
                }
            }
        }
        let frames: Vec<Frame> = decode(&log)
            .into_iter()
            .map(|f| f.expect("intact"))
            .collect();
        assert_eq!(frames.len(), 2);
        let shard0 = frames.iter().find(|f| f.shard == "0/2").expect("shard 0");
        assert_eq!(shard0.bytes, [7u8; 200]);
        assert_eq!(shard0.run, "ab");
    }

    #[test]
    fn a_damaged_or_cut_frame_is_an_error_naming_its_line() {
        let f = encode("0/1", "ab", b"hello world");
        let damaged = f.replacen("aGVs", "aGVt", 1);
        assert!(decode(&damaged)[0]
            .as_ref()
            .is_err_and(|e| e.starts_with("line 1:")));
        let cut: String = f.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert!(decode(&cut)[0]
            .as_ref()
            .is_err_and(|e| e.contains("no end line")));
    }
}
