//! Matrix Synapse for the Matrix tests: PyPI's `matrix-synapse` from `peers/synapse/venv`,
//! on SQLite in a temporary folder, listening on a free loopback port.
//!
//! [`shared`] starts one per test binary and lends it to one test at a time; its tests keep
//! apart by their own user prefix and seed (group room aliases are named by the seed). [`Synapse::start`] starts a
//! private one, for a test that kills it. Each runs under a small shell watchdog that stops
//! it once the test process is gone or its folder holds a `stop` file, so a Synapse never
//! outlives the tests; the same watchdog is the command that starts it again
//! ([`Synapse::start_command`]).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::peers::free_port;

/// The longest Synapse may take to listen: a bound against a hang (about 2 s here on a
/// quiet machine, 10 s with builds beside it).
const START_WAIT: Duration = Duration::from_secs(60);

/// A Synapse homeserver (server name `localhost`) in a temporary folder.
pub struct Synapse {
    /// Its client-server API's port on 127.0.0.1.
    pub port: u16,
    /// Its `registration_shared_secret`.
    pub secret: String,
    dir: tempfile::TempDir,
    /// The first watchdog (a chaos `restart` starts another, not a child of this process).
    watchdog: Child,
}

/// The virtual environment `scripts/test` makes.
fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/synapse/venv/bin")
}

/// The Synapse shared by this test binary's tests, and a guard that keeps the others off
/// it until dropped: one run at a time, since two take more than its one core gives on a
/// shared machine (acknowledgements then outlast the run's drain).
pub async fn shared() -> (&'static Synapse, tokio::sync::MutexGuard<'static, ()>) {
    static SHARED: OnceLock<Synapse> = OnceLock::new();
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    (SHARED.get_or_init(Synapse::start), turn)
}

impl Synapse {
    /// Generates a configuration (SQLite), moves it to a free loopback port with the rate
    /// limits raised and cheap password hashing (registration and login are what a load
    /// test does most before traffic), and starts it; returns once it listens.
    pub fn start() -> Synapse {
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
                 rc_invites:\n  per_room: {limit}\n  per_user: {limit}\n  per_issuer: {limit}\n\
                 bcrypt_rounds: 4\n\
                 trusted_key_servers: []\nsuppress_key_server_warning: true\n"
            );
        std::fs::write(&config, text).expect("write hs.yaml");
        let script = format!(
            "cd '{dir}' || exit 1\n'{bin}' -c hs.yaml >> synapse.out 2>&1 & s=$!\n\
             while kill -0 {parent} 2>/dev/null && kill -0 $s 2>/dev/null && [ ! -e stop ]; \
             do sleep 0.5; done\nkill $s 2>/dev/null\nwait $s\n",
            dir = dir.path().display(),
            bin = venv().join("synapse_homeserver").display(),
            parent = std::process::id(),
        );
        std::fs::write(dir.path().join("run.sh"), script).expect("write run.sh");
        let watchdog = Command::new("sh")
            .arg(dir.path().join("run.sh"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Synapse");
        let synapse = Synapse {
            port,
            secret,
            dir,
            watchdog,
        };
        synapse.wait_listening();
        synapse
    }

    /// The command that runs it under its watchdog (`sh run.sh` in its folder): for a
    /// chaos `restart` step's `start`. What it prints goes to `synapse.out` in its folder.
    pub fn start_command(&self) -> String {
        format!("sh {}", self.dir.path().join("run.sh").display())
    }

    /// Waits until it accepts a connection (bounded by [`START_WAIT`]).
    fn wait_listening(&self) {
        let deadline = Instant::now() + START_WAIT;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Synapse did not listen within {START_WAIT:?}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What it printed (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("synapse.out")).unwrap_or_default()
    }

    /// Its database, read while it runs (SQLite in WAL mode).
    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("homeserver.db"))
            .expect("Synapse's database")
    }

    /// The bodies of the `m.room.message` events sent by users whose id starts with
    /// `prefix` (`@PREFIX…`), as Synapse's `events` table holds them.
    pub fn messages(&self, prefix: &str) -> Vec<String> {
        let db = self.db();
        let mut q = db
            .prepare(
                "SELECT json_extract(j.json, '$.content.body') FROM events e \
                 JOIN event_json j ON j.event_id = e.event_id \
                 WHERE e.type = 'm.room.message' AND e.sender LIKE ?1",
            )
            .expect("a query of messages");
        let rows = q
            .query_map([format!("@{prefix}%")], |row| row.get::<_, String>(0))
            .expect("messages");
        rows.map(|r| r.expect("a message's body")).collect()
    }

    /// The rooms without an alias (1:1 rooms) whose members are users starting with
    /// `prefix`: for each, how many of them joined and how many are members in any way.
    pub fn direct_rooms(&self, prefix: &str) -> Vec<(u64, u64)> {
        let db = self.db();
        let mut q = db
            .prepare(
                "SELECT SUM(membership = 'join'), COUNT(*) FROM local_current_membership \
                 WHERE user_id LIKE ?1 AND room_id NOT IN (SELECT room_id FROM room_aliases) \
                 GROUP BY room_id",
            )
            .expect("a query of memberships");
        let rows = q
            .query_map([format!("@{prefix}%")], |row| {
                Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64))
            })
            .expect("memberships");
        rows.map(|r| r.expect("a room's members")).collect()
    }
}

impl Drop for Synapse {
    /// Tells the watchdog to stop it (also a Synapse a chaos step started again), and
    /// waits until its port is closed.
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.path().join("stop"), "");
        let _ = self.watchdog.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
