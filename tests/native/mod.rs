//! The `native` driver: through its public [`Driver`](msgstorm::driver::Driver) and
//! [`Session`](msgstorm::driver::Session) API against the reference server in this process,
//! and its dry run (`validate --frames`).

mod dry;
mod signals;
