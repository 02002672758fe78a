//! The SQLite store: schema, opening the database in WAL mode, loading the writer's
//! in-memory state, and the read side (conversation list, sync pages) on a small pool
//! of read connections separate from the writer's.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::config::Durability;
use crate::error::{Error, Result};
use crate::wire::{ConvInfo, Msg};

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
    Ok(st)
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

/// Read connections (reads never wait for the writer in WAL mode).
#[derive(Debug)]
pub struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

const IDLE_READERS: usize = 4;

impl Readers {
    /// A pool of read connections to the database at `path`.
    pub fn new(path: PathBuf) -> Arc<Self> {
        Arc::new(Readers {
            path,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Runs `f` on a read connection in the blocking pool.
    pub async fn with<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let pooled = this.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let conn = match pooled {
                Some(c) => c,
                None => Connection::open_with_flags(
                    &this.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(|e| db_err("open reader", e))?,
            };
            let out = f(&conn);
            let mut idle = this.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE_READERS {
                idle.push(conn);
            }
            out
        })
        .await
        .map_err(|e| Error::Server(format!("store: read task failed: {e}")))?
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
    let mut rows = q
        .query(params![conv, after, u64::from(limit) + 1])
        .map_err(err)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut msgs = Vec::new();
    let mut bytes = 0;
    while let Some(r) = rows.next().map_err(err)? {
        if msgs.len() == limit {
            return Ok((msgs, true));
        }
        let msg = Msg {
            conv: conv.to_owned(),
            seq: r.get(0).map_err(err)?,
            from: r.get(1).map_err(err)?,
            body: r.get(2).map_err(err)?,
            ts: r.get(3).map_err(err)?,
        };
        // One comma between messages.
        let size = json_len(&msg) + 1;
        if !msgs.is_empty() && bytes + size > max_bytes {
            return Ok((msgs, true));
        }
        bytes += size;
        msgs.push(msg);
    }
    Ok((msgs, false))
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
