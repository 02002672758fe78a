//! The host's limits a run must fit under: open files (raised to the hard limit first)
//! and ephemeral ports per source address.

use crate::error::{Error, Result};
use crate::scenario::Plan;

/// Sockets the generator needs besides one per user (stdio, the probe, a metrics scrape…).
pub const FD_MARGIN: u64 = 64;

/// Raises the open-file limit and refuses a run of `plan` in this process that cannot fit
/// under it; returns the limit, and adds to `notes` that it was raised.
pub fn check_fd_limit(plan: &Plan, notes: &mut Vec<String>) -> Result<u64> {
    let limit = crate::sys::raise_fd_limit()
        .map_err(|e| Error::Other(format!("cannot read the open-file limit: {e}")))?;
    let users = plan.shard.range(plan.population.users).len() as u64;
    // The embedded server lives in this process and holds the other end of every socket;
    // an in-process driver holds none.
    let per_user = match (&plan.target.endpoint, plan.target.driver.embedded_path) {
        (Some(_), _) => 1,
        (None, Some(_)) => 2,
        (None, None) => 0,
    };
    let needed = users * per_user + FD_MARGIN;
    if needed > limit.now {
        let shards = needed.div_ceil(limit.now.saturating_sub(FD_MARGIN).max(1));
        return Err(Error::Usage(format!(
            "this run needs {needed} sockets in one process, the open-file limit is {}: split it \
             into {shards} generator processes (`--shards {shards}`){}",
            limit.now,
            if per_user == 2 {
                ", and run the server separately (`msgstorm serve`)"
            } else {
                ""
            }
        )));
    }
    check_ports(plan)?;
    if limit.now > limit.was {
        notes.push(format!(
            "raised the open-file limit from {} to {}",
            limit.was, limit.now
        ));
    }
    Ok(limit.now)
}

/// Refuses a run whose connections to one address need more ephemeral ports than its
/// source addresses have: every connection to one target address from one source address
/// needs its own port, and all shards on this host share them.
fn check_ports(plan: &Plan) -> Result<()> {
    let ports = crate::sys::ephemeral_ports();
    let sources = plan.target.source_addrs.len().max(1) as u64;
    let total = u64::from(plan.population.users);
    if total.div_ceil(sources) > ports {
        let want = total.div_ceil(ports);
        return Err(Error::Usage(format!(
            "this run opens {total} connections to one address, and one source address has \
             {ports} ephemeral ports: add source addresses (`[target] source_addresses`, at \
             least {want}, e.g. \"127.0.0.2\" … on loopback)"
        )));
    }
    Ok(())
}

/// Refuses a sharded run of `plan` whose embedded server, living in the coordinating
/// process, would hold every user's socket beyond the open-file limit.
pub fn check_embedded_fd_limit(plan: &Plan) -> Result<()> {
    if plan.target.endpoint.is_some() || plan.target.driver.embedded_path.is_none() {
        return Ok(());
    }
    let limit = crate::sys::raise_fd_limit()
        .map_err(|e| Error::Other(format!("cannot read the open-file limit: {e}")))?;
    let needed = u64::from(plan.population.users) + FD_MARGIN;
    if needed > limit.now {
        return Err(Error::Usage(format!(
            "the embedded server would hold {needed} sockets in one process, the open-file \
             limit is {}: run the server separately (`msgstorm serve`) and point \
             `target.url` at it",
            limit.now
        )));
    }
    Ok(())
}
