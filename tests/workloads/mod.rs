//! The named workloads run end to end.

mod w3;
