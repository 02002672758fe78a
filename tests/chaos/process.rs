//! The process side of `[[chaos]]` on real processes: when a killed process counts as
//! gone, and where a restarted one runs.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use msgstorm::chaos::process;

use crate::common::run::BIN;
use crate::common::SECRET;

/// Field `n` (1-based, as in proc(5)) of `/proc/PID/stat`.
fn stat_field(pid: &str, n: usize) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let (_, rest) = stat.rsplit_once(')').expect("comm in parentheses");
    rest.split_whitespace()
        .nth(n - 3)
        .expect("the field")
        .to_owned()
}

/// A process whose main thread exited while another thread still holds its listening
/// socket shows as a zombie (`Z`) in `/proc/PID/stat`, yet it is not gone: connections to
/// its socket still complete, so a restart's probe would find the dying process. It is
/// gone once every thread has exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_leader_with_a_live_thread_is_not_gone() {
    let script = "import socket, threading, time, ctypes, sys\n\
                  s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(16)\n\
                  print(s.getsockname()[1], flush=True)\n\
                  threading.Thread(target=lambda: time.sleep(60), daemon=True).start()\n\
                  ctypes.CDLL(None).pthread_exit(None)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its port");
    let port: u16 = line.trim().parse().expect("a port");
    let pid = child.id();
    // Its main thread's exit is an event in /proc only: waited for, bounded.
    let mut leader_zombie = false;
    for _ in 0..500 {
        leader_zombie = stat_field(&pid.to_string(), 3) == "Z";
        if leader_zombie {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(leader_zombie, "the main thread exited");
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok(),
        "its socket still listens"
    );
    assert!(
        !process::gone(pid, Duration::from_millis(300)).await,
        "not gone while a thread holds its socket"
    );
    child.kill().expect("SIGKILL");
    assert!(
        process::gone(pid, Duration::from_secs(5)).await,
        "gone once every thread exited (a zombie until reaped)"
    );
    child.wait().expect("reaped");
}

/// A restarted server runs in a process group of its own, not in msgstorm's (nor this
/// test's): a Ctrl-C to msgstorm's terminal does not take it down with the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_runs_in_its_own_process_group() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = free.local_addr().expect("addr").to_string();
    drop(free);
    let command = format!("{BIN} serve --listen {addr} --secret {SECRET}");
    let (_, running) = tokio::sync::watch::channel(false);
    let (pid, _) = process::start(&command, &addr, Duration::from_secs(30), &running)
        .await
        .expect("it listens");
    let (group, ours) = (stat_field(&pid.to_string(), 5), stat_field("self", 5));
    let _ = process::signal(pid, process::Sig::Term);
    assert_eq!(group, pid.to_string(), "it leads its own process group");
    assert_ne!(group, ours, "not msgstorm's group");
}

/// `command` for `sh -c` that starts a `sleep` in the background, writes its pid to
/// `file`, and waits for it: a command whose own shell is not all there is to stop.
fn sleeper(file: &std::path::Path) -> String {
    format!("sleep 300 & echo $! > {}; wait", file.display())
}

/// The pid written to `file`, once it is there (bounded).
pub(crate) async fn pid_in(file: &std::path::Path) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "no pid in {file:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An `exec` command still running when the run ends is killed at once with everything
/// it started (its process group), not waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_command_is_killed_with_its_process_group_when_the_run_ends() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("pid");
    let (stop, mut stopping) = tokio::sync::watch::channel(false);
    let command = sleeper(&file);
    let exec = tokio::spawn(async move {
        process::exec(&command, Duration::from_secs(60), &mut stopping).await
    });
    let grandchild = pid_in(&file).await;
    stop.send_replace(true);
    let ran = tokio::time::timeout(Duration::from_secs(5), exec)
        .await
        .expect("exec returns at the run's end")
        .expect("exec task");
    assert_eq!(ran.code, None, "{ran:?}");
    assert!(ran.output.contains("when the run ended"), "{ran:?}");
    assert!(
        process::gone(grandchild, Duration::from_secs(5)).await,
        "the command's own child is killed too"
    );
}

/// An `exec` command past its time limit is killed with its process group as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_command_past_its_limit_is_killed_with_its_process_group() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("pid");
    let (_stop, mut running) = tokio::sync::watch::channel(false);
    let ran = process::exec(&sleeper(&file), Duration::from_millis(500), &mut running).await;
    assert!(ran.output.contains("still running after"), "{ran:?}");
    let grandchild = pid_in(&file).await;
    assert!(
        process::gone(grandchild, Duration::from_secs(5)).await,
        "the command's own child is killed too"
    );
}
