//! `msgstorm k8s`: prints the Kubernetes objects of one sharded run
//! ([`crate::launch::kube`]) for `kubectl apply -f -`, or with `--apply` runs them through
//! `kubectl` ([`crate::launch::kubectl`], through [`crate::run::shards::launch`]) and
//! reports the merged result as `run --shards` does.

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::output::{FormatArgs, Outputs};
use super::{note, say};
use crate::error::{Error, Result, EXIT_OK};
use crate::launch::kube::{Job, Resources, DEFAULT_PORT};
use crate::launch::kubectl::KubeJob;
use crate::scenario::{Plan, Shard};

/// Options of `msgstorm k8s`.
#[derive(Debug, Args)]
pub struct K8sArgs {
    /// The scenario file (its `target.url` must be reachable from the pods).
    pub scenario: std::path::PathBuf,
    /// Generator pods: the Job's completions and parallelism.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub shards: u32,
    /// The msgstorm image the pods run (see the Dockerfile).
    #[arg(long)]
    pub image: String,
    /// Namespace of the objects (default: kubectl's current one).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Override a scenario key, e.g. `--set population.users=2000` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run id (8 hex digits; default: random); it also names the objects.
    #[arg(long, value_parser = super::parse_run_id, value_name = "HEX")]
    pub run_id: Option<u32>,
    /// Port on which shard 0 meets the others.
    #[arg(long, default_value_t = DEFAULT_PORT, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Yaml, conflicts_with = "apply")]
    pub output: Format,
    /// Apply the objects with kubectl, wait for the Job (forwarding Ctrl-C to the pods),
    /// collect every pod's result from its log and report the merged result.
    #[arg(long)]
    pub apply: bool,
    /// The kubectl to run with `--apply` (its current context and kubeconfig apply).
    #[arg(
        long,
        default_value = "kubectl",
        value_name = "PATH",
        requires = "apply"
    )]
    pub kubectl: std::path::PathBuf,
    /// The merged report's formats with `--apply`, as for `msgstorm run --format`.
    #[arg(
        long = "format",
        value_name = "FORMAT[=FILE]",
        value_parser = crate::report::format::Output::parse,
        requires = "apply"
    )]
    pub format: Vec<crate::report::format::Output>,
    /// Results folder with `--apply` (default: a new timestamped folder under
    /// ./msgstorm-results/).
    #[arg(long, requires = "apply")]
    pub out: Option<std::path::PathBuf>,
    /// With `--apply`, give up when the Job has not ended this long after it was applied
    /// (default: the plan's length plus 30 minutes for scheduling and image pulls).
    #[arg(long, value_parser = humantime::parse_duration, requires = "apply")]
    pub timeout: Option<std::time::Duration>,
}

/// Slack for scheduling the pods and pulling the image, on top of the plan's length.
const SCHEDULING_SLACK: Duration = Duration::from_secs(30 * 60);

/// How `msgstorm k8s` prints the objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// YAML documents separated by `---`.
    Yaml,
    /// One JSON `List`.
    Json,
}

/// A DNS-1123 label, as Kubernetes requires of a namespace.
fn dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A ConfigMap key for the scenario file: its file name when Kubernetes allows it.
fn data_key(path: &std::path::Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .filter(|n| {
            n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
        .unwrap_or("scenario.toml")
        .to_owned()
}

/// The files beside the scenario that its driver reads ([`Spec::files`]), to ship with it:
/// each must be a plain file name in the scenario's folder.
///
/// [`Spec::files`]: crate::driver::Spec::files
fn driver_files(plan: &Plan) -> Result<Vec<(String, String)>> {
    let t = &plan.target;
    let mut out = Vec::new();
    for key in t.driver.files {
        let names: Vec<&str> = match t.options.get(*key) {
            Some(toml::Value::String(s)) => vec![s.as_str()],
            Some(toml::Value::Array(a)) => a.iter().filter_map(toml::Value::as_str).collect(),
            _ => Vec::new(),
        };
        for name in names {
            if data_key(name.as_ref()) != name {
                return Err(Error::Usage(format!(
                    "target.{}.{key}: `{name}` must be a file beside the scenario (a plain \
                     name of letters, digits, `-`, `_` and `.`) to go into the pods' ConfigMap",
                    t.driver.name
                )));
            }
            let path = t.dir.join(name);
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            out.push((name.to_owned(), text));
        }
    }
    Ok(out)
}

/// Runs `msgstorm k8s`.
pub async fn run(args: K8sArgs) -> Result<u8> {
    let mut plan = crate::scenario::load(&args.scenario, &args.set, Shard::WHOLE)?;
    if let Some(out) = &args.out {
        // `--out` wins over the scenario's `report.out`, as for `msgstorm run`.
        plan.report.out = Some(out.clone());
    }
    let job = job(&args, &plan)?;
    if args.apply {
        return apply(job, &args, &plan).await;
    }
    let docs = job.manifests();
    let text = match args.output {
        Format::Yaml => crate::launch::yaml::render(&docs),
        Format::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
            serde_json::to_string_pretty(&list)
                .map_err(|e| Error::Other(format!("cannot encode the manifests: {e}")))?
        }
    };
    say(text.trim_end());
    Ok(EXIT_OK)
}

/// The objects of the run `args` describe, after checking what the pods need.
fn job(args: &K8sArgs, plan: &Plan) -> Result<Job> {
    if plan.target.endpoint.is_none() {
        return Err(Error::Usage(format!(
            "{}: target.url: the pods need one server they all reach; set it in the \
             scenario or with --set target.url=\"ws://…\"",
            args.scenario.display()
        )));
    }
    if let Some(ns) = args.namespace.as_deref().filter(|ns| !dns_label(ns)) {
        return Err(Error::Usage(format!(
            "--namespace `{ns}`: a namespace is lower-case letters, digits and `-`"
        )));
    }
    if args.image.trim().is_empty() || args.image.contains(char::is_whitespace) {
        return Err(Error::Usage(format!(
            "--image `{}`: expected an image reference",
            args.image
        )));
    }
    let text = std::fs::read_to_string(&args.scenario).map_err(|e| Error::io(&args.scenario, e))?;
    let mut sets = args.set.clone();
    let metrics_port = match plan.report.metrics_listen.map(|a| a.port()) {
        Some(0) => {
            return Err(Error::Usage(
                "report.metrics_listen: pods need a fixed port for their scrape annotations, \
                 not 0"
                    .to_owned(),
            ))
        }
        Some(port) => {
            // A pod is scraped from outside: it listens on every interface.
            sets.push(format!("report.metrics_listen=\"0.0.0.0:{port}\""));
            Some(port)
        }
        None => None,
    };
    let run_id = args.run_id.unwrap_or_else(|| fastrand::u32(..));
    let per_shard = u64::from(plan.population.users.div_ceil(args.shards));
    let sources = plan.target.source_addrs.len().max(1) as u64;
    Ok(Job {
        name: format!("msgstorm-{run_id:08x}"),
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        scenario: (data_key(&args.scenario), text),
        files: driver_files(plan)?,
        sets,
        shards: args.shards,
        run_id,
        port: args.port,
        resources: Resources::for_users(per_shard),
        ports_needed: per_shard.div_ceil(sources),
        metrics_port,
    })
}

/// `--apply`: runs `job` on the cluster and reports the merged result.
async fn apply(job: Job, args: &K8sArgs, plan: &Plan) -> Result<u8> {
    let outputs = Outputs::resolve(
        &FormatArgs {
            outputs: args.format.clone(),
        },
        None,
    )?;
    let mut run = job.shard_run();
    run.out = super::load::out_dir(plan)?;
    note(&format!(
        "run {:08x}: {} users in {} pods; shard logs in {}",
        run.run_id,
        plan.population.users,
        run.count,
        run.out.display()
    ));
    let limit = args
        .timeout
        .unwrap_or_else(|| plan_length(plan) + SCHEDULING_SLACK);
    let launcher = KubeJob::new(job, args.kubectl.clone(), limit);
    let target = plan
        .target
        .endpoint
        .as_ref()
        .map_or_else(String::new, |e| e.url.to_string());
    let (mut watch, stops) = super::watch::Watch::shards();
    let merged = crate::run::shards::launch(&launcher, &run, &target, stops, &mut watch).await?;
    super::finish::finish(&merged, &run.out, &outputs)
}

/// How long the plan runs at most once every pod has started: logins (on time and late),
/// the longest timed traffic pattern, and the drain.
fn plan_length(plan: &Plan) -> Duration {
    let pop = &plan.population;
    let logins = |phases: &[crate::scenario::ArrivalPhase]| -> Duration {
        phases.iter().map(|p| p.duration).sum()
    };
    let traffic = plan
        .traffic
        .iter()
        .map(|t| t.start + t.duration.unwrap_or_default())
        .max()
        .unwrap_or_default();
    let late = pop.late_at + logins(&pop.late_arrival);
    logins(&pop.arrival) + traffic.max(late).max(pop.churn_back_at) + plan.drain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_kubernetes_accepts() {
        assert!(dns_label("load-test-1"));
        assert!(!dns_label("Load") && !dns_label("-a") && !dns_label("a_b") && !dns_label(""));
        assert_eq!(data_key("dir/w1.toml".as_ref()), "w1.toml");
        assert_eq!(data_key("dir/my file.toml".as_ref()), "scenario.toml");
    }
}
