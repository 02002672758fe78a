//! Where a command's report goes: `--format` (with its older spellings `--json` and
//! `--html`) resolved to what standard output gets and which files are written, each
//! rendered through [`crate::report::format`].

use std::path::{Path, PathBuf};

use super::{note, say};
use crate::error::{Error, Result};
use crate::report::format::{Format, Output};

/// Options every command that prints a report shares.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FormatArgs {
    /// Print the report as FORMAT instead of tables: text, json, html, junit (JUnit XML,
    /// each check a test case) or markdown (a CI job summary) (`compare`: all but junit;
    /// `find`: text or json);
    /// FORMAT=FILE writes it to FILE instead (repeatable, e.g. `--format junit=junit.xml`).
    #[arg(long = "format", value_name = "FORMAT[=FILE]", value_parser = Output::parse)]
    pub outputs: Vec<Output>,
}

/// The outputs of one command, resolved: what standard output gets, and the files.
#[derive(Debug)]
pub(super) struct Outputs {
    stdout: Format,
    files: Vec<(Format, PathBuf)>,
}

impl Outputs {
    /// `--format` of `args` with the older flags' outputs added (`--json`: json printed,
    /// `--html FILE`: html written); at most one prints.
    pub(super) fn resolve(
        args: &FormatArgs,
        aliases: impl IntoIterator<Item = Output>,
    ) -> Result<Outputs> {
        let all: Vec<Output> = args.outputs.iter().cloned().chain(aliases).collect();
        let stdout = Output::stdout(&all, Format::Text)?;
        let files = all
            .into_iter()
            .filter_map(|o| o.file.map(|f| (o.format, f)))
            .collect();
        Ok(Outputs { stdout, files })
    }

    /// Renders every output (a format `render` refuses fails before anything is printed),
    /// prints the one standard output gets, then writes every file, saying each on stderr as
    /// `WHAT: FILE` — a file that cannot be written must not also cost the report on the
    /// screen.
    pub(super) fn emit(&self, what: &str, render: impl Fn(Format) -> Result<String>) -> Result<()> {
        let printed = render(self.stdout)?;
        let written = self
            .files
            .iter()
            .map(|(format, file)| Ok((render(*format)?, file)))
            .collect::<Result<Vec<_>>>()?;
        say(&printed);
        for (text, file) in written {
            write_file(&text, file)?;
            note(&format!("{what}: {}", file.display()));
        }
        Ok(())
    }

    /// Fails with the first format `supported` refuses: before a command's work, not after.
    pub(super) fn check<T>(&self, supported: impl Fn(Format) -> Result<T>) -> Result<()> {
        std::iter::once(self.stdout)
            .chain(self.files.iter().map(|(f, _)| *f))
            .try_for_each(|f| supported(f).map(drop))
    }
}

/// Writes a rendering to `path` through a temporary file beside it, so that a reader never
/// sees half of it.
pub(super) fn write_file(text: &str, path: &Path) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}
