//! Durable allocate+release throughput of the ledger with 1 caller and with 4, 16 and 64
//! concurrent callers (group commit). Every operation returns only after its durable commit.
//! Besides criterion's timings (1 and 16 callers), prints ops/s for each number of callers, its
//! ratio to the single caller of the same run and the mean batch size of the group commit; then
//! the same runs on redb's in-memory backend (no sync), where the time per operation inside a
//! batch is the writer's own work; then on a file whose sync is replaced by a wait of
//! `EMULATED_SYNC` (a disk that syncs in 0.35 ms, whatever disk the bench runs on; writes still
//! go to the file, nothing is durable).

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger, LedgerOptions};
use dra_allocator::model::{AttributeValue, Device, EffectiveRequest, Policy, Sharing};
use redb::backends::{FileBackend, InMemoryBackend};
use redb::StorageBackend;

/// How long a sync of the emulated disk takes.
const EMULATED_SYNC: Duration = Duration::from_micros(350);

const DRIVER: &str = "gpu.example.com";
/// 64 devices: each of the 64 callers holds at most one at a time.
const NODES: usize = 8;
const DEVICES_PER_NODE: usize = 8;

/// Publishes `NODES` nodes of `DEVICES_PER_NODE` GPUs into `ledger`.
fn with_inventory(ledger: Ledger) -> Ledger {
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

/// A file whose `sync_data` waits `EMULATED_SYNC` instead of syncing, counting the syncs and
/// the time they took. A sleep overshoots by the timer slack and the wake-up, so each one is
/// shortened by the mean overshoot seen so far.
#[derive(Debug)]
struct EmulatedSync {
    file: FileBackend,
    syncs: Arc<AtomicU64>,
    sync_nanos: Arc<AtomicU64>,
    overshoot_nanos: AtomicU64,
}

impl StorageBackend for EmulatedSync {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        let started = Instant::now();
        let overshoot = Duration::from_nanos(self.overshoot_nanos.load(Ordering::Relaxed));
        let asked = EMULATED_SYNC.saturating_sub(overshoot);
        thread::sleep(asked);
        let took = started.elapsed();
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // A moving mean over about 16 syncs.
        let seen = nanos(took.saturating_sub(asked));
        let mean = nanos(overshoot);
        self.overshoot_nanos
            .store(mean - mean / 16 + seen / 16, Ordering::Relaxed);
        self.sync_nanos.fetch_add(nanos(took), Ordering::Relaxed);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.file.write(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.file.close()
    }
}

/// A ledger on `path` whose syncs take `EMULATED_SYNC`, with the sync counters.
fn emulated_ledger(path: &Path) -> (Ledger, Arc<AtomicU64>, Arc<AtomicU64>) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("bench file");
    let (syncs, sync_nanos) = (Arc::default(), Arc::default());
    let backend = EmulatedSync {
        file: FileBackend::new(file).expect("file backend"),
        syncs: Arc::clone(&syncs),
        sync_nanos: Arc::clone(&sync_nanos),
        overshoot_nanos: AtomicU64::new(0),
    };
    let ledger = Ledger::open_backend(backend, DRIVER, LedgerOptions::default())
        .expect("open emulated ledger");
    (ledger, syncs, sync_nanos)
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
    let ledger = Ledger::open(dir.path().join("bench.redb"), DRIVER).expect("open ledger");
    let ledger = with_inventory(ledger);
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

    report("file, durable", &ledger, &next);
    let memory = Ledger::open_backend(InMemoryBackend::new(), DRIVER, LedgerOptions::default())
        .expect("open in-memory ledger");
    report("in-memory backend, no sync", &with_inventory(memory), &next);
    let (emulated, syncs, sync_nanos) = emulated_ledger(&dir.path().join("emulated.redb"));
    let what = format!("file, sync emulated at {} µs", EMULATED_SYNC.as_micros());
    report(&what, &with_inventory(emulated), &next);
    let syncs_done = syncs.load(Ordering::Relaxed).max(1);
    println!(
        "ledger_commit ({what}): a sync took {:.0} µs on average ({syncs_done} syncs)",
        sync_nanos.load(Ordering::Relaxed) as f64 / syncs_done as f64 / 1e3
    );
}

/// Prints ops/s for 1, 4, 16 and 64 callers with the ratio to 1 caller, the mean batch size and
/// the mean commit time per operation (applying the batch and committing it, sync included).
fn report(what: &str, ledger: &Ledger, next: &AtomicU64) {
    let window = Duration::from_secs(3);
    let mut single = None;
    for callers in [1, 4, 16, 64] {
        let before = ledger.commit_stats();
        let rate = ops_per_second(ledger, callers, window, next);
        let after = ledger.commit_stats();
        let commits = (after.commits - before.commits).max(1);
        let batch = (after.operations - before.operations) as f64 / commits as f64;
        // The recorder keeps the most recent commits only.
        let recent = &after.recent[after.recent.len().saturating_sub(commits as usize)..];
        let busy: Duration = recent.iter().map(|s| s.duration).sum();
        let operations: usize = recent.iter().map(|s| s.batch_size).sum();
        let per_operation = busy.as_secs_f64() * 1e6 / operations.max(1) as f64;
        let ratio = rate / *single.get_or_insert(rate);
        println!(
            "ledger_commit ({what}): {callers:>2} callers: {rate:>6.0} ops/s ({ratio:>4.1}x \
             the single caller, mean batch {batch:.1} operations per commit, \
             {per_operation:.1} µs of commit per operation)"
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
