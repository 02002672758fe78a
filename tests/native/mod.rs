//! The `native` driver through its public [`Driver`](msgstorm::driver::Driver) and
//! [`Session`](msgstorm::driver::Session) API against the reference server in this process.

mod signals;
