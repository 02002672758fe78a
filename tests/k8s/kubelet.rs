//! Runs the Indexed Job that `msgstorm k8s --output json` prints the way Kubernetes would,
//! as local processes: one pod per completion index, all at once (parallelism =
//! completions), each running its container's command with the container's env plus
//! `JOB_COMPLETION_INDEX`, `$(VAR)` expanded in its args, its volumes mounted (the
//! ConfigMap's data as files, an `emptyDir` of its own), and shard 0's DNS name
//! (`<job>-0.<subdomain>`) resolving to 127.0.0.1. Each pod's log is its stdout and stderr
//! with the prefix `kubectl logs --prefix` gives it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

pub use crate::common::peers::free_port;
use crate::common::run::{msgstorm, Ran, Work, BIN, RUN_LIMIT};

/// The objects of `msgstorm k8s … --output json` of one kind.
fn items<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
    list["items"]
        .as_array()
        .expect("a List")
        .iter()
        .filter(|o| o["kind"] == kind)
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `$(NAME)` replaced by `env`'s value, as the kubelet expands container args.
fn expand(arg: &str, env: &HashMap<String, String>) -> String {
    let mut out = arg.to_owned();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    out
}

/// One finished pod.
#[derive(Debug)]
pub struct Pod {
    /// Its completion index.
    pub index: u32,
    /// Its container's exit code.
    pub code: i32,
    /// `kubectl logs --prefix` of it.
    pub log: String,
}

/// How one pod differs from the others, as nodes do.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Env added to the pod's container (e.g. a clock skew).
    pub env: Vec<(String, String)>,
    /// How long after the first pods this one starts (an image pull, a busy scheduler).
    pub start_after: std::time::Duration,
}

/// Runs every pod of the Job in `list`, pod `index` on `node(index)`. Returns the pods in
/// index order.
pub async fn run_job(list: &Value, work: &Work, node: impl Fn(u32) -> Node) -> Vec<Pod> {
    let job = items(list, "Job")[0];
    let name = job["metadata"]["name"].as_str().expect("a name");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let completions = spec["completions"].as_u64().expect("completions") as u32;
    assert_eq!(spec["parallelism"].as_u64(), Some(u64::from(completions)));
    let pod = &spec["template"]["spec"];
    let shard0 = format!(
        "{name}-0.{}",
        pod["subdomain"].as_str().expect("a subdomain")
    );
    let c = &pod["containers"][0];
    let command = strings(&c["command"]);
    assert_eq!(command, ["msgstorm"], "the image's msgstorm");

    // ConfigMaps as folders of files.
    let mut config_maps: HashMap<String, PathBuf> = HashMap::new();
    for cm in items(list, "ConfigMap") {
        let cm_name = cm["metadata"]["name"].as_str().expect("a name");
        let dir = work.path(&format!("configmap-{cm_name}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for (k, v) in cm["data"].as_object().expect("data") {
            std::fs::write(dir.join(k), v.as_str().expect("text")).expect("write");
        }
        config_maps.insert(cm_name.to_owned(), dir);
    }

    let mut children = Vec::new();
    for index in 0..completions {
        let mut mounts: Vec<(String, PathBuf)> = Vec::new();
        for m in c["volumeMounts"].as_array().expect("mounts") {
            let vol = pod["volumes"]
                .as_array()
                .expect("volumes")
                .iter()
                .find(|v| v["name"] == m["name"])
                .expect("the mount's volume");
            let dir = if let Some(cm) = vol["configMap"]["name"].as_str() {
                config_maps[cm].clone()
            } else {
                assert!(vol.get("emptyDir").is_some(), "{vol}");
                let d = work.path(&format!(
                    "pod-{index}-{}",
                    vol["name"].as_str().expect("name")
                ));
                std::fs::create_dir_all(&d).expect("mkdir");
                d
            };
            mounts.push((m["mountPath"].as_str().expect("path").to_owned(), dir));
        }
        let mut env: HashMap<String, String> = c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["name"].as_str().expect("name").to_owned(),
                    e["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        env.insert("JOB_COMPLETION_INDEX".to_owned(), index.to_string());
        let node = node(index);
        env.extend(node.env);
        let args: Vec<String> = strings(&c["args"])
            .iter()
            .map(|a| {
                let a = expand(a, &env).replace(&shard0, "127.0.0.1");
                mount(&a, &mounts)
            })
            .collect();
        children.push(tokio::spawn(async move {
            tokio::time::sleep(node.start_after).await;
            let child = tokio::process::Command::new(BIN)
                .args(&args)
                .envs(&env)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("start a pod");
            tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
                .await
                .unwrap_or_else(|_| panic!("pod {index} still running after {RUN_LIMIT:?}"))
                .expect("wait for a pod")
        }));
    }
    let mut pods = Vec::new();
    for (index, child) in (0..).zip(children) {
        let out = child.await.expect("the pod's task");
        let prefix = format!("[pod/{name}-{index}-x7k2p/msgstorm] ");
        let log: String = String::from_utf8_lossy(&out.stdout)
            .lines()
            .chain(String::from_utf8_lossy(&out.stderr).lines())
            .map(|l| format!("{prefix}{l}\n"))
            .collect();
        pods.push(Pod {
            index,
            code: out.status.code().unwrap_or(-1),
            log,
        });
    }
    pods
}

/// `arg` with a mount path at its start replaced by the local folder mounted there.
fn mount(arg: &str, mounts: &[(String, PathBuf)]) -> String {
    for (at, dir) in mounts {
        if arg == at {
            return dir.display().to_string();
        }
        if let Some(rest) = arg.strip_prefix(&format!("{at}/")) {
            return Path::new(dir).join(rest).display().to_string();
        }
    }
    arg.to_owned()
}

/// The pods' logs as `kubectl logs -l … --prefix` prints them, interleaved line by line (as
/// concurrent streams may be).
pub fn interleaved(pods: &[Pod]) -> String {
    let lines: Vec<Vec<&str>> = pods.iter().map(|p| p.log.lines().collect()).collect();
    let longest = lines.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = String::new();
    for i in 0..longest {
        for l in &lines {
            if let Some(line) = l.get(i) {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// `msgstorm k8s ARGS --output json`, parsed.
pub async fn manifests(args: &[&str]) -> Value {
    let mut all = vec!["k8s"];
    all.extend_from_slice(args);
    all.extend(["--output", "json"]);
    let ran = msgstorm(&all).await;
    ran.expect_code(0);
    serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}\n{ran}"))
}

/// Checks every pod succeeded, then `msgstorm collect`s their interleaved logs into
/// `work`'s `collected/` (exit 0 asserted) and returns the run and that folder.
pub async fn collect_pods(pods: &[Pod], work: &Work) -> (Ran, PathBuf) {
    for p in pods {
        assert_eq!(p.code, 0, "pod {} failed:\n{}", p.index, p.log);
    }
    let logs = work.write("logs.txt", &interleaved(pods));
    let out = work.path("collected");
    let collected = msgstorm(&[
        "collect",
        logs.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    collected.expect_code(0);
    (collected, out)
}
