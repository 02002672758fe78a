//! The Kubernetes launcher: runs a [`Job`] on the cluster `kubectl` is configured for —
//! applies its objects, waits for the Job to finish, forwards a stop to the shards, and
//! collects each pod's framed result from its log ([`super::frame`]) into `shard-I/`.
//!
//! It drives the `kubectl` the user already has (their kubeconfig, contexts, credential
//! plugins and proxies work unchanged) rather than speaking the API itself: a Kubernetes
//! client crate (kube-rs with k8s-openapi, TLS and its auth providers) would more than
//! double the build for five calls (`apply`, `get job`, `get pods`, `logs`, `exec`).
//!
//! A stop is forwarded with `kubectl exec POD -- msgstorm stop`, which signals the pod's
//! msgstorm as Ctrl-C does: the shard drains (a second stop: stops at once) and still
//! prints its result, so the log keeps it. Deleting the pods instead would delete the logs
//! that carry the results. The objects stay after the run (their logs are the record); the
//! launcher says how to delete them.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::watch;

use super::kube::Job;
use super::{frame, Launcher, Notes, ShardOutcome, ShardRun};
use crate::artifact::Artifact;
use crate::error::{Error, Result};

/// How often the Job's status is read.
const POLL: Duration = Duration::from_secs(2);
/// How long one kubectl call may take (a whole pod's log included).
const CALL_LIMIT: Duration = Duration::from_secs(120);
/// The annotation carrying a pod's completion index.
const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// Runs one run's shards as an Indexed Job through `kubectl`.
#[derive(Debug, Clone)]
pub struct KubeJob {
    /// The objects of the run.
    job: Job,
    /// The `kubectl` executable.
    kubectl: PathBuf,
    /// How long the Job may take from `apply` to its end (scheduling, image pulls, the run).
    limit: Duration,
}

/// Where the Job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Pods are pending or running.
    Running,
    /// Every index completed.
    Complete,
    /// The Job failed (a pod failed: `backoffLimit` is 0).
    Failed,
}

/// One pod of the Job as `kubectl get pods` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pod {
    name: String,
    index: u32,
    phase: String,
    exit_code: Option<i32>,
}

impl KubeJob {
    /// A launcher of `job` with `kubectl`, giving up when the Job has not finished within
    /// `limit` of being applied.
    pub fn new(job: Job, kubectl: PathBuf, limit: Duration) -> Self {
        KubeJob {
            job,
            kubectl,
            limit,
        }
    }

    /// The command that deletes the run's objects.
    pub fn delete_command(&self) -> String {
        format!(
            "kubectl delete job,service,configmap -l msgstorm.dev/run={:08x}{}",
            self.job.run_id,
            self.namespace_flag()
        )
    }

    fn namespace_flag(&self) -> String {
        self.job
            .namespace
            .as_ref()
            .map(|ns| format!(" -n {ns}"))
            .unwrap_or_default()
    }

    /// Runs `kubectl ARGS` (in the Job's namespace), feeding it `input`; its standard
    /// output, or an error naming the cluster's complaint.
    async fn kubectl(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>> {
        let mut cmd = Command::new(&self.kubectl);
        if let Some(ns) = &self.job.namespace {
            cmd.args(["--namespace", ns]);
        }
        cmd.args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            Error::Usage(format!(
                "cannot run `{}` ({e}): install kubectl or name it with --kubectl",
                self.kubectl.display()
            ))
        })?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            // kubectl reports a short read itself, as its own error below.
            let _ = stdin.write_all(bytes).await;
        }
        // kubectl waits for ever on an API server that accepts and never answers; the child
        // is killed when the wait is dropped.
        let out = tokio::time::timeout(CALL_LIMIT, child.wait_with_output())
            .await
            .map_err(|_| Error::Unreachable {
                target: format!("Kubernetes (`kubectl {}`)", args.join(" ")),
                reason: format!("no answer within {} s", CALL_LIMIT.as_secs()),
            })?
            .map_err(|e| Error::Other(format!("waiting for kubectl: {e}")))?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("no message")
            .to_owned();
        Err(Error::Unreachable {
            target: format!("Kubernetes (`kubectl {}`)", args.join(" ")),
            reason,
        })
    }

    async fn kubectl_json(&self, args: &[&str]) -> Result<Value> {
        let out = self.kubectl(args, None).await?;
        serde_json::from_slice(&out).map_err(|e| {
            Error::Other(format!(
                "`kubectl {}` printed no JSON object: {e}",
                args.join(" ")
            ))
        })
    }

    async fn progress(&self) -> Result<Progress> {
        let job = format!("job/{}", self.job.name);
        Ok(progress(
            &self.kubectl_json(&["get", &job, "-o", "json"]).await?,
        ))
    }

    async fn pods(&self) -> Result<Vec<Pod>> {
        let selector = format!("job-name={}", self.job.name);
        Ok(pods(
            &self
                .kubectl_json(&["get", "pods", "-l", &selector, "-o", "json"])
                .await?,
        ))
    }

    /// Asks every running pod's shard to stop, as Ctrl-C does; a pod that cannot be asked
    /// is a note.
    async fn forward_stop(&self, notes: Notes<'_>) -> Result<()> {
        for pod in self.pods().await?.iter().filter(|p| p.phase == "Running") {
            let exec = [
                "exec", &pod.name, "-c", "msgstorm", "--", "msgstorm", "stop",
            ];
            if let Err(e) = self.kubectl(&exec, None).await {
                notes(format!("could not stop pod {}: {e}", pod.name));
            }
        }
        Ok(())
    }

    /// Waits for the Job to end, forwarding stops; errors when it outlives the limit.
    async fn wait(&self, stops: &mut watch::Receiver<u32>, notes: Notes<'_>) -> Result<Progress> {
        let deadline = tokio::time::Instant::now() + self.limit;
        let mut forwarding = true;
        loop {
            let progress = self.progress().await?;
            if progress != Progress::Running {
                return Ok(progress);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Other(format!(
                    "job/{} has not finished within {:?} of being applied (pods not \
                     scheduled, an image that does not pull?): see `kubectl describe \
                     job/{}{}`; delete it with `{}`",
                    self.job.name,
                    self.limit,
                    self.job.name,
                    self.namespace_flag(),
                    self.delete_command()
                )));
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                changed = stops.changed(), if forwarding => match changed {
                    Ok(()) => self.forward_stop(&mut *notes).await?,
                    Err(_) => forwarding = false,
                },
            }
        }
    }

    /// Shard `pod.index`'s result from the pod's log, written under `run`'s folder.
    async fn collect(&self, run: &ShardRun, pod: &Pod) -> Result<ShardOutcome> {
        let log = match self
            .kubectl(&["logs", &pod.name, "-c", "msgstorm", "--tail=-1"], None)
            .await
        {
            Ok(log) => log,
            // A pod that never ran (an image that does not pull) has no log: a failed shard.
            Err(e) => {
                return Ok(ShardOutcome::Failed {
                    code: pod.exit_code,
                    log_tail: format!("pod {} has no log: {e}", pod.name),
                })
            }
        };
        let log_path = run.log_of(pod.index);
        std::fs::write(&log_path, &log).map_err(|source| Error::Write {
            path: log_path.clone(),
            source,
        })?;
        let text = String::from_utf8_lossy(&log);
        let wanted = format!("{}/{}", pod.index, run.count);
        let found = frame::decode(&text)
            .into_iter()
            .filter_map(std::result::Result::ok)
            .find(|f| f.shard == wanted);
        let Some(found) = found else {
            return Ok(ShardOutcome::Failed {
                code: pod.exit_code,
                log_tail: super::log_tail(&text, &log_path),
            });
        };
        let artifact = Artifact::from_slice(&found.bytes).map_err(|msg| Error::Artifact {
            path: log_path.clone(),
            msg,
        })?;
        let path = artifact
            .write(&run.shard_dir(pod.index))
            .map_err(Error::in_output)?;
        Ok(ShardOutcome::Result(path))
    }
}

impl Launcher for KubeJob {
    async fn run(
        &self,
        run: &ShardRun,
        mut stops: watch::Receiver<u32>,
        notes: Notes<'_>,
    ) -> Result<Vec<ShardOutcome>> {
        if (run.count, run.run_id) != (self.job.shards, self.job.run_id) {
            return Err(Error::Other(format!(
                "the Job has {} shards of run {:08x}, the run {} of {:08x}",
                self.job.shards, self.job.run_id, run.count, run.run_id
            )));
        }
        let list = serde_json::json!({
            "apiVersion": "v1", "kind": "List", "items": self.job.manifests(),
        });
        let bytes = serde_json::to_vec(&list)
            .map_err(|e| Error::Other(format!("cannot encode the manifests: {e}")))?;
        self.kubectl(&["apply", "-f", "-"], Some(&bytes)).await?;
        notes(format!(
            "applied job/{}{}; waiting for its {} pods",
            self.job.name,
            self.namespace_flag(),
            self.job.shards
        ));
        self.wait(&mut stops, &mut *notes).await?;
        let pods = self.pods().await?;
        let mut outcomes = Vec::with_capacity(run.count as usize);
        for index in 0..run.count {
            // A pod that failed and was replaced leaves both: the newest one counts.
            let pod = pods.iter().rfind(|p| p.index == index);
            outcomes.push(match pod {
                Some(pod) => self.collect(run, pod).await?,
                None => ShardOutcome::Failed {
                    code: None,
                    log_tail: format!("no pod of index {index} exists"),
                },
            });
        }
        notes(format!(
            "the Job's objects and logs stay; delete them with `{}`",
            self.delete_command()
        ));
        Ok(outcomes)
    }
}

/// The progress of a Job from `kubectl get job -o json`.
fn progress(job: &Value) -> Progress {
    let conditions = job["status"]["conditions"].as_array();
    let holds = |kind: &str| {
        conditions.is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
    };
    if holds("Failed") {
        Progress::Failed
    } else if holds("Complete") {
        Progress::Complete
    } else {
        Progress::Running
    }
}

/// The pods of a Job from `kubectl get pods -o json`, oldest first.
fn pods(list: &Value) -> Vec<Pod> {
    let mut pods: Vec<(String, Pod)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let meta = &p["metadata"];
            let index = meta["annotations"][INDEX_ANNOTATION]
                .as_str()?
                .parse()
                .ok()?;
            let exit_code = p["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["name"] == "msgstorm")
                .and_then(|c| c["state"]["terminated"]["exitCode"].as_i64())
                .and_then(|c| i32::try_from(c).ok());
            let created = meta["creationTimestamp"].as_str().unwrap_or("").to_owned();
            let pod = Pod {
                name: meta["name"].as_str()?.to_owned(),
                index,
                phase: p["status"]["phase"]
                    .as_str()
                    .unwrap_or("Unknown")
                    .to_owned(),
                exit_code,
            };
            Some((created, pod))
        })
        .collect();
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    pods.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_job_is_finished_by_its_complete_or_failed_condition() {
        let running = json!({"status": {"active": 2}});
        assert_eq!(progress(&running), Progress::Running);
        let complete = json!({"status": {"succeeded": 2, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"},
        ]}});
        assert_eq!(progress(&complete), Progress::Complete);
        let failed = json!({"status": {"failed": 1, "conditions": [
            {"type": "FailureTarget", "status": "True"},
            {"type": "Failed", "status": "True"},
        ]}});
        assert_eq!(progress(&failed), Progress::Failed);
        let not_yet = json!({"status": {"conditions": [{"type": "Complete", "status": "False"}]}});
        assert_eq!(progress(&not_yet), Progress::Running);
    }

    #[test]
    fn pods_are_read_with_their_index_and_exit_code_oldest_first() {
        let pod = |name: &str, index: &str, created: &str, code: Option<i64>| {
            let state = match code {
                Some(c) => json!({"terminated": {"exitCode": c}}),
                None => json!({"running": {}}),
            };
            json!({
                "metadata": {"name": name, "creationTimestamp": created,
                             "annotations": {INDEX_ANNOTATION: index}},
                "status": {"phase": if code.is_some() { "Failed" } else { "Running" },
                           "containerStatuses": [{"name": "msgstorm", "state": state}]},
            })
        };
        let list = json!({"items": [
            pod("j-1-b", "1", "2026-11-24T10:00:05Z", None),
            pod("j-0-a", "0", "2026-11-24T10:00:00Z", Some(3)),
            {"metadata": {"name": "stray"}},
        ]});
        let found = pods(&list);
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0],
            Pod {
                name: "j-0-a".into(),
                index: 0,
                phase: "Failed".into(),
                exit_code: Some(3),
            }
        );
        assert_eq!((found[1].index, found[1].exit_code), (1, None));
    }
}
