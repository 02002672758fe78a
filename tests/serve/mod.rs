//! The reference server (`msgstorm serve`) spoken to frame by frame.

mod durability;
mod faults;
mod hostile;
mod limits;
mod login;
mod messaging;
mod policy;
mod rpc;
mod signals;
mod slow;
