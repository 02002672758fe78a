//! The start barrier of the shards of one run: a folder every shard can see (the run's
//! results folder for `--shards N`; a shared volume when shards run on several machines).
//!
//! Shard I creates `ready-I` in it once its on-time users have all tried to log in, then
//! waits until every shard's file is there: traffic starts in all shards within a poll
//! interval of the last shard's arrival, and never while a shard is still logging its
//! users in (unless the engine's bounded wait runs out; the run's notes say so).

use std::path::PathBuf;

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
        Ok(())
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
}
