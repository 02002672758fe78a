//! The engine run in this process against the real reference server.

mod send_lag;
