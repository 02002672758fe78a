//! `msgstorm size`: the sizing table of a load, from what a run (or the highest passing
//! step of a `find`) measured of its target.

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::artifact::Artifact;
use crate::error::{Error, Result, EXIT_OK};
use crate::find::FindResult;
use crate::sizing::{self, Load};

/// Options of `msgstorm size`.
#[derive(Debug, Args)]
pub struct SizeArgs {
    /// A `result.json` of a run with `[monitor]`ed target processes (or of the embedded
    /// server), or a `find.json`: then its highest passing step's result.
    pub result: PathBuf,
    /// Registered users.
    #[arg(long)]
    pub users: u64,
    /// Users online at once: a fraction (`0.1`) or a percentage (`10%`) of `--users`.
    #[arg(long, value_parser = parse_fraction)]
    pub online: f64,
    /// Messages sent per second, in all.
    #[arg(long, value_parser = parse_positive)]
    pub rate: f64,
    /// Members per conversation: 2 for one-to-one chat (the default), G for groups of G.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    pub group_size: u64,
    /// Body size in bytes (default: the measured run's).
    #[arg(long, value_parser = parse_positive)]
    pub size: Option<f64>,
}

fn parse_positive(s: &str) -> std::result::Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("`{s}`: a positive number"))
}

fn parse_fraction(s: &str) -> std::result::Result<f64, String> {
    let (v, scale) = match s.strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s, 1.0),
    };
    v.trim()
        .parse::<f64>()
        .ok()
        .map(|v| v / scale)
        .filter(|f| *f > 0.0 && *f <= 1.0)
        .ok_or_else(|| {
            format!("`{s}`: a fraction in (0, 1] such as 0.1, or a percentage such as 10%")
        })
}

/// The result file `msgstorm size` measures: `--result` itself, or for a `find.json` the
/// result of its highest passing step.
fn result_path(args: &SizeArgs) -> Result<std::path::PathBuf> {
    let Some(found) = FindResult::read_if_find(&args.result)? else {
        return Ok(args.result.clone());
    };
    let best = found
        .answer
        .highest_pass
        .and_then(|v| found.steps.iter().find(|s| s.value == v));
    let best = best.ok_or_else(|| {
        Error::Usage(format!(
            "{}: no step of this search passed",
            args.result.display()
        ))
    })?;
    Ok(args
        .result
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(&best.result))
}

/// Runs `msgstorm size` and returns the exit code.
pub fn run(args: SizeArgs) -> Result<u8> {
    let path = result_path(&args)?;
    let a = Artifact::read(&path)?;
    // A run whose generator fell behind did not offer its load: nothing to scale from.
    if crate::report::Report::new(&a).generator_fell_behind() {
        return Err(Error::Usage(format!(
            "{}: the generator fell behind its schedule in this run (run.generator), so it \
             measured no capacity of the target: size from a run that kept its schedule",
            path.display()
        )));
    }
    let b = sizing::basis(&a).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    let load = Load {
        users: args.users,
        online: args.online,
        rate: args.rate,
        group_size: args.group_size,
        size: args.size,
    };
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    t.set_header(vec![
        "sizing",
        "needs",
        "measured basis (± one standard error)",
    ]);
    for l in sizing::size(&b, &load) {
        t.add_row(vec![l.what, l.value, l.basis]);
    }
    say(&format!(
        "sizing from {} — {}{}; measured at {} online, {:.0} deliveries/s\n\
         load: {} users, {:.1}% online, {} msg/s, conversations of {}, {}\n\n{t}",
        path.display(),
        // Process names as the result file has them: shown, as any outside text.
        b.processes
            .iter()
            .map(|p| crate::untrusted::quote(p))
            .collect::<Vec<_>>()
            .join(", "),
        if b.embedded {
            " (the embedded server: the generator's own use is included, an upper bound)"
        } else {
            ""
        },
        b.online_peak,
        b.delivered_per_s,
        args.users,
        args.online * 100.0,
        args.rate,
        args.group_size,
        args.size.map_or_else(
            || "the measured body size".to_owned(),
            |s| format!("{s} B bodies")
        ),
    ));
    let missing: Vec<&str> = [
        (
            b.memory_per_user_bytes.is_none(),
            "memory (fewer than 3 seconds of login phase with users arriving, or for a day of \
             sessions, seconds that set a new most users online)",
        ),
        (
            b.cpu_s_per_1000.is_none(),
            "CPU (no second with deliveries)",
        ),
    ]
    .iter()
    .filter(|(m, _)| *m)
    .map(|(_, w)| *w)
    .collect();
    if !missing.is_empty() {
        say(&format!("not measured in this run: {}", missing.join("; ")));
    }
    Ok(EXIT_OK)
}
