//! The Kubernetes launcher: one run as a ConfigMap (the scenario file), a headless Service
//! (shard 0's name for the others) and an Indexed Job whose pod `I` runs
//! [`ShardRun::args_for`] with index `$(JOB_COMPLETION_INDEX)`.
//!
//! The shards meet at shard 0 over the network ([`super::coord`]: no shared volume, and
//! every shard on shard 0's clock), print their results framed into their logs
//! ([`super::frame`]) for `msgstorm collect`, and the Job is sized from the plan: memory
//! and CPU requests from the connections per shard, the port-range sysctl when a shard
//! needs more ephemeral ports than Linux's default range, and pod anti-affinity to put the
//! shards on different nodes.
//!
//! The manifests are `serde_json` values built here rather than `k8s-openapi` types:
//! k8s-openapi alone took 47.5 s of a 72 s debug build on this 2-core machine (a 46 MB
//! rlib, and chrono with it), for three object kinds whose few fields are checked instead
//! against Kubernetes' own schemas by `kubernetes-validate` in `scripts/test`
//! (`docs/kubernetes.md` has the numbers).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{Rendezvous, ShardRun};

/// Where the ConfigMap with the scenario is mounted in the pod.
pub const SCENARIO_DIR: &str = "/etc/msgstorm";
/// The pod's writable results folder (an `emptyDir`).
pub const RESULTS_DIR: &str = "/results";
/// The default port of shard 0's rendezvous.
pub const DEFAULT_PORT: u16 = 7400;
/// Ephemeral ports in Linux's default `net.ipv4.ip_local_port_range` (32768–60999).
const DEFAULT_PORTS: u64 = 28_232;
/// The range the port-range sysctl widens it to.
const WIDE_PORT_RANGE: &str = "1024 65535";
/// The label every object of one run carries, with its run id.
const RUN_LABEL: &str = "msgstorm.dev/run";

/// One run as Kubernetes objects.
#[derive(Debug, Clone)]
pub struct Job {
    /// Name of the ConfigMap, the Service and the Job (`msgstorm-<run id>`).
    pub name: String,
    /// Namespace, when given (otherwise `kubectl`'s current one).
    pub namespace: Option<String>,
    /// The generator image.
    pub image: String,
    /// The scenario file's name and text.
    pub scenario: (String, String),
    /// The files beside it that the driver reads (an adapter script, `.proto` files):
    /// names and texts, mounted next to it.
    pub files: Vec<(String, String)>,
    /// `--set` overrides, run id and shard count.
    pub sets: Vec<String>,
    /// How many shards (pods).
    pub shards: u32,
    /// The run id.
    pub run_id: u32,
    /// Shard 0's rendezvous port.
    pub port: u16,
    /// Resources of one pod.
    pub resources: Resources,
    /// Connections of the largest shard to one target address from one source address.
    pub ports_needed: u64,
    /// The port every pod serves its OpenMetrics on (`report.metrics_listen`): a named
    /// container port `metrics` and the usual `prometheus.io/*` scrape annotations.
    pub metrics_port: Option<u16>,
}

/// CPU and memory of one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    /// CPU request, millicores.
    pub cpu_m: u64,
    /// Memory request, MiB (the limit is twice it).
    pub memory_mib: u64,
}

impl Resources {
    /// The requests of a shard of `users` connections: 64 MiB plus 16 KiB per connection
    /// (an idle native user costs ~2 KB of generator RSS,
    /// `bench/results/efficiency-2026-11-24-idle.md`; traffic, ledgers and the kernel's socket buffers, which the pod's cgroup is charged
    /// for, take more), and half a core plus a core per 25,000 connections.
    pub fn for_users(users: u64) -> Resources {
        Resources {
            cpu_m: 500 + (users * 1000).div_ceil(25_000).div_ceil(100) * 100,
            memory_mib: 64 + (users * 16).div_ceil(1024),
        }
    }
}

impl Job {
    /// The host name of shard 0's pod as the other pods reach it: `<job>-0.<service>`.
    pub fn coordinator_host(&self) -> String {
        format!("{}-0.{}", self.name, self.name)
    }

    /// What every pod runs, its index left to the container's `$(JOB_COMPLETION_INDEX)`.
    pub fn shard_run(&self) -> ShardRun {
        ShardRun {
            scenario: Some(PathBuf::from(SCENARIO_DIR).join(&self.scenario.0)),
            sets: self.sets.clone(),
            count: self.shards,
            run_id: self.run_id,
            traffic_at: None,
            rendezvous: Rendezvous::Tcp {
                host: self.coordinator_host(),
                port: self.port,
            },
            log_result: true,
            out: RESULTS_DIR.into(),
        }
    }

    fn metadata(&self) -> Value {
        let mut m = json!({
            "name": self.name,
            "labels": self.labels(),
        });
        if let Some(ns) = &self.namespace {
            m["namespace"] = json!(ns);
        }
        m
    }

    fn labels(&self) -> Value {
        json!({
            "app.kubernetes.io/name": "msgstorm",
            RUN_LABEL: format!("{:08x}", self.run_id),
        })
    }

    /// The objects to apply, in order: ConfigMap, Service, Job.
    pub fn manifests(&self) -> Vec<Value> {
        vec![self.config_map(), self.service(), self.job()]
    }

    fn config_map(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": self.metadata(),
            "data": std::iter::once(&self.scenario)
                .chain(&self.files)
                .map(|(name, text)| (name.clone(), Value::from(text.as_str())))
                .collect::<serde_json::Map<String, Value>>(),
        })
    }

    /// Headless, and publishing pods before they are ready: shard 0's DNS name exists as
    /// soon as its pod does.
    fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.metadata(),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "selector": { RUN_LABEL: format!("{:08x}", self.run_id) },
                "ports": [{ "name": "rendezvous", "port": self.port, "targetPort": self.port }],
            },
        })
    }

    fn job(&self) -> Value {
        let run = self.shard_run();
        let args: Vec<String> = run
            .args_for("$(JOB_COMPLETION_INDEX)", &run.out)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let r = self.resources;
        let mut pod_security = json!({
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "runAsGroup": 65532,
        });
        if self.ports_needed > DEFAULT_PORTS {
            // A safe (namespaced) sysctl since Kubernetes 1.27.
            pod_security["sysctls"] =
                json!([{ "name": "net.ipv4.ip_local_port_range", "value": WIDE_PORT_RANGE }]);
        }
        let mut job = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.metadata(),
            "spec": {
                "completionMode": "Indexed",
                "completions": self.shards,
                "parallelism": self.shards,
                // A shard run twice would be a second generator with the same users.
                "backoffLimit": 0,
                "template": {
                    "metadata": { "labels": self.labels() },
                    "spec": {
                        "subdomain": self.name,
                        "restartPolicy": "Never",
                        "securityContext": pod_security,
                        "affinity": { "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [{
                                "weight": 100,
                                "podAffinityTerm": {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": { "matchLabels": {
                                        RUN_LABEL: format!("{:08x}", self.run_id),
                                    }},
                                },
                            }],
                        }},
                        "containers": [{
                            "name": "msgstorm",
                            "image": self.image,
                            "command": ["msgstorm"],
                            "args": args,
                            "ports": [{ "name": "rendezvous", "containerPort": self.port }],
                            "resources": {
                                "requests": {
                                    "cpu": format!("{}m", r.cpu_m),
                                    "memory": format!("{}Mi", r.memory_mib),
                                },
                                "limits": { "memory": format!("{}Mi", 2 * r.memory_mib) },
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "capabilities": { "drop": ["ALL"] },
                            },
                            "volumeMounts": [
                                { "name": "scenario", "mountPath": SCENARIO_DIR, "readOnly": true },
                                { "name": "results", "mountPath": RESULTS_DIR },
                            ],
                        }],
                        "volumes": [
                            { "name": "scenario", "configMap": { "name": self.name } },
                            { "name": "results", "emptyDir": {} },
                        ],
                    },
                },
            },
        });
        if let Some(port) = self.metrics_port {
            let template = &mut job["spec"]["template"];
            template["metadata"]["annotations"] = json!({
                "prometheus.io/scrape": "true",
                "prometheus.io/port": port.to_string(),
                "prometheus.io/path": "/metrics",
            });
            if let Some(ports) = template["spec"]["containers"][0]["ports"].as_array_mut() {
                ports.push(json!({ "name": "metrics", "containerPort": port }));
            }
        }
        job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(users: u64) -> Job {
        Job {
            name: "msgstorm-0000abcd".into(),
            namespace: Some("load".into()),
            image: "registry.example/msgstorm:1".into(),
            scenario: ("s.toml".into(), "name = \"x\"\n".into()),
            files: vec![("a.lua".into(), "function login() end".into())],
            sets: vec!["population.users=10".into()],
            shards: 3,
            run_id: 0xabcd,
            port: DEFAULT_PORT,
            resources: Resources::for_users(users),
            ports_needed: users,
            metrics_port: None,
        }
    }

    #[test]
    fn pods_serving_metrics_have_a_named_port_and_scrape_annotations() {
        assert!(job(10).job()["spec"]["template"]["metadata"]
            .get("annotations")
            .is_none());
        let j = Job {
            metrics_port: Some(9464),
            ..job(10)
        }
        .job();
        let template = &j["spec"]["template"];
        let a = &template["metadata"]["annotations"];
        assert_eq!(
            (&a["prometheus.io/scrape"], &a["prometheus.io/port"]),
            (&json!("true"), &json!("9464"))
        );
        let ports = &template["spec"]["containers"][0]["ports"];
        assert_eq!(
            ports[1],
            json!({ "name": "metrics", "containerPort": 9464 })
        );
    }

    #[test]
    fn the_config_map_holds_the_scenario_and_the_drivers_files() {
        let data = &job(10).config_map()["data"];
        assert_eq!(data["s.toml"], "name = \"x\"\n");
        assert_eq!(data["a.lua"], "function login() end");
    }

    #[test]
    fn the_job_is_indexed_with_one_pod_per_shard() {
        let j = job(1000).job();
        let spec = &j["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(
            (spec["completions"].as_u64(), spec["parallelism"].as_u64()),
            (Some(3), Some(3))
        );
        let c = &spec["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let at = args.iter().position(|a| *a == "--shard").expect("--shard");
        assert_eq!(args[at + 1], "$(JOB_COMPLETION_INDEX)/3");
        assert!(
            args.contains(&"tcp://msgstorm-0000abcd-0.msgstorm-0000abcd:7400"),
            "{args:?}"
        );
        assert!(args.contains(&"--log-result") && args.contains(&"/etc/msgstorm/s.toml"));
        assert_eq!(spec["template"]["spec"]["subdomain"], "msgstorm-0000abcd");
        assert!(spec["template"]["spec"]["securityContext"]
            .get("sysctls")
            .is_none());
    }

    #[test]
    fn requests_grow_with_connections_and_the_port_range_widens_past_the_default() {
        assert_eq!(
            Resources::for_users(0),
            Resources {
                cpu_m: 500,
                memory_mib: 64
            }
        );
        assert_eq!(
            Resources::for_users(50_000),
            Resources {
                cpu_m: 2500,
                memory_mib: 846
            }
        );
        let j = job(40_000).job();
        let sysctls = &j["spec"]["template"]["spec"]["securityContext"]["sysctls"];
        assert_eq!(sysctls[0]["name"], "net.ipv4.ip_local_port_range");
    }
}
