//! What a run tells whoever watches it: its stages, a progress snapshot about once a
//! second, and notes for the person running it — delivered to a [`Sink`].
//!
//! A sink is a trait called in line, not a channel: an event is handled before the run
//! goes on, so a note is on the screen before anything the caller prints after the run,
//! the terminal bar updates from the engine's own tick, and no rendering task has to be
//! started, fed and joined. A test collects the events in a `Vec<Event>`.

use crate::engine;

/// Where a run stands, as far as its watcher needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The load starts (the engine's users, or the shards): from here until
    /// [`Stage::Collect`] a stop request drains the run instead of killing it.
    Load,
    /// The load is over (run to its end, drained or stopped); the result is being gathered.
    Collect,
}

/// One thing a run reports while it goes.
#[derive(Debug, Clone)]
pub enum Event {
    /// The run entered a stage.
    Stage(Stage),
    /// A snapshot of the engine's live counters, about once a second during the load.
    Progress(engine::Progress),
    /// A line for the person running msgstorm (not part of the result's own notes).
    Note(String),
}

/// Takes a run's events, in the order the run emits them.
pub trait Sink: Send {
    /// Handles one event; called in line, so it should not block for long.
    fn event(&mut self, event: Event);
}

/// Collecting the events, e.g. to look at them after the run.
impl Sink for Vec<Event> {
    fn event(&mut self, event: Event) {
        self.push(event);
    }
}
