//! The physical limit of receiving (issue 40): a minimal receiver of group pushes from
//! `msgstorm serve`, with no engine, ledger or async runtime in the measured loop.
//!
//! Set-up (not measured): `users` logins and `groups` groups of `group-size` members
//! (`setup`). Measured: one thread receives every push with a hand-written frame reader
//! (`frames`) in mode `epoll` (`epoll`) or `uring` (io_uring multishot receive with a
//! provided buffer ring, `uring`), and sends the groups' messages at a paced rate
//! (`pace`), in the same thread or, with `--send-thread`, another one. It prints one line
//! of `key=value`: deliveries per second and per CPU-second, the user/system split, mean
//! frames per read.
//!
//! `bench/engine/recv-limit.sh` runs it beside `msgstorm run` and k6.

// Raw sockets, epoll and io_uring's shared buffer ring are the point of this program;
// each `unsafe` block says what it relies on.
#![allow(unsafe_code)]
// A command-line tool: its result goes to stdout, its one-line failure to stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cpu;
mod epoll;
mod frames;
mod pace;
mod setup;
mod uring;

use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

use crate::cpu::Usage;
use crate::frames::Tally;
use crate::pace::{Pacer, Progress, Ticks};
use crate::setup::Shape;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the measured thread waits and reads.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// epoll_pwait2 and one recv per ready connection until drained.
    Epoll,
    /// io_uring multishot receive with a provided buffer ring.
    Uring,
}

#[derive(Parser)]
struct Args {
    /// How the receiving thread waits and reads.
    #[arg(long, value_enum, default_value_t = Mode::Epoll)]
    mode: Mode,
    /// Address of `msgstorm serve`, e.g. 127.0.0.1:7701.
    #[arg(long)]
    addr: SocketAddr,
    /// The secret the server was started with (it signs the login tokens).
    #[arg(long)]
    secret: String,
    /// Users logged in (u0, u1, …).
    #[arg(long, default_value_t = 2000)]
    users: usize,
    /// Groups (g0, g1, …), of consecutive users.
    #[arg(long, default_value_t = 200)]
    groups: usize,
    /// Members per group.
    #[arg(long, default_value_t = 10)]
    group_size: usize,
    /// Senders per group (its first members).
    #[arg(long, default_value_t = 2)]
    senders_per_group: usize,
    /// Messages per second, all senders together.
    #[arg(long, default_value_t = 4000)]
    rate: u64,
    /// Seconds of sending.
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// Body bytes per message.
    #[arg(long, default_value_t = 100)]
    body: usize,
    /// Messages per burst: a sender writes this many at once (one `send`), so each
    /// member's outbox on the server holds as many pushes when its writer wakes.
    #[arg(long, default_value_t = 1)]
    burst: u64,
    /// Send from a thread of its own (plain blocking-paced `send`), so the receiving
    /// thread's CPU is the receive path alone.
    #[arg(long)]
    send_thread: bool,
    /// Sleep to ticks this many microseconds apart and take what is ready, instead of
    /// sleeping until a connection is ready (0).
    #[arg(long, default_value_t = 0)]
    tick_us: u64,
    /// Seconds after the last send to wait for the last deliveries.
    #[arg(long, default_value_t = 10)]
    grace: u64,
}

/// When the measured phase is over.
#[derive(Debug)]
pub struct Goal {
    /// Pushes per message sent (members but the sender).
    fanout: u64,
    /// The time bound, whatever was counted.
    deadline: Instant,
}

impl Goal {
    /// Whether every message sent so far was delivered and acknowledged after the last
    /// send, or the deadline passed.
    pub fn over(&self, progress: &Progress, tally: &Tally, now: Instant) -> bool {
        let (sent, finished) = progress.get();
        let counted = tally.msgs >= sent * self.fanout && tally.acks >= sent;
        now >= self.deadline || (finished && counted)
    }
}

/// What the measured loop works on: the sockets, the senders when they run in-line, when
/// to stop and how to sleep.
pub struct Lap<'a> {
    /// Every user's socket, in user order.
    conns: &'a [TcpStream],
    /// The senders, when the loop sends too.
    pacer: Option<&'a mut Pacer>,
    /// How far the senders are.
    progress: &'a Progress,
    /// When to stop.
    goal: &'a Goal,
    /// Sleep until readiness or to ticks.
    ticks: Ticks,
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("recv_limit: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), BoxError> {
    let shape = check(args)?;
    let setup_started = Instant::now();
    let conns = setup::connect_all(args.addr, &args.secret, shape)?;
    let setup_s = setup_started.elapsed().as_secs_f64();
    let duration = Duration::from_secs(args.duration);
    let mut pacer = Pacer::new(
        shape,
        args.senders_per_group,
        args.rate,
        duration,
        args.burst,
        args.body,
    )?;
    let progress = Progress::default();
    let goal = Goal {
        fanout: (args.group_size - 1) as u64,
        deadline: Instant::now() + duration + Duration::from_secs(args.grace),
    };
    let ticks = Ticks::new((args.tick_us > 0).then(|| Duration::from_micros(args.tick_us)));
    let started = (Instant::now(), Usage::process(), Usage::thread());
    let (tally, sender) = if args.send_thread {
        let fds: Vec<RawFd> = conns.iter().map(AsRawFd::as_raw_fd).collect();
        std::thread::scope(|s| {
            let sender = s.spawn(|| -> Result<Usage, BoxError> {
                let before = Usage::thread();
                pacer.run_blocking(&fds, &progress)?;
                Ok(Usage::thread().since(before))
            });
            let lap = Lap {
                conns: &conns,
                pacer: None,
                progress: &progress,
                goal: &goal,
                ticks,
            };
            let tally = receive(args.mode, lap);
            let sender = sender.join().map_err(|_| "the sender thread panicked")?;
            Ok::<_, BoxError>((tally?, Some(sender?)))
        })?
    } else {
        pacer.start();
        let lap = Lap {
            conns: &conns,
            pacer: Some(&mut pacer),
            progress: &progress,
            goal: &goal,
            ticks,
        };
        let tally = receive(args.mode, lap)?;
        (tally, None)
    };
    let (sent, _) = progress.get();
    let m = Measured {
        setup_s,
        secs: started.0.elapsed().as_secs_f64(),
        process: Usage::process().since(started.1),
        receiver: Usage::thread().since(started.2),
        sender,
        sent,
        missing: (sent * goal.fanout).saturating_sub(tally.msgs),
        tally,
    };
    report(args, &m);
    if m.tally.errors > 0 {
        return Err(format!("the server sent {} error frames", m.tally.errors).into());
    }
    if m.missing > 0 || m.tally.acks < sent {
        let (missing, acks) = (m.missing, m.tally.acks);
        return Err(format!("{missing} deliveries missing, {acks} of {sent} acks").into());
    }
    Ok(())
}

fn receive(mode: Mode, lap: Lap<'_>) -> Result<Tally, BoxError> {
    match mode {
        Mode::Epoll => epoll::run(lap),
        Mode::Uring => uring::run(lap),
    }
}

/// The population, once the arguments are known to make sense.
fn check(args: &Args) -> Result<Shape, BoxError> {
    let shape = Shape {
        users: args.users,
        groups: args.groups,
        size: args.group_size,
    };
    if shape.groups * shape.size > shape.users {
        return Err(format!(
            "--groups {} of --group-size {} need {} users, --users is {}",
            shape.groups,
            shape.size,
            shape.groups * shape.size,
            shape.users
        )
        .into());
    }
    if args.senders_per_group == 0 || args.senders_per_group > args.group_size {
        return Err("--senders-per-group must be 1 ..= --group-size".into());
    }
    if args.groups == 0 || args.group_size < 2 || args.burst == 0 || args.rate == 0 {
        return Err("--groups, --rate and --burst must be at least 1, --group-size 2".into());
    }
    Ok(shape)
}

/// What a run measured.
struct Measured {
    /// Seconds of logins and group joins.
    setup_s: f64,
    /// Seconds from the first send to the end.
    secs: f64,
    /// Frames counted.
    tally: Tally,
    /// The process's CPU over the measured phase.
    process: Usage,
    /// The receiving thread's.
    receiver: Usage,
    /// The sending thread's, when it is another one.
    sender: Option<Usage>,
    /// Messages sent.
    sent: u64,
    /// Deliveries that did not come.
    missing: u64,
}

/// Prints the run's one line of `key=value`.
fn report(args: &Args, m: &Measured) {
    let (t, process, receiver) = (&m.tally, m.process, m.receiver);
    let (setup_s, secs, sent, missing) = (m.setup_s, m.secs, m.sent, m.missing);
    let per = |n: u64, d: f64| if d > 0.0 { n as f64 / d } else { 0.0 };
    let mode = match args.mode {
        Mode::Epoll => "epoll",
        Mode::Uring => "uring",
    };
    let mut line = format!(
        "mode={mode} burst={} tick_us={} rate={} users={} setup_s={setup_s:.1} secs={secs:.2} \
         sent={sent} deliveries={} missing={missing} acks={} deliveries_per_s={:.0} cpu_s={:.3} user_s={:.3} \
         sys_s={:.3} deliveries_per_cpu_s={:.0} reads={} empty_reads={} waits={} \
         frames_per_read={:.2} bytes_per_read={:.0} deliveries_per_wait={:.2} sleeps={} deliveries_per_sleep={:.2}",
        args.burst,
        args.tick_us,
        args.rate,
        args.users,
        t.msgs,
        t.acks,
        per(t.msgs, secs),
        process.total_s(),
        process.user.as_secs_f64(),
        process.sys.as_secs_f64(),
        per(t.msgs, process.total_s()),
        t.reads,
        t.empty_reads,
        t.waits,
        per(t.frames, t.reads as f64),
        per(t.bytes, t.reads as f64),
        per(t.msgs, t.waits as f64),
        process.sleeps,
        per(t.msgs, process.sleeps as f64),
    );
    if let Some(s) = m.sender {
        line += &format!(
            " recv_thread_cpu_s={:.3} recv_user_s={:.3} recv_sys_s={:.3} \
             recv_deliveries_per_cpu_s={:.0} send_thread_cpu_s={:.3} sends_per_cpu_s={:.0}",
            receiver.total_s(),
            receiver.user.as_secs_f64(),
            receiver.sys.as_secs_f64(),
            per(t.msgs, receiver.total_s()),
            s.total_s(),
            per(sent, s.total_s()),
        );
    }
    println!("{line}");
}
