//! Plans one shard of a scenario and reports how long the plan and the shard's schedule
//! took and the process's peak memory: `cargo run --release --example plan_bench --
//! SCENARIO [INDEX COUNT]` (bench/population/run.sh runs it for 1M users).

#![allow(clippy::print_stdout)]

use std::time::Instant;

use msgstorm::engine::schedule;
use msgstorm::scenario::{self, Shard};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args
        .first()
        .ok_or("usage: plan_bench SCENARIO [INDEX COUNT]")?;
    let shard = match (args.get(1), args.get(2)) {
        (Some(i), Some(n)) => Shard {
            index: i.parse()?,
            count: n.parse()?,
        },
        _ => Shard::WHOLE,
    };
    let started = Instant::now();
    let plan = scenario::load(std::path::Path::new(file), &[], shard)?;
    let planned = started.elapsed();
    let range = shard.range(plan.population.users);
    let sched = schedule::build(&plan, range.clone());
    let scheduled = started.elapsed() - planned;
    let peak = std::fs::read_to_string("/proc/self/status")?
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .map(str::to_owned)
        .unwrap_or_default();
    println!(
        "shard {}/{}: users {:?}, plan {:.2} s, schedule {:.2} s ({} tracks, {} deliveries planned), {}",
        shard.index,
        shard.count,
        range,
        planned.as_secs_f64(),
        scheduled.as_secs_f64(),
        sched.expect.tracks.len(),
        sched.planned,
        peak.split_whitespace().skip(1).collect::<Vec<_>>().join(" ")
    );
    Ok(())
}
