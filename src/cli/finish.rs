//! How a run of `msgstorm run` ends, whether in one process, as local shards or as a
//! Kubernetes Job: its result written, its report printed, its exit code, and the result
//! framed onto the log for a pod.

use super::output::{write_file, Outputs};
use super::{note, say};
use crate::artifact::Artifact;
use crate::error::{Error, Result, EXIT_OK};
use crate::metrics::{Counter, ErrorKind};
use crate::report::format::Format;

/// Writes the result into its folder, prints the report, and returns the exit code.
/// A process that ran one shard of several (`--shard I/N`) exits 0 when only the missing
/// shards fail its report: its result is a part, judged when `report` merges every shard.
pub(super) fn finish(artifact: &Artifact, dir: &std::path::Path, outputs: &Outputs) -> Result<u8> {
    // The report goes out first: a result file that cannot be written must not also
    // cost the numbers on the screen.
    let rendered = crate::report::render(artifact);
    outputs.emit("report", |f| f.for_run().render(&rendered.report))?;
    let path = artifact.write(dir).map_err(Error::in_output)?;
    note(&format!("result: {}", path.display()));
    let page = dir.join("report.html");
    let html = Format::Html.for_run().render(&rendered.report)?;
    write_file(&html, &page).map_err(Error::in_output)?;
    note(&format!("report: {}", page.display()));
    if rendered.partial {
        note(
            "this result is one shard of the run: the run's verdict comes from \
             `msgstorm report` over every shard's result.json",
        );
        return Ok(EXIT_OK);
    }
    if let Some(why) = generator_only(artifact) {
        return Err(Error::Generator(why));
    }
    Ok(rendered.report.exit_code())
}

/// The first of the generator's own failures, when they are why no user ever logged in:
/// every connection attempt failed on the generator's side (errors of kind `generator`),
/// so the target was never tried — msgstorm's failure (exit 4), not the target's.
fn generator_only(a: &Artifact) -> Option<String> {
    let m = &a.metrics;
    let attempts = m.count(Counter::ConnectAttempts);
    let (_, failed, examples) = m.errors().find(|e| e.0 == ErrorKind::Generator)?;
    (attempts > 0 && m.count(Counter::LoginOk) == 0 && failed >= attempts)
        .then(|| examples.first().cloned().unwrap_or_default())
}

/// Prints the result, framed, to standard output ([`crate::launch::frame`]).
pub(super) fn log_result(artifact: &Artifact) -> Result<()> {
    let bytes = serde_json::to_vec(artifact)
        .map_err(|e| Error::Other(format!("cannot encode the result: {e}")))?;
    let shard = artifact
        .shards
        .first()
        .map_or("0/1".to_owned(), |s| format!("{}/{}", s.index, s.count));
    say(crate::launch::frame::encode(&shard, &artifact.run_id, &bytes).trim_end());
    Ok(())
}
