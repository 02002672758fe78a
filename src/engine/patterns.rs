//! Totals by traffic pattern, for live views (the `pattern` label of the OpenMetrics
//! series): messages each `[[traffic]]` pattern sent, received and their end-to-end
//! latency. Kept only when something watches the run live: without a live view the table
//! is empty and the users record nothing here.

use std::ops::Range;

use hdrhistogram::Histogram;

use crate::scenario::{Plan, StreamId, TrafficShape};

/// The patterns that carry messages (direct, group, echo), by their streams.
#[derive(Debug, Default)]
pub struct Patterns {
    /// Each pattern's streams and its index in `names`.
    streams: Vec<(Range<StreamId>, usize)>,
    /// Pattern names, in plan order (only those that carry messages).
    pub names: Vec<String>,
}

impl Patterns {
    /// The message patterns of `plan`.
    pub fn of(plan: &Plan) -> Patterns {
        let mut out = Patterns::default();
        for t in &plan.traffic {
            let (base, n) = match &t.kind {
                TrafficShape::Direct(d) => (d.stream_base, d.senders.len() * d.receivers.len()),
                TrafficShape::Group(g) => {
                    (g.stream_base, g.groups.len() * g.senders_per_group as usize)
                }
                TrafficShape::Echo(e) => (e.stream_base, e.users.len()),
                TrafficShape::Trace(t) => {
                    let n: usize = t.senders.iter().map(|s| s.targets.len()).sum();
                    (t.stream_base, n)
                }
                TrafficShape::Chat(c) => {
                    let speakers: usize = c.groups.iter().map(|g| g.senders.len()).sum();
                    (c.stream_base, c.contacts.slots() + speakers)
                }
                TrafficShape::Idle { .. } | TrafficShape::Request(_) => continue,
            };
            out.streams
                .push((base..base + n as StreamId, out.names.len()));
            out.names.push(t.name.clone());
        }
        out
    }

    /// Each pattern's streams, with its name.
    pub fn ranges(&self) -> impl Iterator<Item = (Range<StreamId>, &str)> + '_ {
        self.streams
            .iter()
            .map(|(r, i)| (r.clone(), self.names[*i].as_str()))
    }

    /// The pattern `stream` belongs to.
    pub fn of_stream(&self, stream: StreamId) -> Option<usize> {
        self.streams
            .iter()
            .find(|(r, _)| r.contains(&stream))
            .map(|(_, i)| *i)
    }
}

/// What one pattern did so far.
#[derive(Debug, Clone)]
pub struct PatternTotals {
    /// Sends written.
    pub sent: u64,
    /// Copies of its messages received intact (duplicates included).
    pub received: u64,
    /// End-to-end latency of its live deliveries, µs (up to a minute, two digits).
    pub e2e: Histogram<u64>,
}

/// The highest end-to-end latency a pattern's histogram holds, µs (higher ones count
/// as this).
const MAX_US: u64 = 60_000_000;

impl Default for PatternTotals {
    fn default() -> Self {
        PatternTotals {
            sent: 0,
            received: 0,
            e2e: Histogram::new_with_bounds(1, MAX_US, 2).expect("constant bounds are valid"),
        }
    }
}

impl PatternTotals {
    /// Adds `o`'s totals.
    pub fn add(&mut self, o: &PatternTotals) {
        self.sent += o.sent;
        self.received += o.received;
        if !o.e2e.is_empty() {
            self.e2e.add(&o.e2e).expect("all have the same bounds");
        }
    }

    /// Counts a copy received intact; `push_us` is its end-to-end latency when it came
    /// live (a sync's lateness is the user's absence, not a latency).
    pub fn receipt(&mut self, push_us: Option<u64>) {
        self.received += 1;
        if let Some(us) = push_us {
            self.e2e.saturating_record(us.min(MAX_US));
        }
    }
}

/// The pattern `i` of `totals`, created (with those before it) when first touched.
pub fn slot(totals: &mut Vec<PatternTotals>, i: usize) -> &mut PatternTotals {
    if totals.len() <= i {
        totals.resize_with(i + 1, PatternTotals::default);
    }
    &mut totals[i]
}
