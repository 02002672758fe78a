//! The script driver against Matrix Synapse (PyPI's `matrix-synapse`, SQLite, a free
//! loopback port): `scenarios/matrix.toml` as shipped — users registered on their first
//! login through the homeserver's shared-secret registration, group rooms, messages sent
//! with `PUT` and received by long polling `/sync`, late users paging their rooms back
//! with `/messages` — delivers every message exactly once, and Synapse's own database
//! holds exactly the messages msgstorm saw accepted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::peers::free_port;
use crate::common::run::{run_file, Work};

/// A Synapse homeserver in a temporary folder; killed on drop.
struct Synapse {
    child: Child,
    port: u16,
    secret: String,
    dir: tempfile::TempDir,
}

/// The virtual environment `scripts/test` makes.
fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/synapse/venv/bin")
}

impl Synapse {
    /// Generates a configuration (server name `localhost`, SQLite), moves it to a free
    /// loopback port with the rate limits raised, and starts it; returns once it answers.
    fn start() -> Synapse {
        let dir = tempfile::tempdir().expect("a folder for Synapse");
        let config = dir.path().join("hs.yaml");
        let made = Command::new(venv().join("python"))
            .args(["-m", "synapse.app.homeserver", "--server-name", "localhost"])
            .arg("--config-path")
            .arg(&config)
            .args(["--generate-config", "--report-stats=no"])
            .current_dir(dir.path())
            .output()
            .expect("run Synapse's config generator");
        assert!(made.status.success(), "{made:?}");
        let port = free_port();
        let text = std::fs::read_to_string(&config).expect("hs.yaml");
        let secret = text
            .lines()
            .find_map(|l| l.strip_prefix("registration_shared_secret: "))
            .map(|s| s.trim().trim_matches('"').to_owned())
            .expect("a registration_shared_secret");
        let limit = "{per_second: 100000, burst_count: 100000}";
        let text = text
            .replace("port: 8008", &format!("port: {port}"))
            .replace("- ::1\n", "")
            // The generated file ends without a newline, after a comment.
            + &format!(
                "\nrc_message: {limit}\nrc_registration: {limit}\nrc_room_creation: {limit}\n\
                 rc_login:\n  address: {limit}\n  account: {limit}\n  failed_attempts: {limit}\n\
                 rc_joins:\n  local: {limit}\n  remote: {limit}\n\
                 trusted_key_servers: []\nsuppress_key_server_warning: true\n"
            );
        std::fs::write(&config, text).expect("write hs.yaml");
        let child = Command::new(venv().join("synapse_homeserver"))
            .arg("-c")
            .arg(&config)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Synapse");
        let synapse = Synapse {
            child,
            port,
            secret,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "Synapse did not listen in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        synapse
    }

    /// How many `m.room.message` events its database holds.
    fn messages(&self) -> u64 {
        let db = rusqlite::Connection::open(self.dir.path().join("homeserver.db"))
            .expect("Synapse's database");
        db.query_row(
            "SELECT COUNT(*) FROM events WHERE type = 'm.room.message'",
            [],
            |row| row.get::<_, i64>(0),
        )
        .expect("count messages") as u64
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_synapse),
    ignore = "Synapse (peers/synapse/venv) is not installed (scripts/test installs it)"
)]
async fn the_shipped_matrix_scenario_delivers_exactly_once_and_synapse_agrees() {
    let synapse = Synapse::start();
    let work = Work::new();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/matrix.toml");
    let (ran, a) = run_file(
        &file,
        &work.path("out"),
        &[
            "--set",
            &format!("target.url=\"http://127.0.0.1:{}\"", synapse.port),
            "--set",
            &format!("target.script.vars.shared_secret=\"{}\"", synapse.secret),
        ],
    )
    .await;
    ran.expect_code(0);
    let d = a.ledger.summary();
    assert!(d.expected > 0, "{d:?}");
    assert_eq!(
        (d.delivered, d.lost, d.duplicated),
        (d.expected, 0, 0),
        "{d:?}\n{ran}"
    );
    assert!(
        d.via_sync > 0,
        "the late users paged nothing back: {d:?}\n{ran}"
    );
    assert_eq!(
        synapse.messages(),
        a.metrics.count(msgstorm::metrics::Counter::Accepted),
        "Synapse holds exactly the accepted messages\n{ran}"
    );
}
