//! A fixed allocate+release load on the ledger's writer, for profilers: `CALLERS` threads (64)
//! each run `PAIRS` allocate+release pairs (200) of fresh claims over 8 nodes of 8 devices, on
//! redb's in-memory backend with the journal and audit retention set to `RETENTION` (100,000;
//! a small value makes every batch prune, as a ledger in service does). Prints ops/s and the
//! mean batch. Under `valgrind --tool=callgrind --separate-threads=yes` the writer thread's
//! instruction count divided by the operations is the writer's work per operation.
//!
//! Run with `cargo run --release -p dra-allocator --example commit_load`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger, LedgerOptions};
use dra_allocator::model::{AttributeValue, Device, EffectiveRequest, Policy, Sharing};
use redb::backends::InMemoryBackend;

fn setting(name: &str, default: u64) -> Result<u64, Box<dyn std::error::Error>> {
    match std::env::var(name) {
        Ok(text) => Ok(text.parse()?),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let callers = setting("CALLERS", 64)?;
    let pairs = setting("PAIRS", 200)?;
    let retention = setting("RETENTION", 100_000)?;
    let options = LedgerOptions {
        audit_retention: retention,
        intent_retention: retention,
        ..LedgerOptions::default()
    };
    let ledger = Ledger::open_backend(InMemoryBackend::new(), "gpu.example.com", options)?;
    for n in 0..8 {
        let devices = (0..8)
            .map(|d| {
                Device::new(format!("gpu-{d}"))
                    .with("model", AttributeValue::String("H100".to_owned()))
            })
            .collect();
        ledger.set_inventory(&format!("node-{n}"), devices)?;
    }
    let next = AtomicU64::new(0);
    let started = Instant::now();
    thread::scope(|scope| -> Result<(), Box<dyn std::error::Error>> {
        let workers: Vec<_> = (0..callers)
            .map(|_| {
                scope.spawn(|| -> Result<(), dra_allocator::ledger::LedgerError> {
                    for _ in 0..pairs {
                        let uid = format!("claim-{}", next.fetch_add(1, Ordering::Relaxed));
                        ledger.allocate(AllocateRequest {
                            claim: ClaimRef::new(&uid, "load", &uid),
                            pod_uid: None,
                            request: EffectiveRequest {
                                count: 1,
                                selector: Vec::new(),
                                sharing: Sharing::Exclusive,
                                policy: Policy::Pack,
                                same_attribute: None,
                            },
                            node: None,
                        })?;
                        ledger.release(&uid)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a caller thread panicked")??;
        }
        Ok(())
    })?;
    let operations = 2 * callers * pairs;
    println!(
        "{operations} operations from {callers} callers: {:.0} ops/s, mean batch {:.1}",
        operations as f64 / started.elapsed().as_secs_f64(),
        ledger.commit_stats().mean_batch_size()
    );
    Ok(())
}
