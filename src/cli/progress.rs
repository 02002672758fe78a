//! Live progress of a run: a status line on a terminal, plain lines every few seconds when
//! stderr is not one (CI logs).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::engine;

/// Interval of plain progress lines when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Shows a run's progress.
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    last_plain: Instant,
    last: engine::Progress,
    users: u32,
}

impl Progress {
    /// Progress for a run of `users` users; nothing at all when `quiet`.
    pub fn new(quiet: bool, users: u32) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            plain: !quiet && !terminal,
            last_plain: Instant::now(),
            last: engine::Progress::default(),
            users,
        }
    }

    /// Shows a new snapshot (called about once a second).
    pub fn update(&mut self, p: &engine::Progress) {
        let dt = p
            .elapsed
            .saturating_sub(self.last.elapsed)
            .as_secs_f64()
            .max(1e-3);
        let send_rate = p.sent.saturating_sub(self.last.sent) as f64 / dt;
        let recv_rate = p.received.saturating_sub(self.last.received) as f64 / dt;
        let line = format!(
            "{:<7} online {}/{}  send {:.0}/s  recv {:.0}/s  replies {}  e2e p99 {:.1} ms  errors {}",
            p.phase,
            p.online,
            self.users,
            send_rate,
            recv_rate,
            p.replies,
            p.e2e_p99_us as f64 / 1000.0,
            p.errors
        );
        self.last = *p;
        if let Some(bar) = &self.bar {
            bar.set_message(line);
        } else if self.plain && self.last_plain.elapsed() >= PLAIN_EVERY {
            self.last_plain = Instant::now();
            super::note(&format!("[{:>6.1}s] {line}", p.elapsed.as_secs_f64()));
        }
    }

    /// Removes the status line.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
