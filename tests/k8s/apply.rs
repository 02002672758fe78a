//! `msgstorm k8s --apply` drives the real `kubectl` (the launcher of the Job): a cluster
//! that cannot be reached, or no kubectl at all, is a one-line error with the documented
//! exit code, before any shard runs. (No cluster runs here: the happy path, pods running
//! and their logs collected, is covered by the offline Job test and the launcher's unit
//! tests of what kubectl prints.)

use std::path::PathBuf;

use crate::common::peers::{free_port, required};
use crate::common::run::{msgstorm_with_env, Ran, Work};

/// A scenario with a target every pod would reach.
const SCENARIO: &str = "name = \"apply\"\n\n[target]\nurl = \"ws://127.0.0.1:9/ws\"\n\n\
                        [population]\nusers = 10\n";

/// Runs `msgstorm k8s … --apply ARGS` on the scenario with `KUBECONFIG` set to `config`.
async fn apply(work: &Work, config: &std::path::Path, args: &[&str]) -> Ran {
    let file = work.write("s.toml", SCENARIO);
    let out = work.path("out");
    let mut all = vec![
        "k8s",
        file.to_str().expect("utf-8"),
        "--shards",
        "2",
        "--image",
        "msgstorm:test",
        "--apply",
        "--out",
        out.to_str().expect("utf-8"),
    ];
    all.extend_from_slice(args);
    let home = work.path("home");
    msgstorm_with_env(
        &all,
        &[
            ("KUBECONFIG", config.as_os_str()),
            ("HOME", home.as_os_str()),
        ],
    )
    .await
}

/// A kubeconfig whose only cluster is `server`.
fn kubeconfig(work: &Work, server: &str) -> PathBuf {
    work.write(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
             {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    \
             cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    \
             token: t\n"
        ),
    )
}

/// The API server's address refuses connections: exit 3, one line naming Kubernetes, the
/// kubectl call and kubectl's own reason, and no shard result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_kubectl),
    ignore = "kubectl is not installed (scripts/test installs it)"
)]
async fn apply_to_an_unreachable_cluster_is_exit_3_naming_it() {
    required("kubectl");
    let work = Work::new();
    let server = format!("https://127.0.0.1:{}", free_port());
    let config = kubeconfig(&work, &server);
    let ran = apply(&work, &config, &[]).await;
    ran.expect_code(3);
    let error = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or_else(|| panic!("no error line\n{ran}"));
    assert!(
        error.contains("Kubernetes (`kubectl apply -f -`)") && error.contains(&server),
        "{ran}"
    );
    assert!(!work.path("out/shard-0/result.json").exists(), "{ran}");
}

/// A kubectl that is not there is a usage error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_without_kubectl_is_a_usage_error() {
    let work = Work::new();
    let config = kubeconfig(&work, "https://127.0.0.1:1");
    let ran = apply(&work, &config, &["--kubectl", "/nonexistent/kubectl"]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains("cannot run `/nonexistent/kubectl`"),
        "{ran}"
    );
}
