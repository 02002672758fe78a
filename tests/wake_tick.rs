//! The wake tick (`msgstorm::runtime`) with kernel receive times
//! (`msgstorm::driver::kit::stamp`), on a runtime as the binary builds it. A test binary of
//! its own: the tick is one setting per process, which the engine's runs in other tests
//! set and clear.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use msgstorm::driver::kit::connect::Stream;
use tokio::io::AsyncReadExt;

/// Long enough that a wake-up's own work never spans a boundary by chance.
const TICK: Duration = Duration::from_millis(50);
/// The kernel turns timestamps on for the first socket that asks in a deferred work item,
/// so the first packets may come without one (on a loaded machine, several).
const ROUNDS: usize = 12;

/// What one round saw: when the reader asked for the byte, when the read returned, and
/// the kernel's receive time (when it gave one).
struct Round {
    asked: Instant,
    read: Instant,
    arrived: Option<Instant>,
}

#[test]
fn a_thread_that_just_woke_sleeps_to_the_next_tick_and_reads_the_kernel_s_receive_time() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (go, went) = mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().expect("accept");
        for () in went {
            peer.write_all(b"x").expect("write");
        }
    });
    let runtime = msgstorm::runtime::build_for(1).expect("runtime");
    msgstorm::runtime::set_wake_tick(TICK);
    let rounds = runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut stream = Stream::unmetered(tcp);
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            let asked = Instant::now();
            let mut byte = [0u8; 1];
            // The read is polled first (and waits), then the writer is told to write: the
            // byte comes while this thread is about to wait.
            let (n, ()) = tokio::join!(stream.read(&mut byte), async {
                go.send(()).expect("writer");
            });
            assert_eq!(n.expect("read"), 1);
            let read = Instant::now();
            let arrived = stream.arrived();
            rounds.push(Round {
                asked,
                read,
                arrived,
            });
        }
        rounds
    });
    writer.join().expect("writer thread");
    let origin = msgstorm::runtime::tick_origin().expect("a runtime was built");
    let boundary_after = |t: Instant| {
        let n = (t - origin).as_nanos() / TICK.as_nanos() + 1;
        origin + TICK * u32::try_from(n).expect("ticks")
    };
    let mut waited = 0;
    for (i, r) in rounds.iter().enumerate() {
        let Some(arrived) = r.arrived else { continue };
        assert!(
            arrived >= r.asked - Duration::from_millis(1) && arrived <= r.read,
            "round {i}: the kernel's receive time is not between asking and reading"
        );
        // The first round's thread had not woken yet. In a later one, when the byte came
        // within the tick it was asked for in (the writer is another thread: a loaded
        // machine may run it late), it is read at the next boundary, not when it came. A
        // receive time taken at the read would never fall before that boundary.
        let boundary = boundary_after(r.asked);
        if i > 0 && arrived < boundary && r.read >= boundary {
            waited += 1;
        }
    }
    assert!(
        waited >= 2,
        "only {waited} of {} rounds read a byte that came within a tick at the next boundary",
        ROUNDS - 1
    );
}
