//! The parent: kill after kill over one directory. Even kills come a random 5 to 80 ms after the
//! child reported ready; odd kills arm the next failpoint of [`FAILPOINTS`] in turn at one of its
//! first three hits and come once the child froze there. After each kill the directory is
//! recovered and checked ([`crate::checks`]) before the next child starts over it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

use crate::acks::Acknowledged;
use crate::checks::{self, Foreign};
use crate::child_process::{self, Kill};
use crate::paths::Api;
use crate::setup::{self, Random};

/// Every failpoint of the prepare path, in the order of its steps.
pub const FAILPOINTS: [&str; 6] = [
    "node_after_prepare_started",
    "node_cdi_before_rename",
    "node_after_cdi_write",
    "node_after_prepared",
    "node_after_unprepare_started",
    "node_after_cdi_remove",
];

/// The counts a run prints.
#[derive(Default)]
struct Report {
    random: usize,
    at_failpoint: BTreeMap<String, usize>,
    rolled_back: usize,
    finished_unprepares: usize,
    orphans_removed: usize,
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs the loop with children preparing through `api`: `DRA_NODE_CRASH_KILLS` kills (default
/// 24), seeded with `DRA_NODE_CRASH_SEED` (default the clock).
pub fn run(api: Api) {
    let kills = env_number("DRA_NODE_CRASH_KILLS", 24);
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let seed = env_number("DRA_NODE_CRASH_SEED", clock);
    let started = Instant::now();
    let mut rng = Random::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    setup::create(root);
    let foreign = Foreign::place(root);
    let mut acks = Acknowledged::default();
    let mut report = Report::default();
    for kill in 0..kills {
        let how = if kill % 2 == 0 {
            Kill::After(Duration::from_millis(rng.between(5, 80)))
        } else {
            let point = FAILPOINTS[(kill / 2) as usize % FAILPOINTS.len()];
            Kill::AtFailpoint(format!("{point}@{}", rng.between(1, 3)))
        };
        let killed = child_process::run_and_kill(root, kill, rng.next_u64(), api, &how);
        match killed.failpoint {
            Some(point) => *report.at_failpoint.entry(point).or_default() += 1,
            None => report.random += 1,
        }
        for line in &killed.lines {
            acks.take(line);
        }
        let name = match &how {
            Kill::After(time) => format!("kill {kill} (after {time:?}, seed {seed})"),
            Kill::AtFailpoint(spec) => format!("kill {kill} (at {spec}, seed {seed})"),
        };
        let recovery = checks::recover_and_check(root, &name, &acks, &foreign);
        report.rolled_back += recovery.rolled_back.len();
        report.finished_unprepares += recovery.unprepared.len();
        report.orphans_removed += recovery.orphans_removed.len();
    }
    let mut points = String::new();
    for (point, count) in &report.at_failpoint {
        let _ = write!(points, " {point} {count},");
    }
    println!(
        "crash ({}): {kills} kills ({} random, {} at failpoints:{}) in {:.1} s, seed {seed}; \
         acknowledged {} prepares of {} claims and {} unprepares; recovery rolled back {} \
         prepares, finished {} unprepares, removed {} orphan files",
        api.arg(),
        report.random,
        report.at_failpoint.values().sum::<usize>(),
        points.trim_end_matches(','),
        started.elapsed().as_secs_f64(),
        acks.prepares,
        acks.claims.len(),
        acks.unprepares,
        report.rolled_back,
        report.finished_unprepares,
        report.orphans_removed,
    );
    if kills >= 2 * FAILPOINTS.len() as u64 {
        assert!(
            acks.prepares > 0,
            "no prepare was acknowledged in {kills} kills"
        );
    }
}
