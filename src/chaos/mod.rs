//! Chaos during the load: the `[[chaos]]` steps of a plan carried out at their times from
//! traffic start, and what each actually did, for the report (`docs/chaos.md`).
//!
//! Process steps (`kill`, `term`, `pause`, `restart`) and `exec` run in shard 0 only; a
//! network step or a `cut` runs in every shard, on that shard's own proxy
//! ([`proxy::Proxy`]), which carries the shard's users whenever the plan has one.

pub mod process;
pub mod proxy;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastrand::Rng;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::scenario::{ChaosAction, ChaosStep, NetFault, Plan, ProcRef, RESTART_WAIT};
use process::Sig;
use proxy::Proxy;

/// How long a killed process may take to go before the step says so.
const GONE_WAIT: Duration = Duration::from_secs(5);
/// The longest an `exec` command may run.
const EXEC_WAIT: Duration = Duration::from_secs(60);

/// What one step did, as `result.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// `chaos[i]`.
    pub key: String,
    /// The action's name.
    pub action: String,
    /// The step as planned, one line (`kill pid 1234`, `delay 100ms ± 10ms for 10s`).
    pub planned: String,
    /// When it was due, seconds from traffic start.
    pub at_s: f64,
    /// How long it was to last, seconds (0: an instant action).
    pub duration_s: f64,
    /// When it began and ended, seconds from traffic start (absent: it never ran).
    pub began_s: Option<f64>,
    /// See `began_s`.
    pub ended_s: Option<f64>,
    /// What actually happened, one line.
    pub outcome: String,
    /// Whether it did what it was to do.
    pub ok: bool,
    /// The processes it acted on (a restart: the old one, then the new one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
    /// `exec`: the command's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// `exec`: the first 4 KiB of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// `cut`: connections cut (over all shards) and how many there were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<(u64, u64)>,
    /// `restart`: seconds from the kill until the process listened again; `cut`: until
    /// as many connections were carried as before the cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_after_s: Option<f64>,
    /// Per-step bounds (`max_lost`, `max_duplicated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lost: Option<u64>,
    /// See `max_lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duplicated: Option<u64>,
}

impl StepRecord {
    /// A step as planned, before it ran.
    fn planned(step: &ChaosStep) -> StepRecord {
        StepRecord {
            key: step.key.clone(),
            action: step.action.name().to_owned(),
            planned: planned(step),
            at_s: step.at.as_secs_f64(),
            duration_s: step.duration.as_secs_f64(),
            began_s: None,
            ended_s: None,
            outcome: "not run: the run ended first".to_owned(),
            ok: false,
            pids: Vec::new(),
            exit_code: None,
            output: None,
            cut: None,
            back_after_s: None,
            max_lost: step.max_lost,
            max_duplicated: step.max_duplicated,
        }
    }

    /// The window it covered, seconds from traffic start (planned when it never ran).
    pub fn window(&self) -> (f64, f64) {
        let from = self.began_s.unwrap_or(self.at_s);
        let to = self.ended_s.unwrap_or(from + self.duration_s).max(from);
        (from, to)
    }
}

/// A step in words.
fn planned(step: &ChaosStep) -> String {
    let took = crate::scenario::show_duration(step.duration);
    match &step.action {
        ChaosAction::Kill(p) => format!("kill {p} (SIGKILL)"),
        ChaosAction::Term(p) => format!("term {p} (SIGTERM)"),
        ChaosAction::Pause(p) => format!("pause {p} for {took} (SIGSTOP, SIGCONT)"),
        ChaosAction::Restart { process, start, .. } => {
            format!("restart {process}: SIGKILL, then `{start}`")
        }
        ChaosAction::Exec(c) => format!("exec `{c}`"),
        ChaosAction::Cut(f) => format!("cut {}% of the connections", f * 100.0),
        ChaosAction::Net(NetFault::Delay { delay, jitter }) if jitter.is_zero() => format!(
            "delay {} per round trip (half each way) for {took}",
            crate::scenario::show_duration(*delay)
        ),
        ChaosAction::Net(NetFault::Delay { delay, jitter }) => format!(
            "delay {} (+ up to {}) per round trip for {took}",
            crate::scenario::show_duration(*delay),
            crate::scenario::show_duration(*jitter)
        ),
        ChaosAction::Net(NetFault::Loss(p)) => format!(
            "loss of {}% of segments (each held one retransmission timeout) for {took}",
            p * 100.0
        ),
        ChaosAction::Net(NetFault::Bandwidth(b)) => {
            format!("bandwidth {b} B/s each way per connection for {took}")
        }
        ChaosAction::Net(NetFault::Blackhole) => format!("black hole for {took}"),
    }
}

/// What every step task shares.
#[derive(Debug)]
struct Env {
    proxy: Option<Proxy>,
    traffic: watch::Receiver<Option<Instant>>,
    stop: watch::Receiver<bool>,
    /// Processes a restart replaced: (old pid, new pid).
    moved: Mutex<Vec<(u32, u32)>>,
    seed: u64,
}

/// A plan's chaos in this process: its proxy, and its steps once started.
#[derive(Debug)]
pub struct Chaos {
    steps: Vec<ChaosStep>,
    shard0: bool,
    env: Arc<Env>,
    traffic: watch::Sender<Option<Instant>>,
    stop: watch::Sender<bool>,
    /// The steps this process carries out, each with its task.
    tasks: Vec<(ChaosStep, JoinHandle<StepRecord>)>,
}

impl Chaos {
    /// The plan's chaos, if it has steps: a proxy in front of the target when a step
    /// needs one, the users then connecting through it (`plan.target.relay`).
    pub async fn prepare(plan: &mut Plan) -> std::io::Result<Option<Chaos>> {
        if plan.chaos.is_empty() {
            return Ok(None);
        }
        let proxy = match plan.target.endpoint.as_ref() {
            Some(ep) if plan.chaos.iter().any(|s| s.action.needs_proxy()) => {
                let proxy =
                    Proxy::start(ep.addr(), plan.seed ^ u64::from(plan.shard.index)).await?;
                plan.target.relay = Some(proxy.addr);
                Some(proxy)
            }
            _ => None,
        };
        let (traffic, traffic_rx) = watch::channel(None);
        let (stop, stop_rx) = watch::channel(false);
        Ok(Some(Chaos {
            steps: plan.chaos.clone(),
            shard0: plan.shard.index == 0,
            env: Arc::new(Env {
                proxy,
                traffic: traffic_rx,
                stop: stop_rx,
                moved: Mutex::new(Vec::new()),
                seed: plan.seed,
            }),
            traffic,
            stop,
            tasks: Vec::new(),
        }))
    }

    /// Where the engine tells when traffic starts (the steps count from it).
    pub fn traffic_start(&self) -> watch::Sender<Option<Instant>> {
        self.traffic.clone()
    }

    /// Starts a task per step this process carries out.
    pub fn start(&mut self) {
        for step in &self.steps {
            let here = self.shard0 || step.action.needs_proxy();
            if here {
                let env = Arc::clone(&self.env);
                let task = tokio::spawn(run_step(step.clone(), env));
                self.tasks.push((step.clone(), task));
            }
        }
    }

    /// Ends the steps (one under way is undone: a paused process continues, the network
    /// heals) and returns what each did, in plan order.
    pub async fn finish(self) -> Vec<StepRecord> {
        self.stop.send_replace(true);
        let mut records = Vec::new();
        for (step, task) in self.tasks {
            records.push(task.await.unwrap_or_else(|e| StepRecord {
                outcome: format!("the step's task failed: {e}"),
                ..StepRecord::planned(&step)
            }));
        }
        if let Some(p) = &self.env.proxy {
            p.set(None);
        }
        records
    }
}

/// Waits for `until` unless the run ends first; whether it got there.
async fn wait_until(until: Instant, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep_until(until) => true,
        _ = stop.wait_for(|s| *s) => false,
    }
}

/// Carries out one step at its time.
async fn run_step(step: ChaosStep, env: Arc<Env>) -> StepRecord {
    let mut rec = StepRecord::planned(&step);
    let (mut traffic, mut stop) = (env.traffic.clone(), env.stop.clone());
    let start = tokio::select! {
        t = traffic.wait_for(Option::is_some) => match t {
            Ok(t) => t.unwrap_or_else(Instant::now),
            Err(_) => return rec,
        },
        _ = stop.wait_for(|s| *s) => return rec,
    };
    if !wait_until(start + step.at, &mut stop).await {
        return rec;
    }
    let since = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    rec.began_s = Some(since(Instant::now()));
    act(&step, &env, &mut rec, &mut stop).await;
    rec.ended_s = Some(since(Instant::now()));
    rec
}

/// Does what the step says and writes down what happened.
async fn act(step: &ChaosStep, env: &Env, rec: &mut StepRecord, stop: &mut watch::Receiver<bool>) {
    let pids = |p: &ProcRef| {
        let moved = env.moved.lock().unwrap_or_else(|e| e.into_inner());
        process::resolve(p, &moved)
    };
    let until = Instant::now() + step.duration;
    let (ok, outcome) = match &step.action {
        ChaosAction::Kill(p) | ChaosAction::Term(p) => {
            let sig = if matches!(step.action, ChaosAction::Kill(_)) {
                Sig::Kill
            } else {
                Sig::Term
            };
            signal_all(&pids(p), p, sig, rec).await
        }
        ChaosAction::Pause(p) => {
            let (ok, outcome) = signal_all(&pids(p), p, Sig::Stop, rec).await;
            if ok {
                let full = wait_until(until, stop).await;
                for &pid in &rec.pids {
                    let _ = process::signal(pid, Sig::Cont);
                }
                let held = crate::scenario::show_duration(step.duration);
                let how = if full {
                    held
                } else {
                    "until the run ended".to_owned()
                };
                (true, format!("{outcome}, continued after {how}"))
            } else {
                (ok, outcome)
            }
        }
        ChaosAction::Restart {
            process: p,
            start,
            listen,
        } => restart(&pids(p), p, (start, listen), env, rec, stop).await,
        ChaosAction::Exec(command) => {
            let ran = process::exec(command, EXEC_WAIT, stop).await;
            rec.exit_code = ran.code;
            rec.output = Some(ran.output);
            let code = ran.code.map_or("no exit code (killed)".to_owned(), |c| {
                format!("exit code {c}")
            });
            (
                ran.code == Some(0),
                format!("{code} after {:.3} s", ran.took.as_secs_f64()),
            )
        }
        ChaosAction::Cut(fraction) => match &env.proxy {
            Some(proxy) => {
                let mut rng = Rng::with_seed(env.seed ^ 0xC07);
                let t = Instant::now();
                let (cut, of) = proxy.cut(*fraction, &mut rng);
                rec.cut = Some((cut as u64, of as u64));
                // The storm's length: until the proxy carries as many connections again.
                // Nothing signals a reconnect to the proxy's owner: counted every 10 ms.
                let mut back = None;
                while back.is_none() && t.elapsed() < RESTART_WAIT && !*stop.borrow() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    back = (proxy.carried() >= of).then(|| t.elapsed());
                }
                rec.back_after_s = back.map(|d| d.as_secs_f64());
                let storm = match back {
                    Some(d) => format!("; all {of} back after {:.3} s", d.as_secs_f64()),
                    None => format!("; not all {of} back within {RESTART_WAIT:?}"),
                };
                (true, format!("cut {cut} of {of} connections{storm}"))
            }
            None => (false, "no proxy carries the users' connections".to_owned()),
        },
        ChaosAction::Net(fault) => match &env.proxy {
            Some(proxy) => {
                proxy.set(Some(*fault));
                let full = wait_until(until, stop).await;
                proxy.set(None);
                let how = if full {
                    ""
                } else {
                    " (cut short: the run ended)"
                };
                (true, format!("{}{how}", rec.planned))
            }
            None => (false, "no proxy carries the users' connections".to_owned()),
        },
    };
    rec.ok = ok;
    rec.outcome = outcome;
}

/// Sends `sig` to every process `p` names now.
async fn signal_all(pids: &[u32], p: &ProcRef, sig: Sig, rec: &mut StepRecord) -> (bool, String) {
    if pids.is_empty() {
        return (false, format!("no process {p} was running"));
    }
    let mut done = Vec::new();
    for &pid in pids {
        if let Err(why) = process::signal(pid, sig) {
            return (false, why);
        }
        done.push(pid);
    }
    rec.pids = done.clone();
    let list: Vec<String> = done.iter().map(u32::to_string).collect();
    let verb = match sig {
        Sig::Kill => "killed",
        Sig::Term => "sent SIGTERM to",
        Sig::Stop => "paused",
        Sig::Cont => "continued",
    };
    if matches!(sig, Sig::Kill) {
        for &pid in &done {
            if !process::gone(pid, GONE_WAIT).await {
                return (
                    false,
                    format!("pid {pid} still ran {GONE_WAIT:?} after SIGKILL"),
                );
            }
        }
    }
    (true, format!("{verb} pid {}", list.join(", ")))
}

/// Kills the process and starts it again, waiting until it listens.
async fn restart(
    pids: &[u32],
    p: &ProcRef,
    (start, listen): (&str, &str),
    env: &Env,
    rec: &mut StepRecord,
    stop: &watch::Receiver<bool>,
) -> (bool, String) {
    let t = Instant::now();
    let (ok, killed) = signal_all(pids, p, Sig::Kill, rec).await;
    if !ok {
        return (false, killed);
    }
    match process::start(start, listen, RESTART_WAIT, stop).await {
        Ok((pid, _)) => {
            let back = t.elapsed();
            rec.back_after_s = Some(back.as_secs_f64());
            let mut moved = env.moved.lock().unwrap_or_else(|e| e.into_inner());
            for &old in &rec.pids {
                moved.push((old, pid));
            }
            rec.pids.push(pid);
            (
                true,
                format!(
                    "{killed}; started again as pid {pid}, listening on {listen} after {:.3} s",
                    back.as_secs_f64()
                ),
            )
        }
        Err(why) => (false, format!("{killed}; {why}")),
    }
}

/// Merges another shard's step records into `ours`: a step both ran is one step (a cut's
/// counts added up; the rest as the first shard saw it), the others are added; plan order.
pub fn merge(ours: &mut Vec<StepRecord>, theirs: &[StepRecord]) {
    for t in theirs {
        match ours.iter_mut().find(|o| o.key == t.key) {
            Some(o) => {
                if let (Some(a), Some(b)) = (o.cut, t.cut) {
                    o.cut = Some((a.0 + b.0, a.1 + b.1));
                    o.back_after_s = o.back_after_s.zip(t.back_after_s).map(|(x, y)| x.max(y));
                    let back = o
                        .back_after_s
                        .map_or_else(String::new, |s| format!("; all back after {s:.3} s"));
                    o.outcome = format!("cut {} of {} connections{back}", a.0 + b.0, a.1 + b.1);
                }
                o.ok &= t.ok;
            }
            None => ours.push(t.clone()),
        }
    }
    ours.sort_by_key(|r| index(&r.key));
}

/// The `i` of `chaos[i]`.
fn index(key: &str) -> usize {
    key.trim_start_matches("chaos[")
        .trim_end_matches(']')
        .parse()
        .unwrap_or(usize::MAX)
}
