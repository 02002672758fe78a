//! The terminal side of a run's events ([`crate::run::Event`]): the live progress while
//! the load goes, notes on stderr, and Ctrl-C / SIGTERM turned into the run's stop
//! requests while they can be honoured.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::note;
use super::progress::{Progress, Timeline};
use crate::run::{Event, Sink, Stage};
use crate::scenario::Plan;

/// Renders one run's events and counts its stop signals.
pub(super) struct Watch {
    /// What the progress display needs (`None`: no progress, as for a coordinator).
    shown: Option<(bool, u32, Timeline)>,
    /// The live progress, from the start of the load to its end.
    progress: Option<Progress>,
    /// The run's stop requests, until the listener takes them.
    stops: Option<watch::Sender<u32>>,
    /// The signal listener, while the load goes.
    listener: Option<JoinHandle<()>>,
}

impl Watch {
    /// The watch of a run of `plan` (no progress when `quiet`), and the stop requests to
    /// give the run.
    pub(super) fn run(plan: &Plan, quiet: bool) -> (Watch, watch::Receiver<u32>) {
        Self::new(Some((quiet, plan.population.users, Timeline::of(plan))))
    }

    /// The watch of a run's shards, which show no progress of their own here.
    pub(super) fn shards() -> (Watch, watch::Receiver<u32>) {
        Self::new(None)
    }

    fn new(shown: Option<(bool, u32, Timeline)>) -> (Watch, watch::Receiver<u32>) {
        let (tx, rx) = watch::channel(0u32);
        let w = Watch {
            shown,
            progress: None,
            stops: Some(tx),
            listener: None,
        };
        (w, rx)
    }

    /// The load starts: show its progress, and listen for signals.
    fn start(&mut self) {
        if let Some((quiet, users, timeline)) = self.shown {
            self.progress = Some(Progress::new(quiet, users, timeline));
        }
        if let Some(tx) = self.stops.take() {
            self.listener = Some(tokio::spawn(count_signals(tx)));
        }
    }

    /// The load is over: remove the status line, and stop listening.
    fn end(&mut self) {
        if let Some(progress) = &mut self.progress {
            progress.finish();
        }
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
    }
}

impl Sink for Watch {
    fn event(&mut self, event: Event) {
        match event {
            Event::Stage(Stage::Load) => self.start(),
            Event::Stage(Stage::Collect) => self.end(),
            Event::Progress(p) => {
                if let Some(progress) = &mut self.progress {
                    progress.update(&p);
                }
            }
            // A note may quote a shard's log or a server's answer: one line, shown.
            Event::Note(text) => note(&crate::untrusted::line(&text)),
        }
    }
}

impl Drop for Watch {
    /// A run that failed mid-load leaves no listener behind.
    fn drop(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
    }
}

/// Counts SIGINT/SIGTERM: the first stops the load and drains, the second stops at once.
async fn count_signals(tx: watch::Sender<u32>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let n = *tx.borrow() + 1;
        note(if n == 1 {
            "stopping: draining in-flight deliveries (signal again to stop at once)"
        } else {
            "stopping now"
        });
        tx.send_replace(n);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
