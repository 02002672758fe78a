//! `[monitor] prometheus`: a run scraping its target's metrics.

mod prometheus;
