//! The crate's `Error`: setup and configuration failures that end a run, each with the
//! exit code it maps to. Per-message failures are data (see `metrics::ErrorKind`), not errors.
//!
//! The exit codes are a stable contract: 0 every check passed, 1 a check failed (or the run
//! was interrupted), 2 bad usage or scenario, 3 target unreachable, 4 msgstorm itself failed.

use std::path::PathBuf;

/// Exit code: every check passed.
pub const EXIT_OK: u8 = 0;
/// Exit code: at least one check failed (the report names it).
pub const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code: bad usage or a bad scenario.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the target could not be reached at all.
pub const EXIT_UNREACHABLE: u8 = 3;
/// Exit code: msgstorm itself failed (an internal error, a result it could not write, a
/// shard that wrote no result, a runtime that would not start, every connection failing on
/// the generator's own side) — says nothing of the target.
pub const EXIT_TOOL_FAILED: u8 = 4;

/// A failure that ends the command, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The scenario file is wrong; `file:line: key: what` names the spot.
    #[error("{}:{line}: {key}: {msg}", file.display())]
    Scenario {
        /// The scenario file.
        file: PathBuf,
        /// 1-based line of the offending key (0 when unknown, e.g. a `--set` override).
        line: usize,
        /// Dotted key path, e.g. `traffic[0].rate`.
        key: String,
        /// What is wrong and how to fix it.
        msg: String,
    },
    /// A command-line option or argument is wrong.
    #[error("{0}")]
    Usage(String),
    /// The target could not be reached at all (no connection or login ever succeeded).
    #[error("target unreachable: {target}: {reason}")]
    Unreachable {
        /// The URL or peer that was tried.
        target: String,
        /// What happened when it was tried.
        reason: String,
    },
    /// A file or folder the user named (scenario, result file, `--out`) cannot be read or
    /// used.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        source: std::io::Error,
    },
    /// Writing the run's own output (its result file, a shard's log) failed after the run
    /// started: a failure of the tool, not of the user's input.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        source: std::io::Error,
    },
    /// A result file could not be read or understood.
    #[error("{}: {msg}", path.display())]
    Artifact {
        /// The result file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// Every connection of the run failed on the generator's own side (out of local
    /// ports, file descriptors or memory, or a name it could not resolve): nothing of the
    /// target was measured. The result is still written.
    #[error(
        "the generator failed every connection on its own side, so nothing of the target \
         was measured: {0}"
    )]
    Generator(String),
    /// The reference server could not start or failed while serving.
    #[error("server: {0}")]
    Server(String),
    /// Any other failure of msgstorm itself (not of the target, not of the input).
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// The process exit code this error maps to.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Scenario { .. } | Error::Usage(_) => EXIT_USAGE,
            Error::Unreachable { .. } => EXIT_UNREACHABLE,
            Error::Io { .. } | Error::Artifact { .. } => EXIT_USAGE,
            Error::Write { .. } | Error::Generator(_) | Error::Server(_) | Error::Other(_) => {
                EXIT_TOOL_FAILED
            }
        }
    }

    /// The same failure seen as one of writing the run's output: a file error becomes
    /// [`Error::Write`] (exit 4) instead of a usage error.
    pub fn in_output(self) -> Self {
        match self {
            Error::Io { path, source } => Error::Write { path, source },
            other => other,
        }
    }

    /// Wraps an I/O failure with the file it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
