//! Running a scenario as a library function.

mod library;
pub mod transports;
