//! The process actions of `[[chaos]]`: signals to processes on this host, a user's command,
//! and a restart that waits until the process listens again.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use tokio::process::Command;
use tokio::sync::watch;

use crate::scenario::ProcRef;

/// Whether process `pid` exists on this host.
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The processes named `name` (as in `/proc/PID/comm`), ascending.
pub fn named(name: &str) -> Vec<u32> {
    crate::monitor::pids_named(name)
}

/// The process ids `process` names now; `moved` maps a pid a restart replaced to its
/// successor.
pub fn resolve(process: &ProcRef, moved: &[(u32, u32)]) -> Vec<u32> {
    match process {
        ProcRef::Pid(p, _) => {
            let mut pid = *p;
            while let Some(&(_, next)) = moved.iter().find(|(old, _)| *old == pid) {
                pid = next;
            }
            vec![pid]
        }
        ProcRef::Name(n, _) => named(n),
        ProcRef::Listening(addr, _) => listening(addr).into_iter().collect(),
    }
}

/// The process listening on TCP `addr` (`host:port`) on this host, if any: the socket's
/// inode from `/proc/net/tcp{,6}`, then the process holding it (the first found).
pub fn listening(addr: &str) -> Option<u32> {
    use std::net::ToSocketAddrs;
    let wanted: Vec<std::net::SocketAddr> = addr.to_socket_addrs().ok()?.collect();
    let port = wanted.first()?.port();
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Fields: sl, local address (hex IP:port), remote, state (0A: listen), …, inode.
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            let (ip, p) = local.split_once(':')?;
            let ok = *state == "0A"
                && u16::from_str_radix(p, 16).ok()? == port
                && (ip.chars().all(|c| c == '0') || wanted.iter().any(|w| hex_ip(w.ip()) == ip));
            ok.then(|| (*inode).to_owned())
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let sockets: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let fds = std::fs::read_dir(e.path().join("fd")).ok()?;
        fds.flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|l| sockets.iter().any(|s| l.as_os_str() == s.as_str()))
            .then_some(pid)
    })
}

/// An address as `/proc/net/tcp` writes it: the bytes of a 32-bit word in host order, hex.
fn hex_ip(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
        std::net::IpAddr::V6(v6) => v6
            .octets()
            .chunks(4)
            .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    }
}

/// Every process the plan's steps name exists now; otherwise the scenario error at the
/// key that names the missing one (run before anything connects).
pub fn check(steps: &[crate::scenario::ChaosStep]) -> crate::Result<()> {
    for p in steps.iter().filter_map(crate::scenario::ChaosStep::process) {
        let (found, origin, what) = match p {
            ProcRef::Pid(pid, o) => (exists(*pid), o, format!("no process {pid} on this host")),
            ProcRef::Name(n, o) => (
                !named(n).is_empty(),
                o,
                format!("no process named `{n}` on this host"),
            ),
            ProcRef::Listening(a, o) => (
                listening(a).is_some(),
                o,
                format!("no process of this host listens on {a} (give `pid` or `process`)"),
            ),
        };
        if !found {
            return Err(crate::Error::Scenario {
                file: origin.file.clone(),
                line: origin.line,
                key: origin.key.clone(),
                msg: what,
            });
        }
    }
    Ok(())
}

/// A signal a step sends.
#[derive(Debug, Clone, Copy)]
pub enum Sig {
    /// SIGKILL.
    Kill,
    /// SIGTERM.
    Term,
    /// SIGSTOP.
    Stop,
    /// SIGCONT.
    Cont,
}

/// Sends `sig` to `pid`; the error says why not.
pub fn signal(pid: u32, sig: Sig) -> Result<(), String> {
    let target = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| format!("{pid} is not a process id"))?;
    let s = match sig {
        Sig::Kill => Signal::KILL,
        Sig::Term => Signal::TERM,
        Sig::Stop => Signal::STOP,
        Sig::Cont => Signal::CONT,
    };
    kill_process(target, s).map_err(|e| format!("signalling process {pid}: {e}"))
}

/// Waits (bounded by `limit`) until process `pid` has gone; whether it did. Gone: no
/// such process, or every thread of it has exited (a zombie waiting for its parent, which
/// holds no file). A leader shown as a zombie is not enough: while another of its threads
/// still exits, the process keeps its sockets open, and a listening one still completes
/// connections.
pub async fn gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    // No event tells another process's end to a non-parent: /proc is polled, briefly.
    while !exited(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// Whether every thread of `pid` has exited (also when there is no such process).
fn exited(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks
        .flatten()
        .all(|t| std::fs::read_to_string(t.path().join("stat")).map_or(true, |s| zombie_stat(&s)))
}

/// Whether a `/proc/…/stat` line is of a task that has exited (`Z`, or `X`: dead).
fn zombie_stat(stat: &str) -> bool {
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
}

/// Whether `pid` has exited and waits for its parent to reap it.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| zombie_stat(&s))
}

/// What a command did.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Its exit code (`None`: killed by a signal, or it could not start).
    pub code: Option<i32>,
    /// The first [`OUTPUT`] bytes of its standard output and error, lossily as text.
    pub output: String,
    /// How long it took.
    pub took: Duration,
}

/// The most output kept of a command.
pub const OUTPUT: usize = 4096;

/// Runs `command` by `sh -c` to its end in a process group of its own, bounded by `limit`
/// and by the run's end (`stop` turning true): then the whole group is killed, so that
/// nothing the command started outlives it.
pub async fn exec(command: &str, limit: Duration, stop: &mut watch::Receiver<bool>) -> Ran {
    let started = Instant::now();
    let child = Command::new("sh")
        .args(["-c", command])
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                code: None,
                output: format!("could not run `sh -c`: {e}"),
                took: started.elapsed(),
            }
        }
    };
    let group = child.id();
    let why = tokio::select! {
        out = tokio::time::timeout(limit, child.wait_with_output()) => match out {
            Ok(Ok(out)) => {
                let mut bytes = out.stdout;
                bytes.extend_from_slice(&out.stderr);
                bytes.truncate(OUTPUT);
                return Ran {
                    code: out.status.code(),
                    output: String::from_utf8_lossy(&bytes).into_owned(),
                    took: started.elapsed(),
                };
            }
            Ok(Err(e)) => format!("waiting for `sh -c`: {e}"),
            Err(_) => format!("still running after {limit:?}: killed with its process group"),
        },
        _ = stop.wait_for(|s| *s) => "still running when the run ended: killed with its process group".to_owned(),
    };
    if let Some(pgid) = group
        .and_then(|g| i32::try_from(g).ok())
        .and_then(Pid::from_raw)
    {
        // Gone already when it ended by itself meanwhile: nothing left to stop.
        let _ = kill_process_group(pgid, Signal::KILL);
    }
    Ran {
        code: None,
        output: why,
        took: started.elapsed(),
    }
}

/// Starts `command` by `sh -c` in the background (in a process group of its own, so that
/// a signal to msgstorm's group — a Ctrl-C in its terminal — does not reach the restarted
/// server) and waits until `listen` accepts a
/// TCP connection, at most `limit` and no longer than the run (`stop` turning true).
/// Returns the new process's pid (the shell's, which `exec`s a simple command) and how
/// long it took to listen.
pub async fn start(
    command: &str,
    listen: &str,
    limit: Duration,
    stop: &watch::Receiver<bool>,
) -> Result<(u32, Duration), String> {
    let started = Instant::now();
    let child = std::process::Command::new("sh")
        .args(["-c", &format!("exec {command}")])
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start `{command}`: {e}"))?;
    let pid = child.id();
    // Reaped by a thread of its own: the restarted server outlives this step.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    let deadline = started + limit;
    loop {
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            return Ok((pid, started.elapsed()));
        }
        if !exists(pid) || zombie(pid) {
            return Err(format!("`{command}` exited before it listened on {listen}"));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "`{command}` did not listen on {listen} within {limit:?}"
            ));
        }
        if *stop.borrow() {
            return Err(format!(
                "`{command}` did not listen on {listen} before the run ended"
            ));
        }
        // Nothing announces a listening socket to another process: retried, briefly.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_process_listening_on_an_address() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        assert_eq!(listening(&addr), Some(std::process::id()));
        drop(l);
        assert_eq!(listening(&addr), None, "nobody listens once it is closed");
    }
}
