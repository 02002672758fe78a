//! `msgstorm stop`: asks a running msgstorm to stop as Ctrl-C does: the first stop drains
//! in-flight deliveries and still writes the result, a second stops at once. It is how the
//! Kubernetes launcher reaches a shard it cannot signal itself
//! (`kubectl exec POD -- msgstorm stop` signals the container's PID 1).

use rustix::process::{kill_process, Pid, Signal};

use super::note;
use crate::error::{Error, Result, EXIT_OK};

/// Sends SIGTERM to the msgstorm process `pid`, after checking that it is one.
pub fn run(pid: u32) -> Result<u8> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_err(|_| Error::Usage(format!("--pid {pid}: there is no such process")))?;
    let comm = comm.trim_end();
    if !comm.starts_with("msgstorm") {
        return Err(Error::Usage(format!(
            "--pid {pid}: that process is `{comm}`, not msgstorm"
        )));
    }
    if pid == std::process::id() {
        return Err(Error::Usage(format!(
            "--pid {pid}: that is this process; name the msgstorm to stop"
        )));
    }
    let target = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| Error::Usage(format!("--pid {pid}: not a process id")))?;
    kill_process(target, Signal::TERM)
        .map_err(|e| Error::Usage(format!("--pid {pid}: cannot signal it: {e}")))?;
    note(&format!(
        "asked msgstorm (pid {pid}) to stop: it drains and writes its result (stop it again \
         to stop at once)"
    ));
    Ok(EXIT_OK)
}
