//! The SQLite store: schema, opening the database in WAL mode, loading the writer's
//! in-memory state, and the read side (conversation list, sync pages) on a fixed set of
//! reader threads, each with a read connection of its own, separate from the writer's.

use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use tokio::sync::oneshot;

use super::config::Durability;
use crate::error::{Error, Result};
use crate::wire::{ConvInfo, Msg, ReceiptPush};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS msgs (
    conv TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL,
    body TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (conv, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS groups (grp TEXT PRIMARY KEY, creator TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS members (
    grp TEXT NOT NULL, user TEXT NOT NULL, PRIMARY KEY (grp, user)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS members_by_user ON members (user, grp);
CREATE TABLE IF NOT EXISTS user_convs (
    user TEXT NOT NULL, conv TEXT NOT NULL, PRIMARY KEY (user, conv)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS contacts (
    user TEXT NOT NULL, contact TEXT NOT NULL, PRIMARY KEY (user, contact)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipts (
    user TEXT NOT NULL, rseq INTEGER NOT NULL, sender TEXT NOT NULL, conv TEXT NOT NULL,
    note TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (user, rseq)) WITHOUT ROWID;
";

/// The database file inside a data directory.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("msgstorm.db")
}

fn db_err(what: &str, e: rusqlite::Error) -> Error {
    Error::Server(format!("store: {what}: {e}"))
}

/// Opens (creating if needed) the writer's connection with the schema in place.
pub fn open_writer(path: &Path, durability: Durability) -> Result<Connection> {
    let conn = Connection::open(path).map_err(|e| db_err("open", e))?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA busy_timeout=5000;"
    ))
    .map_err(|e| db_err("pragmas", e))?;
    conn.execute_batch(SCHEMA)
        .map_err(|e| db_err("schema", e))?;
    Ok(conn)
}

/// The writer's view of the committed state: last seq per conversation, group members.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// Highest committed seq per conversation.
    pub seqs: HashMap<String, u64>,
    /// Highest committed seq of any conversation.
    pub top: u64,
    /// Members of each existing group.
    pub groups: HashMap<String, HashSet<String>>,
    /// The creator of each existing group.
    pub creators: HashMap<String, String>,
    /// Highest stored receipt number per recipient.
    pub rseqs: HashMap<String, u64>,
}

/// Loads [`State`] from the database.
pub fn load_state(conn: &Connection) -> Result<State> {
    let mut st = State::default();
    let mut q = conn
        .prepare("SELECT conv, MAX(seq) FROM msgs GROUP BY conv")
        .map_err(|e| db_err("load seqs", e))?;
    let rows = q
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u64>(1)?)))
        .map_err(|e| db_err("load seqs", e))?;
    for row in rows {
        let (conv, seq) = row.map_err(|e| db_err("load seqs", e))?;
        st.top = st.top.max(seq);
        st.seqs.insert(conv, seq);
    }
    let mut q = conn
        .prepare("SELECT grp, creator FROM groups")
        .map_err(|e| db_err("load groups", e))?;
    let rows = q
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| db_err("load groups", e))?;
    for row in rows {
        let (g, creator) = row.map_err(|e| db_err("load groups", e))?;
        st.groups.insert(g.clone(), HashSet::new());
        st.creators.insert(g, creator);
    }
    let mut q = conn
        .prepare("SELECT grp, user FROM members")
        .map_err(|e| db_err("load members", e))?;
    let rows = q
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| db_err("load members", e))?;
    for row in rows {
        let (g, u) = row.map_err(|e| db_err("load members", e))?;
        st.groups.entry(g).or_default().insert(u);
    }
    st.rseqs = pairs(conn, "SELECT user, MAX(rseq) FROM receipts GROUP BY user")?
        .into_iter()
        .collect();
    Ok(st)
}

/// Every row of a two-column query.
fn pairs<T: rusqlite::types::FromSql>(conn: &Connection, sql: &str) -> Result<Vec<(String, T)>> {
    let err = |e| db_err(sql, e);
    let mut q = conn.prepare(sql).map_err(err)?;
    let rows = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(err)?;
    rows.map(|r| r.map_err(err)).collect()
}

/// Every stored contact pair, each in both directions.
pub fn load_contacts(conn: &Connection) -> Result<Vec<(String, String)>> {
    pairs(conn, "SELECT user, contact FROM contacts")
}

/// Whether a user may read a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Yes.
    Allowed,
    /// The conversation id is not `d:a:b` or `g:name`.
    BadConv,
    /// The group does not exist.
    NoSuchGroup,
    /// The user is not a participant or member.
    NotMember,
}

/// How many read connections serve `convs` and `sync`, each on a thread of its own.
pub const READERS: usize = 4;

/// One read, handed to a reader thread with that thread's connection (or the error of
/// opening it).
type Job = Box<dyn FnOnce(Result<&Connection>) + Send>;

/// A fixed set of read connections, each owned by one thread (reads never wait for the
/// writer in WAL mode). Reads queue for the next free one, so however many sessions read
/// at once, the server holds at most this many read connections and threads; dropping it
/// stops and joins the threads after their current read.
#[derive(Debug)]
pub struct Readers {
    jobs: Option<mpsc::Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Readers {
    /// Starts `count` (at least one) reader threads on the database at `path`; each opens
    /// its read-only connection at its first read.
    pub fn start(path: &Path, count: usize) -> Result<Self> {
        // Unbounded, yet each queued read is a session awaiting its reply: at most one
        // per connection.
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..count.max(1))
            .map(|_| {
                let (path, rx) = (path.to_owned(), Arc::clone(&rx));
                std::thread::Builder::new()
                    .name("msgstorm-reader".into())
                    .spawn(move || read_loop(&path, &rx))
                    .map_err(|e| Error::Server(format!("cannot start a reader thread: {e}")))
            })
            .collect::<Result<_>>()?;
        Ok(Readers {
            jobs: Some(tx),
            threads,
        })
    }

    /// Runs `f` on the next free read connection.
    pub async fn with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            // The session may have gone; then nobody wants the answer.
            let _ = tx.send(conn.and_then(f));
        });
        let stopped = || Error::Server("store: the readers have stopped".into());
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())?;
        rx.await
            .map_err(|_| Error::Server("store: read task failed".into()))?
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        // Closing the queue ends each thread's loop once it has taken what was queued.
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One reader thread: takes reads off the shared queue until it closes. A read that
/// panics fails alone (its caller gets an error) and its connection is replaced.
fn read_loop(path: &Path, jobs: &Mutex<mpsc::Receiver<Job>>) {
    let mut conn: Option<Connection> = None;
    loop {
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = next else { return };
        let opened = match conn.take() {
            Some(c) => Ok(c),
            None => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| db_err("open reader", e)),
        };
        match opened {
            Ok(c) => {
                let ran = panic::catch_unwind(AssertUnwindSafe(|| job(Ok(&c))));
                if ran.is_ok() {
                    conn = Some(c);
                }
            }
            Err(e) => job(Err(e)),
        }
    }
}

/// May `user` read `conv`?
pub fn access(conn: &Connection, user: &str, conv: &str) -> Result<Access> {
    if let Some(pair) = conv.strip_prefix("d:") {
        return Ok(match pair.split_once(':') {
            Some((a, b)) if a == user || b == user => Access::Allowed,
            Some(_) => Access::NotMember,
            None => Access::BadConv,
        });
    }
    let Some(group) = conv.strip_prefix("g:") else {
        return Ok(Access::BadConv);
    };
    let exists = conn
        .prepare_cached("SELECT 1 FROM groups WHERE grp = ?1")
        .and_then(|mut q| q.query_row([group], |_| Ok(())).optional())
        .map_err(|e| db_err("group lookup", e))?;
    if exists.is_none() {
        return Ok(Access::NoSuchGroup);
    }
    let member = conn
        .prepare_cached("SELECT 1 FROM members WHERE grp = ?1 AND user = ?2")
        .and_then(|mut q| q.query_row([group, user], |_| Ok(())).optional())
        .map_err(|e| db_err("member lookup", e))?;
    Ok(if member.is_some() {
        Access::Allowed
    } else {
        Access::NotMember
    })
}

/// The members of `group`.
pub fn members(conn: &Connection, group: &str) -> Result<Vec<String>> {
    let err = |e| db_err("members", e);
    let mut q = conn
        .prepare_cached("SELECT user FROM members WHERE grp = ?1")
        .map_err(err)?;
    let rows = q.query_map([group], |r| r.get(0)).map_err(err)?;
    rows.map(|r| r.map_err(err)).collect()
}

/// The user's conversations (direct ones it took part in, groups it is a member of)
/// with their latest committed seq.
pub fn convs(conn: &Connection, user: &str) -> Result<Vec<ConvInfo>> {
    let err = |e| db_err("conversation list", e);
    let mut ids: Vec<String> = Vec::new();
    let mut q = conn
        .prepare_cached("SELECT conv FROM user_convs WHERE user = ?1")
        .map_err(err)?;
    for row in q.query_map([user], |r| r.get(0)).map_err(err)? {
        ids.push(row.map_err(err)?);
    }
    let mut q = conn
        .prepare_cached("SELECT grp FROM members WHERE user = ?1")
        .map_err(err)?;
    for row in q
        .query_map([user], |r| r.get::<_, String>(0))
        .map_err(err)?
    {
        ids.push(crate::wire::group_conv(&row.map_err(err)?));
    }
    let mut last = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM msgs WHERE conv = ?1")
        .map_err(err)?;
    ids.into_iter()
        .map(|conv| {
            let last_seq = last.query_row([&conv], |r| r.get(0)).map_err(err)?;
            Ok(ConvInfo { conv, last_seq })
        })
        .collect()
}

/// Messages of `conv` with `seq > after`, ascending, at most `limit` and at most
/// `max_bytes` of JSON (always at least one message, so a reader makes progress); and
/// whether more follow.
pub fn sync(
    conn: &Connection,
    conv: &str,
    after: u64,
    limit: u32,
    max_bytes: usize,
) -> Result<(Vec<Msg>, bool)> {
    let err = |e| db_err("sync", e);
    let mut q = conn
        .prepare_cached(
            "SELECT seq, sender, body, ts FROM msgs WHERE conv = ?1 AND seq > ?2 \
             ORDER BY seq LIMIT ?3",
        )
        .map_err(err)?;
    let rows = q
        .query(params![conv, after, u64::from(limit) + 1])
        .map_err(err)?;
    page(rows, limit, max_bytes, |r| {
        Ok(Msg {
            conv: conv.to_owned(),
            seq: r.get(0)?,
            from: r.get(1)?,
            body: r.get(2)?,
            ts: r.get(3)?,
        })
    })
    .map_err(err)
}

/// Reads `rows` (queried with a limit of `limit + 1`) into a page of at most `limit` items
/// and at most `max_bytes` of JSON (always at least one item, so a reader makes progress);
/// and whether more follow.
fn page<T: serde::Serialize>(
    mut rows: rusqlite::Rows<'_>,
    limit: u32,
    max_bytes: usize,
    read: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<(Vec<T>, bool)> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut bytes = 0;
    while let Some(r) = rows.next()? {
        if items.len() == limit {
            return Ok((items, true));
        }
        let item = read(r)?;
        // One comma between items.
        let size = json_len(&item) + 1;
        if !items.is_empty() && bytes + size > max_bytes {
            return Ok((items, true));
        }
        bytes += size;
        items.push(item);
    }
    Ok((items, false))
}

/// The receipts stored for `user` with `rseq > after`, ascending, at most `limit` and at
/// most `max_bytes` of JSON (always at least one); whether more follow; and the highest
/// `rseq` stored for `user`.
pub fn receipts(
    conn: &Connection,
    user: &str,
    after: u64,
    limit: u32,
    max_bytes: usize,
) -> Result<(Vec<ReceiptPush>, bool, u64)> {
    let err = |e| db_err("receipts", e);
    let last: u64 = conn
        .prepare_cached("SELECT COALESCE(MAX(rseq), 0) FROM receipts WHERE user = ?1")
        .and_then(|mut q| q.query_row([user], |r| r.get(0)))
        .map_err(err)?;
    let mut q = conn
        .prepare_cached(
            "SELECT rseq, sender, conv, note, ts FROM receipts WHERE user = ?1 AND rseq > ?2 \
             ORDER BY rseq LIMIT ?3",
        )
        .map_err(err)?;
    let rows = q
        .query(params![user, after, u64::from(limit) + 1])
        .map_err(err)?;
    let (receipts, more) = page(rows, limit, max_bytes, |r| {
        Ok(ReceiptPush {
            rseq: r.get(0)?,
            from: r.get(1)?,
            conv: r.get(2)?,
            note: r.get(3)?,
            ts: r.get(4)?,
        })
    })
    .map_err(err)?;
    Ok((receipts, more, last))
}

/// The length of `value` serialized as JSON, without allocating it.
pub fn json_len<T: serde::Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail, and these types always serialize.
    let _ = serde_json::to_writer(&mut c, value);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A fresh database with its schema, and `count` readers on it.
    fn readers(count: usize) -> (tempfile::TempDir, Arc<Readers>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = db_path(dir.path());
        open_writer(&path, Durability::Normal).expect("writer");
        let readers = Readers::start(&path, count).expect("readers");
        (dir, Arc::new(readers))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_concurrent_reads_run_on_no_more_than_the_fixed_reader_threads() {
        let (_dir, readers) = readers(2);
        let threads = Arc::new(Mutex::new(HashSet::new()));
        let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let reads: Vec<_> = (0..64)
            .map(|i| {
                let (readers, threads) = (Arc::clone(&readers), Arc::clone(&threads));
                let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
                tokio::spawn(async move {
                    readers
                        .with(move |c| {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            let me = std::thread::current();
                            threads
                                .lock()
                                .expect("set")
                                .insert((me.id(), me.name().map(str::to_owned)));
                            std::thread::sleep(Duration::from_millis(1));
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            convs(c, &format!("u{i}"))
                        })
                        .await
                })
            })
            .collect();
        for read in reads {
            assert_eq!(read.await.expect("joined").expect("read"), Vec::new());
        }
        let threads = threads.lock().expect("set").clone();
        assert!((1..=2).contains(&threads.len()), "reads ran on {threads:?}");
        assert!(threads
            .iter()
            .all(|(_, name)| name.as_deref() == Some("msgstorm-reader")));
        assert!(peak.load(Ordering::SeqCst) <= 2);
    }

    #[tokio::test]
    async fn a_read_that_panics_fails_alone_and_its_reader_keeps_serving() {
        let (_dir, readers) = readers(1);
        let failed = readers
            .with(|_| -> Result<()> { panic!("a read that panics") })
            .await;
        assert!(matches!(failed, Err(Error::Server(_))), "{failed:?}");
        let next = readers.with(|c| convs(c, "u1")).await.expect("read");
        assert_eq!(next, Vec::new());
    }
}
