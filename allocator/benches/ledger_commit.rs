//! Durable allocate+release throughput of the ledger with 1 caller and with 16 concurrent callers
//! (group commit). Every operation returns only after its durable commit. Besides criterion's
//! timings, prints ops/s for both and their ratio, with the mean batch size of the group commit.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger};
use dra_allocator::model::{AttributeValue, Device, EffectiveRequest, Policy, Sharing};

const DRIVER: &str = "gpu.example.com";
const NODES: usize = 4;
const DEVICES_PER_NODE: usize = 8;

fn ledger(dir: &std::path::Path) -> Ledger {
    let ledger = Ledger::open(dir.join("bench.redb"), DRIVER).expect("open ledger");
    for n in 0..NODES {
        let devices = (0..DEVICES_PER_NODE)
            .map(|d| {
                Device::new(format!("gpu-{d}"))
                    .with("model", AttributeValue::String("H100".to_owned()))
            })
            .collect();
        ledger
            .set_inventory(&format!("node-{n}"), devices)
            .expect("inventory");
    }
    ledger
}

fn one_device() -> EffectiveRequest {
    EffectiveRequest {
        count: 1,
        selector: Vec::new(),
        sharing: Sharing::Exclusive,
        policy: Policy::Pack,
        same_attribute: None,
    }
}

/// One durable allocate followed by one durable release of a fresh claim.
fn allocate_release(ledger: &Ledger, uid: &str) {
    let allocation = ledger
        .allocate(AllocateRequest {
            claim: ClaimRef::new(uid, "bench", uid),
            pod_uid: None,
            request: one_device(),
            node: None,
        })
        .expect("allocate");
    black_box(allocation);
    ledger.release(uid).expect("release");
}

/// Runs `pairs` allocate+release pairs spread over `callers` threads; returns the elapsed time.
fn run(ledger: &Ledger, callers: usize, pairs: u64, next: &AtomicU64) -> Duration {
    let per_caller = pairs.div_ceil(callers as u64);
    let barrier = Arc::new(Barrier::new(callers + 1));
    let handles: Vec<_> = (0..callers)
        .map(|_| {
            let ledger = ledger.clone();
            let barrier = barrier.clone();
            let first = next.fetch_add(per_caller, Ordering::Relaxed);
            thread::spawn(move || {
                barrier.wait();
                for i in first..first + per_caller {
                    allocate_release(&ledger, &format!("claim-{i}"));
                }
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for handle in handles {
        handle.join().expect("caller thread");
    }
    // Scaled to the `pairs` asked for when rounding gave each caller one more.
    started
        .elapsed()
        .mul_f64(pairs as f64 / (per_caller * callers as u64) as f64)
}

/// Operations per second (an allocate and a release are two operations) over about `window`.
fn ops_per_second(ledger: &Ledger, callers: usize, window: Duration, next: &AtomicU64) -> f64 {
    let mut pairs = 0u64;
    let mut elapsed = Duration::ZERO;
    while elapsed < window {
        let batch = 64 * callers as u64;
        elapsed += run(ledger, callers, batch, next);
        pairs += batch;
    }
    (2 * pairs) as f64 / elapsed.as_secs_f64()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = ledger(dir.path());
    let next = AtomicU64::new(0);
    let mut group = c.benchmark_group("ledger_commit");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for callers in [1, 16] {
        group.bench_function(format!("allocate_release_{callers}_callers"), |b| {
            b.iter_custom(|iters| run(&ledger, callers, iters, &next));
        });
    }
    group.finish();

    let window = Duration::from_secs(3);
    let single = ops_per_second(&ledger, 1, window, &next);
    let before = ledger.commit_stats();
    let sixteen = ops_per_second(&ledger, 16, window, &next);
    let after = ledger.commit_stats();
    let batch = (after.operations - before.operations) as f64
        / (after.commits - before.commits).max(1) as f64;
    println!("ledger_commit: 1 caller: {single:.0} durable ops/s");
    println!(
        "ledger_commit: 16 callers: {sixteen:.0} durable ops/s ({:.1}x the single caller, \
         mean batch {batch:.1} operations per commit)",
        sixteen / single
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
