//! `msgstorm k8s`: prints the Kubernetes objects of one sharded run
//! ([`crate::launch::kube`]) for `kubectl apply -f -`.

use clap::{Args, ValueEnum};

use super::say;
use crate::error::{Error, Result, EXIT_OK};
use crate::launch::kube::{Job, Resources, DEFAULT_PORT};
use crate::scenario::Shard;

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
    #[arg(long, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

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

/// Runs `msgstorm k8s`.
pub async fn run(args: K8sArgs) -> Result<u8> {
    let plan = crate::scenario::load(&args.scenario, &args.set, Shard::WHOLE)?;
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
    let run_id = args.run_id.unwrap_or_else(|| fastrand::u32(..));
    let per_shard = u64::from(plan.population.users.div_ceil(args.shards));
    let sources = plan.target.source_addrs.len().max(1) as u64;
    let job = Job {
        name: format!("msgstorm-{run_id:08x}"),
        namespace: args.namespace,
        image: args.image,
        scenario: (data_key(&args.scenario), text),
        sets: args.set,
        shards: args.shards,
        run_id,
        port: args.port,
        resources: Resources::for_users(per_shard),
        ports_needed: per_shard.div_ceil(sources),
    };
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
