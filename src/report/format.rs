//! Output formats: one [`Format`] for every command that prints or writes a report, and one
//! [`Renderer`] trait each format implements (hyperfine's `Exporter`) over what is reported —
//! a run's [`Report`], a comparison ([`super::compare::render::Compared`]), a capacity search
//! (`find.json`). A format is one file with a unit struct implementing the trait; a new one
//! for runs is that file plus one line in [`Format::for_run`].
//!
//! Presentation rules the formats share (numbers, units, the latency table's rows) are in
//! [`super::present`].

use std::path::PathBuf;

use super::model::Report;
pub use super::renderer::Renderer;
use super::{html, json, text};
use crate::error::{Error, Result};

/// A report's output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables for the terminal.
    Text,
    /// The report model as JSON (docs/result.md).
    Json,
    /// One self-contained page with charts.
    Html,
    /// JUnit XML: each check a test case, for CI test reporters.
    Junit,
    /// GitHub-flavoured Markdown: a CI job summary or a pull-request comment.
    Markdown,
}

impl Format {
    /// Its name in `--format`.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }

    /// The renderer of a run's report in this format: every format renders a run.
    pub fn for_run(self) -> &'static dyn Renderer<Report> {
        match self {
            Format::Text => &text::Text,
            Format::Json => &json::Json,
            Format::Html => &html::Html,
            Format::Junit => &super::junit::Junit,
            Format::Markdown => &super::markdown::Markdown,
        }
    }
}

/// The renderer of format `f` among a subject's `renderers` (`what` it is, for the error
/// naming the formats it has: exit 2).
pub fn pick<S: ?Sized>(
    f: Format,
    what: &str,
    renderers: &[(Format, &'static dyn Renderer<S>)],
) -> Result<&'static dyn Renderer<S>> {
    if let Some((_, r)) = renderers.iter().find(|(g, _)| *g == f) {
        return Ok(*r);
    }
    let names: Vec<String> = renderers.iter().map(|(g, _)| g.name()).collect();
    Err(Error::Usage(format!(
        "--format {}: {what} is rendered as {}",
        f.name(),
        names.join(", ")
    )))
}

/// Where one rendering goes: `--format F` prints it, `--format F=FILE` writes it to FILE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The format.
    pub format: Format,
    /// The file; `None`: standard output.
    pub file: Option<PathBuf>,
}

impl Output {
    /// Parses `FORMAT` or `FORMAT=FILE`.
    pub fn parse(s: &str) -> std::result::Result<Output, String> {
        use clap::ValueEnum;
        let (name, file) = match s.split_once('=') {
            Some((name, file)) if !file.is_empty() => (name, Some(PathBuf::from(file))),
            Some(_) => return Err(format!("`{s}`: give a file after `=`, or no `=`")),
            None => (s, None),
        };
        let format = Format::from_str(name, true).map_err(|_| {
            let names: Vec<String> = Format::value_variants().iter().map(|f| f.name()).collect();
            format!("`{name}`: expected one of {}", names.join(", "))
        })?;
        Ok(Output { format, file })
    }

    /// What standard output gets of `outputs`: the one without a file, else `default`;
    /// two without a file are a usage error.
    pub fn stdout(outputs: &[Output], default: Format) -> Result<Format> {
        let mut printed = outputs.iter().filter(|o| o.file.is_none());
        match (printed.next(), printed.next()) {
            (None, _) => Ok(default),
            (Some(one), None) => Ok(one.format),
            (Some(a), Some(b)) => Err(Error::Usage(format!(
                "--format {} and --format {} both print to standard output: write one to a \
                 file with --format FORMAT=FILE (--json is --format json)",
                a.format.name(),
                b.format.name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_is_a_format_and_maybe_a_file() {
        assert_eq!(
            Output::parse("html=out/report.html"),
            Ok(Output {
                format: Format::Html,
                file: Some(PathBuf::from("out/report.html"))
            })
        );
        assert_eq!(
            Output::parse("JSON").map(|o| (o.format, o.file)),
            Ok((Format::Json, None))
        );
        let bad = Output::parse("yaml").expect_err("unknown");
        assert!(bad.contains("expected one of text, json, html"), "{bad}");
        assert!(Output::parse("json=").is_err());
    }

    #[test]
    fn one_output_at_most_goes_to_standard_output() {
        let parse = |s: &str| Output::parse(s).expect("parses");
        assert_eq!(Output::stdout(&[], Format::Text).ok(), Some(Format::Text));
        let outs = [parse("html=a.html"), parse("json")];
        assert_eq!(Output::stdout(&outs, Format::Text).ok(), Some(Format::Json));
        let two = [parse("json"), parse("text")];
        let err = Output::stdout(&two, Format::Text).expect_err("two on stdout");
        assert!(err.to_string().contains("both print"), "{err}");
    }
}
