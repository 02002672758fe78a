//! The Kubernetes launcher offline: `msgstorm k8s` prints an Indexed Job whose pods, run
//! locally the way Kubernetes would run them (`k8s::kubelet`), meet at shard 0, run their
//! shards against the reference server and frame their results into their logs;
//! `msgstorm collect` reads the logs back and merges them to what one process running the
//! same plan delivers. The manifests validate against Kubernetes' schemas.

use msgstorm::artifact::Artifact;
use serde_json::Value;

use crate::common::run::{msgstorm, run_file, scenario, Work};
use crate::common::{config, start};
use std::time::Duration;

use crate::k8s::kubelet::{collect_pods, free_port, manifests, run_job, Node};

/// 45 users over 3 pods, direct traffic whose senders and receivers span the pods, and
/// groups whose members do.
const TRAFFIC: &str = r#"
[population]
users = 45
login_rate = 450

[[traffic]]
name = "chat"
kind = "direct"
senders = 9
receivers = 18
rate = 60
duration = "2s"

[[traffic]]
name = "rooms"
kind = "group"
groups = 3
group_size = 9
rate = 15
duration = "2s"

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
max_corrupted = 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_run_locally_merges_to_what_one_process_delivers() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario(
        "name = \"k8s\"\nseed = 16\ndrain = \"3s\"",
        &server,
        TRAFFIC,
    );
    let file = work.write("w.toml", &text);
    let file = file.to_str().expect("utf-8");
    let port = free_port().to_string();
    let list = manifests(&[
        file,
        "--shards",
        "3",
        "--image",
        "msgstorm:test",
        "--run-id",
        "5eed0016",
        "--port",
        &port,
    ])
    .await;
    // Shard 0's pod starts last: the others wait for it to meet.
    let pods = run_job(&list, &work, |index| Node {
        start_after: Duration::from_millis(if index == 0 { 1500 } else { 0 }),
        ..Node::default()
    })
    .await;
    let (collected, out) = collect_pods(&pods, &work).await;
    assert!(collected.verdict().starts_with("PASS"), "{collected}");
    for i in 0..3 {
        assert!(
            out.join(format!("shard-{i}/result.json")).is_file(),
            "{collected}"
        );
    }
    let merged = Artifact::read(&out.join("result.json")).expect("merged result");
    // With the clock records, the files still match the result schema.
    let (schemas, schema) = crate::cli::report::result_schema();
    for file in [out.join("result.json"), out.join("shard-1/result.json")] {
        let text = std::fs::read_to_string(&file).expect("read");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        if let Err(e) = schemas.validate(&value, schema) {
            panic!(
                "{} does not match schema/result.schema.json: {e:#}",
                file.display()
            );
        }
    }
    assert_eq!(merged.run_id, "5eed0016");
    assert_eq!(merged.shards.len(), 3);
    // Every pod measured its clock against shard 0, which is the reference.
    let clocks: Vec<_> = merged
        .shards
        .iter()
        .map(|s| s.clock.clone().expect("a clock record"))
        .collect();
    assert_eq!((clocks[0].offset_us, clocks[0].uncertainty_us), (0, 0));
    assert!(
        clocks[1..].iter().all(|c| c.end_offset_us.is_some()),
        "{clocks:?}"
    );

    let (single_ran, single) = run_file(file.as_ref(), &work.path("single"), &[]).await;
    single_ran.expect_code(0);
    let (k, s) = (merged.ledger.summary(), single.ledger.summary());
    assert!(k.expected > 0, "{k:?}");
    assert_eq!(
        (k.sent, k.expected, k.delivered, k.lost, k.duplicated),
        (s.sent, s.expected, s.delivered, s.lost, s.duplicated),
        "the Job's merged ledger vs one process's:\n{k:?}\n{s:?}"
    );
    server.shutdown().await.expect("server stops");
}

/// A log with no framed result, or a damaged one, is a one-line error, not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_refuses_logs_without_intact_results() {
    let work = Work::new();
    let empty = work.write("empty.txt", "just a report\n");
    let out = work.path("out");
    let ran = msgstorm(&[
        "collect",
        empty.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("no framed result"), "{ran}");
    let cut = work.write(
        "cut.txt",
        "-----BEGIN MSGSTORM RESULT shard=0/1 run=00000001 bytes=4 crc32=00000000-----\nAAAA\n",
    );
    let ran = msgstorm(&[
        "collect",
        cut.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("cut.txt: line 1:"), "{ran}");
    // One shard with two different results (a retried pod): refused, both places named.
    let twice = work.write(
        "twice.txt",
        &format!(
            "{}{}",
            msgstorm::launch::frame::encode("0/2", "00000001", b"{}"),
            msgstorm::launch::frame::encode("0/2", "00000001", b"[]")
        ),
    );
    let ran = msgstorm(&[
        "collect",
        twice.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    ran.expect_code(2);
    assert!(
        ran.stderr
            .contains("twice.txt:4: shard 0/2 has another result at")
            && ran.stderr.contains("twice.txt:1"),
        "{ran}"
    );
}

/// `msgstorm k8s` refuses a scenario whose pods would have no common server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_needs_a_target_every_pod_reaches() {
    let work = Work::new();
    let file = work.write("s.toml", "[population]\nusers = 10\n");
    let ran = msgstorm(&[
        "k8s",
        file.to_str().expect("utf-8"),
        "--shards",
        "2",
        "--image",
        "m:1",
    ])
    .await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("target.url"), "{ran}");
}

/// The manifests (YAML as printed, with and without a namespace, with the port-range
/// sysctl) validate against Kubernetes' schemas with `kubernetes-validate --strict`, and
/// read back as the same objects as the JSON output. Ignored when kubernetes-validate is
/// not installed, except under CI=true.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_kubernetes_validate),
    ignore = "kubernetes-validate is not installed (scripts/test installs it)"
)]
async fn manifests_validate_against_the_kubernetes_schemas() {
    let runs = std::process::Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        crate::common::peers::missing("kubernetes-validate");
    }
    let work = Work::new();
    let file = work.write(
        "s.toml",
        "name = \"w\"\n\n[target]\nurl = \"ws://im.example:8080/ws\"\n\n[population]\nusers = 120000\nlogin_rate = 12000\n",
    );
    let file = file.to_str().expect("utf-8");
    let variants: [&[&str]; 2] = [
        &["--shards", "4", "--namespace", "load"],
        &["--shards", "2", "--set", "population.users=100"],
    ];
    for (i, extra) in variants.iter().enumerate() {
        let mut args = vec!["k8s", file, "--image", "registry.example/msgstorm:0.1"];
        args.extend_from_slice(extra);
        let yaml = msgstorm(&args).await;
        yaml.expect_code(0);
        let path = work.write(&format!("m{i}.yaml"), &yaml.stdout);
        let v = std::process::Command::new("kubernetes-validate")
            .args(["--strict", "--quiet"])
            .arg(&path)
            .output()
            .expect("run kubernetes-validate");
        assert!(
            v.status.success(),
            "{}\n{}\n{}",
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr),
            yaml.stdout
        );
        args.extend(["--output", "json", "--run-id"]);
        let id = yaml
            .stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("msgstorm.dev/run: "))
            .expect("a run label")
            .trim_matches('"')
            .to_owned();
        args.push(&id);
        let json = msgstorm(&args).await;
        json.expect_code(0);
        let json_path = work.write(&format!("m{i}.json"), &json.stdout);
        // The YAML reads back as the JSON (kubernetes-validate brings PyYAML along).
        let same = std::process::Command::new("python3")
            .args([
                "-c",
                "import json,sys,yaml; y=list(yaml.safe_load_all(open(sys.argv[1]))); \
                 j=json.load(open(sys.argv[2]))['items']; sys.exit(0 if y==j else 1)",
            ])
            .arg(&path)
            .arg(&json_path)
            .status()
            .expect("run python3");
        assert!(
            same.success(),
            "the YAML does not read back as the JSON:\n{}",
            yaml.stdout
        );
        if i == 0 {
            assert!(
                yaml.stdout.contains("net.ipv4.ip_local_port_range"),
                "{}",
                yaml.stdout
            );
            assert!(
                yaml.stdout.contains("namespace: \"load\""),
                "{}",
                yaml.stdout
            );
        }
    }
}

/// The image the Dockerfile builds runs what the Job asks of it (no Docker engine runs
/// here, so the image itself is not built): two stages, the build's `--locked` holds for
/// the repository's Cargo.lock, the binary lands on the distroless image's `PATH` under the
/// name the Job's container runs, and the image's user is the Job's `runAsUser`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dockerfile_builds_the_image_the_job_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("a Dockerfile");
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .copied()
        .collect();
    assert_eq!(froms.len(), 2, "a build stage and a final stage: {froms:?}");
    assert!(froms[1].contains("distroless"), "{froms:?}");
    let build = lines
        .iter()
        .find(|l| l.starts_with("RUN cargo build"))
        .expect("the build step");
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
    // `--locked` fails the image build when Cargo.lock is not what Cargo.toml resolves to.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let locked = std::process::Command::new(cargo)
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .current_dir(root)
        .output()
        .expect("run cargo tree");
    assert!(
        locked.status.success(),
        "Cargo.lock is stale: {}",
        String::from_utf8_lossy(&locked.stderr)
    );
    let copy = lines
        .iter()
        .find(|l| l.starts_with("COPY --from="))
        .expect("the binary's copy into the final stage");
    let dest = copy.rsplit(' ').next().expect("a destination");
    let work = Work::new();
    let file = work.write(
        "s.toml",
        "[target]\nurl = \"ws://im.example/ws\"\n[population]\nusers = 10\n",
    );
    let list = manifests(&[
        file.to_str().expect("utf-8"),
        "--shards",
        "2",
        "--image",
        "m:1",
    ])
    .await;
    let job = &list["items"][2]["spec"]["template"]["spec"];
    let command = job["containers"][0]["command"][0]
        .as_str()
        .expect("a command");
    // distroless's PATH: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin.
    assert!(
        ["/usr/local/bin", "/usr/bin", "/bin"]
            .iter()
            .any(|dir| dest == format!("{dir}/{command}")),
        "the Job runs `{command}`, the image has {dest}"
    );
    let user = lines
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    let uid = job["securityContext"]["runAsUser"]
        .as_u64()
        .expect("runAsUser");
    assert_eq!(user.split(':').next(), Some(uid.to_string().as_str()));
}

/// An adapter script and its `.proto` go into the ConfigMap beside the scenario, so the
/// pods find them where the scenario names them; a file outside the scenario's folder is
/// refused, naming the key.
#[tokio::test]
async fn the_scripts_files_travel_with_the_scenario() {
    let list = manifests(&[
        "scenarios/netty-worldclock.toml",
        "--shards",
        "2",
        "--image",
        "m:t",
    ])
    .await;
    let data = &list["items"][0]["data"];
    assert_eq!(list["items"][0]["kind"], "ConfigMap");
    for (name, path) in [
        ("netty-worldclock.toml", "scenarios/netty-worldclock.toml"),
        ("netty-worldclock.lua", "scenarios/netty-worldclock.lua"),
        ("netty-worldclock.proto", "scenarios/netty-worldclock.proto"),
    ] {
        let text = std::fs::read_to_string(path).expect("shipped file");
        assert_eq!(data[name].as_str(), Some(text.as_str()), "{name}");
    }
    let work = Work::new();
    for name in ["netty-worldclock.lua", "netty-worldclock.proto"] {
        let text = std::fs::read_to_string(format!("scenarios/{name}")).expect("shipped file");
        work.write(name, &text);
    }
    let text = std::fs::read_to_string("scenarios/netty-worldclock.toml")
        .expect("scenario")
        .replace("\"netty-worldclock.", "\"../netty-worldclock.");
    std::fs::create_dir_all(work.path("sub")).expect("sub folder");
    let file = work.write("sub/elsewhere.toml", &text);
    let path = file.display().to_string();
    let ran = msgstorm(&["k8s", &path, "--shards", "2", "--image", "m:t"]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains(
            "target.script.file: `../netty-worldclock.lua` must be a file beside the scenario"
        ),
        "{ran}"
    );
}
