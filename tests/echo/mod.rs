//! The echo endpoint and echo runs.

mod smoke;
