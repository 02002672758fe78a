//! `msgstorm collect`: the shards' results from their logs (`kubectl logs … --prefix`
//! output, [`crate::launch::frame`]) into `shard-I/result.json` files, merged exactly into
//! the run's `result.json` and reported, as `msgstorm report` would.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::note;
use super::output::Outputs;
use crate::artifact::Artifact;
use crate::error::{Error, Result};
use crate::launch::frame;

/// A framed result and where it was found.
struct Found {
    bytes: Vec<u8>,
    at: String,
}

/// Reads `logs` (standard input when empty or `-`), writes each shard's result and the
/// merged one under `out`, prints the report (and writes its `--format` files), and returns the report's exit code.
pub(super) fn run(logs: &[PathBuf], out: &Path, outputs: &Outputs) -> Result<u8> {
    let stdin = [PathBuf::from("-")];
    let logs = if logs.is_empty() { &stdin[..] } else { logs };
    let mut shards: BTreeMap<u32, Found> = BTreeMap::new();
    for log in logs {
        read_frames(log, &mut shards)?;
    }
    if shards.is_empty() {
        return Err(Error::Usage(
            "no framed result in the logs: were the shards run with --log-result (as \
             `msgstorm k8s` has them), and the logs read with `kubectl logs --tail=-1`?"
                .to_owned(),
        ));
    }
    let mut files = Vec::new();
    for (index, found) in &shards {
        let artifact = Artifact::from_slice(&found.bytes).map_err(|msg| Error::Artifact {
            path: PathBuf::from(&found.at),
            msg,
        })?;
        let path = artifact
            .write(&out.join(format!("shard-{index}")))
            .map_err(Error::in_output)?;
        files.push(path);
    }
    let merged = Artifact::read_merged(&files)?;
    let missing = merged.missing_shards();
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(u32::to_string).collect();
        note(&format!(
            "no result of shard(s) {} of {} in the logs: the report is incomplete",
            list.join(", "),
            merged.shard_count()
        ));
    }
    let report = crate::report::Report::new(&merged);
    outputs.emit("report", |f| f.for_run().render(&report))?;
    let path = merged.write(out).map_err(Error::in_output)?;
    note(&format!("result: {}", path.display()));
    Ok(report.exit_code())
}

/// Adds the framed results in `log` (`-`: standard input) to `shards`, refusing a shard
/// with two different results.
fn read_frames(log: &Path, shards: &mut BTreeMap<u32, Found>) -> Result<()> {
    let (text, name) = if log.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Error::io("<stdin>", e))?;
        (text, PathBuf::from("<stdin>"))
    } else {
        let bytes = std::fs::read(log).map_err(|e| Error::io(log, e))?;
        (String::from_utf8_lossy(&bytes).into_owned(), log.to_owned())
    };
    for frame in frame::decode(&text) {
        let frame = frame.map_err(|msg| Error::Artifact {
            path: name.clone(),
            msg,
        })?;
        let at = format!("{}:{}", name.display(), frame.line);
        let index = frame
            .shard
            .split_once('/')
            .and_then(|(i, _)| i.parse::<u32>().ok())
            .ok_or_else(|| Error::Artifact {
                path: name.clone(),
                msg: format!("line {}: `{}` is not a shard I/N", frame.line, frame.shard),
            })?;
        match shards.get(&index) {
            Some(seen) if seen.bytes != frame.bytes => {
                return Err(Error::Usage(format!(
                    "{at}: shard {} has another result at {}: a retried pod? collect \
                     the logs of one run once",
                    frame.shard, seen.at
                )))
            }
            Some(_) => {}
            None => {
                shards.insert(
                    index,
                    Found {
                        bytes: frame.bytes,
                        at,
                    },
                );
            }
        }
    }
    Ok(())
}
