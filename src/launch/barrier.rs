//! The start barrier of the shards of one run: a folder every shard can see (the run's
//! results folder for `--shards N`; a shared volume when shards run on several machines).
//!
//! Shard I creates `ready-I` in it once its on-time users have all tried to log in, then
//! waits until every shard's file is there: traffic starts in all shards within a poll
//! interval of the last shard's arrival, and never while a shard is still logging its
//! users in (unless the engine's bounded wait runs out; the run's notes say so).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::driver::directory::{self, Directory};
use crate::engine::StartBarrier;

/// A start barrier kept as one file per shard in a folder.
#[derive(Debug, Clone)]
pub struct FileBarrier {
    /// The folder.
    dir: PathBuf,
    /// This shard's index.
    index: u32,
    /// How many shards the run has.
    count: u32,
}

impl FileBarrier {
    /// The barrier of shard `index` of `count` in `dir`.
    pub fn new(dir: PathBuf, index: u32, count: u32) -> Self {
        FileBarrier { dir, index, count }
    }

    fn ready_file(&self, index: u32) -> PathBuf {
        self.dir.join(format!("ready-{index}"))
    }

    /// The run-wide directory, kept as one file per key in the folder's `directory/`.
    pub fn directory(&self) -> Arc<dyn Directory> {
        Arc::new(FileDirectory {
            dir: self.dir.join("directory"),
        })
    }

    /// Prepares `dir` for a new run: creates it and removes what an earlier run left.
    pub fn reset(dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let stale = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ready-"));
            if stale {
                std::fs::remove_file(path)?;
            }
        }
        match std::fs::remove_dir_all(dir.join("directory")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// The directory in a folder every shard sees: a file per key (named by the key in hex),
/// written whole before it appears.
#[derive(Debug)]
struct FileDirectory {
    dir: PathBuf,
}

impl FileDirectory {
    fn file(&self, key: &str) -> PathBuf {
        self.dir.join(hex_name(key))
    }

    /// A file of its own for one write (users of one process write at once, so the
    /// process id alone is not enough).
    fn scratch(&self) -> PathBuf {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let n = WRITES.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!(".write-{}-{n}", std::process::id()))
    }
}

/// `key` as a file name: its bytes in hex, so any key is one safe name.
fn hex_name(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

impl Directory for FileDirectory {
    fn publish(&self, key: &str, value: &str) -> std::io::Result<()> {
        directory::check(key, Some(value)).map_err(std::io::Error::other)?;
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.scratch();
        std::fs::write(&tmp, value)?;
        std::fs::rename(tmp, self.file(key))
    }

    fn lookup(&self, key: &str) -> std::io::Result<Option<String>> {
        directory::check(key, None).map_err(std::io::Error::other)?;
        match std::fs::read_to_string(self.file(key)) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Written whole beside, then hard-linked into place: the link fails when a value is
    /// there already, so exactly one claim wins, whichever shard makes it.
    fn claim(&self, key: &str, value: &str) -> std::io::Result<String> {
        directory::check(key, Some(value)).map_err(std::io::Error::other)?;
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.scratch();
        std::fs::write(&tmp, value)?;
        let linked = std::fs::hard_link(&tmp, self.file(key));
        std::fs::remove_file(&tmp)?;
        match linked {
            Ok(()) => Ok(value.to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::read_to_string(self.file(key))
            }
            Err(e) => Err(e),
        }
    }
}

impl StartBarrier for FileBarrier {
    fn arrive(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(self.ready_file(self.index), b"")
    }

    fn missing(&self) -> Vec<u32> {
        (0..self.count)
            .filter(|&i| !self.ready_file(i).exists())
            .collect()
    }

    fn count(&self) -> u32 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_in_once_every_shard_arrived() {
        let dir = tempfile::tempdir().expect("temp dir");
        let start = dir.path().join("start");
        FileBarrier::reset(&start).expect("reset");
        let (a, b) = (
            FileBarrier::new(start.clone(), 0, 2),
            FileBarrier::new(start.clone(), 1, 2),
        );
        assert_eq!(a.missing(), [0, 1]);
        a.arrive().expect("arrive");
        assert_eq!(b.missing(), [1]);
        b.arrive().expect("arrive");
        assert!(a.missing().is_empty());
        FileBarrier::reset(&start).expect("reset");
        assert_eq!(a.missing(), [0, 1]);
    }

    #[test]
    fn the_directory_is_shared_through_the_folder_and_reset_with_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a, b) = (
            FileBarrier::new(dir.path().to_owned(), 0, 2).directory(),
            FileBarrier::new(dir.path().to_owned(), 1, 2).directory(),
        );
        assert_eq!(b.lookup("grp/1").expect("lookup"), None);
        a.publish("grp/1", "grpAbc").expect("publish");
        assert_eq!(
            b.lookup("grp/1").expect("lookup").as_deref(),
            Some("grpAbc")
        );
        assert_eq!(b.claim("creator", "u1").expect("claim"), "u1");
        assert_eq!(
            a.claim("creator", "u0").expect("claim"),
            "u1",
            "the first claim stays"
        );
        // Many users of one process claiming and publishing at once: one winner, no
        // write trips over another's (the scratch files were once named by process only).
        let winners: Vec<String> = std::thread::scope(|s| {
            let tries: Vec<_> = (0..16)
                .map(|i| {
                    let d = if i % 2 == 0 { &a } else { &b };
                    s.spawn(move || {
                        d.publish(&format!("k{i}"), "v").expect("publish");
                        d.claim("race", &format!("u{i}")).expect("claim")
                    })
                })
                .collect();
            tries
                .into_iter()
                .map(|t| t.join().expect("joins"))
                .collect()
        });
        assert!(winners.iter().all(|w| *w == winners[0]), "{winners:?}");
        FileBarrier::reset(dir.path()).expect("reset");
        assert_eq!(
            b.lookup("grp/1").expect("lookup"),
            None,
            "an earlier run's values go"
        );
    }
}
