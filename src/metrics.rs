//! Metrics (placeholder while the ledger builds).
