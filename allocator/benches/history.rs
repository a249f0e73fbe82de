//! The history at scale: fills a ledger with `DAYS` (90) days of history at `PER_DAY` (100 000)
//! allocations a day over `NODES` (5 000) nodes of 8 GPUs, as the ledger keeps it in steady
//! state (intervals older than the 7-day rollup age as hourly totals, the last 7 days raw), then
//! prints the file's size, the time to open it again (a restart) and the time of a usage query
//! over the whole window and over one day. Printed figures only, no timing asserts.
//!
//! The fill writes the history tables directly in large transactions (what the ledger's own
//! writes would leave, computed by the same `usage::hours::roll_up`), so that it takes seconds
//! instead of the days of commits it stands for; the inventory goes through `Ledger` itself.
//! `HISTORY_BENCH_DAYS` and `HISTORY_BENCH_PER_DAY` scale it down for a quick run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dra_allocator::ledger::history::{HistoryEntry, HistoryRecord};
use dra_allocator::ledger::tables::{
    HistoryDeviceKey, HistoryHourKey, HistorySeq, HISTORY, HISTORY_DEVICES, HISTORY_HOURS,
};
use dra_allocator::ledger::{Ledger, LedgerOptions, DEFAULT_HISTORY_ROLLUP_AFTER};
use dra_allocator::model::{AttributeValue, Device};
use dra_allocator::usage::hours::{hour_of, roll_up, HourRecord, HOUR_MS};
use dra_allocator::usage::{HolderInterval, UsageBy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DRIVER: &str = "gpu.example.com";
const NODES: usize = 5_000;
const DEVICES_PER_NODE: usize = 8;
const NAMESPACES: usize = 50;
const DAY_MS: u64 = 24 * HOUR_MS;
/// 2026-01-01T00:00:00Z: the start of the filled history.
const START_MS: u64 = 1_767_225_600_000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn model_of(node: usize) -> &'static str {
    if node.is_multiple_of(2) {
        "H100"
    } else {
        "H200"
    }
}

/// Publishes every node through the ledger, from 16 threads so that group commit batches them.
fn publish_inventory(ledger: &Ledger) {
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let ledger = ledger.clone();
            std::thread::spawn(move || {
                for node in (t..NODES).step_by(16) {
                    let devices = (0..DEVICES_PER_NODE)
                        .map(|d| {
                            Device::new(format!("gpu-{d}"))
                                .with("model", AttributeValue::String(model_of(node).to_owned()))
                        })
                        .collect();
                    ledger
                        .set_inventory(&format!("node-{node}"), devices)
                        .expect("inventory");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("inventory thread");
    }
}

/// The allocations starting on day `day`: one device each, on a random node, namespace and
/// device, held 10 minutes to 4 hours.
fn day_of_allocations(rng: &mut StdRng, day: u64, per_day: u64) -> Vec<HolderInterval> {
    (0..per_day)
        .map(|i| {
            let node = rng.random_range(0..NODES);
            let from_ms = START_MS + day * DAY_MS + rng.random_range(0..DAY_MS);
            let held_ms = rng.random_range(10 * 60_000..4 * HOUR_MS);
            HolderInterval {
                node: format!("node-{node}"),
                device: format!("gpu-{}", rng.random_range(0..DEVICES_PER_NODE)),
                model: Some(model_of(node).to_owned()),
                claim_uid: format!("{day:08x}-{i:08x}-4000-8000-000000000000"),
                namespace: format!("team-{}", rng.random_range(0..NAMESPACES)),
                name: format!("job-{day}-{i}"),
                from_ms,
                to_ms: Some(from_ms + held_ms),
                share_permille: None,
            }
        })
        .collect()
}

/// Writes what the ledger keeps of `days` of allocations at `now_ms`: intervals that ended
/// before the rollup horizon as hourly totals, the others raw with their index entries.
/// Returns the number of raw intervals and of hours.
fn fill_history(path: &Path, days: u64, per_day: u64, now_ms: u64) -> (u64, u64) {
    let rollup_after = u64::try_from(DEFAULT_HISTORY_ROLLUP_AFTER.as_millis()).expect("7 days");
    let horizon = now_ms - rollup_after;
    let db = redb::Database::open(path).expect("open the ledger file");
    let mut rng = StdRng::seed_from_u64(41);
    let mut pending: BTreeMap<(u64, String, String, Option<String>), HourRecord> = BTreeMap::new();
    let (mut seq, mut hours_written) = (1_u64, 0_u64);
    for day in 0..days {
        let allocations = day_of_allocations(&mut rng, day, per_day);
        let (rolled, raw): (Vec<_>, Vec<_>) = allocations
            .into_iter()
            .partition(|interval| interval.to_ms.is_some_and(|end| end < horizon));
        for totals in roll_up(&rolled) {
            pending
                .entry((totals.hour_ms, totals.namespace, totals.node, totals.model))
                .or_default()
                .merge(totals.record);
        }
        let txn = db.begin_write().expect("write");
        {
            let mut history = txn.open_table(HISTORY).expect("history");
            let mut index = txn.open_table(HISTORY_DEVICES).expect("index");
            let mut hours = txn.open_table(HISTORY_HOURS).expect("hours");
            for interval in raw {
                let record = HistoryRecord {
                    node: interval.node,
                    device: interval.device,
                    entry: HistoryEntry::Held {
                        claim_uid: interval.claim_uid,
                        namespace: interval.namespace,
                        name: interval.name,
                        from_ms: interval.from_ms,
                        to_ms: interval.to_ms,
                        share_permille: None,
                    },
                };
                index
                    .insert(
                        HistoryDeviceKey::new(&record.node, &record.device, HistorySeq(seq)),
                        (),
                    )
                    .expect("index insert");
                history
                    .insert(HistorySeq(seq), Ok(record))
                    .expect("history insert");
                seq += 1;
            }
            // Hours before the next day's start are complete: later allocations start later.
            let complete = START_MS + (day + 1) * DAY_MS;
            let later = pending.split_off(&(complete, String::new(), String::new(), None));
            for ((hour, namespace, node, model), record) in std::mem::replace(&mut pending, later) {
                let key = HistoryHourKey::new(hour, &namespace, &node, model.as_deref());
                hours.insert(key, Ok(record)).expect("hours insert");
                hours_written += 1;
            }
        }
        txn.commit().expect("commit");
    }
    let txn = db.begin_write().expect("write");
    {
        let mut hours = txn.open_table(HISTORY_HOURS).expect("hours");
        for ((hour, namespace, node, model), record) in pending {
            let key = HistoryHourKey::new(hour, &namespace, &node, model.as_deref());
            hours.insert(key, Ok(record)).expect("hours insert");
            hours_written += 1;
        }
    }
    txn.commit().expect("commit");
    (seq - 1, hours_written)
}

fn timed<T>(run: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = run();
    (out, started.elapsed())
}

fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        println!("history: bench");
        return;
    }
    let days = env_or("HISTORY_BENCH_DAYS", 90);
    let per_day = env_or("HISTORY_BENCH_PER_DAY", 100_000);
    let now_ms = START_MS + days * DAY_MS;
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("ledger.redb");
    let clock: dra_allocator::ledger::Clock = Arc::new(move || now_ms);
    let options = || LedgerOptions {
        clock: clock.clone(),
        ..LedgerOptions::default()
    };

    let ledger = Ledger::open_with(&path, DRIVER, options()).expect("create the ledger");
    let ((), inventory) = timed(|| publish_inventory(&ledger));
    drop(ledger);
    let ((raw, hours), fill) = timed(|| fill_history(&path, days, per_day, now_ms));
    let size = std::fs::metadata(&path).expect("ledger file").len();
    println!(
        "history: {days} days x {per_day} allocations/day over {NODES} nodes x {DEVICES_PER_NODE} \
         devices: inventory {inventory:.1?}, fill {fill:.1?}"
    );
    println!(
        "history: {raw} raw intervals (the last 7 days), {hours} hourly totals; file {:.1} MiB",
        size as f64 / (1024.0 * 1024.0)
    );

    let (ledger, open) = timed(|| Ledger::open_with(&path, DRIVER, options()).expect("reopen"));
    println!("history: restart (open) {open:.2?}");
    let window = (START_MS, now_ms);
    let last_day = (hour_of(now_ms - DAY_MS), now_ms);
    for (name, (from, to)) in [("whole window", window), ("last day", last_day)] {
        for by in [UsageBy::Namespace, UsageBy::Node] {
            let (usage, took) = timed(|| ledger.usage(from, to, by).expect("usage"));
            println!(
                "history: usage over the {name} by {by:?}: {took:.2?} ({} rows, {:.0} device-hours)",
                usage.rows.len(),
                usage.total.device_seconds / 3600.0
            );
        }
    }
    let mid = (START_MS + 30 * DAY_MS, START_MS + 31 * DAY_MS);
    if days > 31 {
        let (usage, took) = timed(|| {
            ledger
                .usage(mid.0, mid.1, UsageBy::Namespace)
                .expect("usage")
        });
        println!(
            "history: usage over one rolled-up day (day 30) by namespace: {took:.2?} ({} rows)",
            usage.rows.len()
        );
    }
}
