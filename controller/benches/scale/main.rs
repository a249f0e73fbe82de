//! Restart and scale of the controller process, each against a simulated cluster in a child
//! process (`dra-ledger sim`, Kubernetes 1.30) with the real `dra-ledger run` as another child,
//! so that its start time, memory and CPU are its own:
//!
//! - restart (`restart`): 100,000 claims allocated over 5,000 nodes x 20 devices, in the ledger
//!   and in the cluster; the time from the spawn to the first 200 of `/readyz` and the resident
//!   memory, for a first start on an empty ledger and for several restarts on the full one;
//! - scale (`load`): 5,000 nodes x 8 devices, 20,000 claims (`Immediate` claims and pods with one
//!   claim each); Allocate and `UnsuitableNodes` p50/p99, the controller's memory and CPU, then
//!   `/v1/nodes`, `/v1/claims` and `/metrics` under a steady read load from `oha` (skipped with
//!   a message when `oha` is not installed: `cargo install oha --locked`), and the device
//!   page's load time and size in headless Chromium (skipped without `chromium`).
//!
//! Run with `cargo bench -p dra-controller --bench scale`. `BENCH_PART` (`restart` or `load`)
//! runs one part; `BENCH_NODES`, `BENCH_CLAIMS` (restart), `BENCH_RESTARTS`, `BENCH_IMMEDIATE`,
//! `BENCH_PODS`, `BENCH_QPS` and `BENCH_SECONDS` (load) change the sizes. `BENCH_HOLD` keeps the filled
//! cluster of the restart part up for starts by hand until the file it names is created.

// The shared fixture is used in part only.
#[path = "../../tests/e2e/e2e_support/mod.rs"]
mod e2e_support;
mod load;
mod page;
mod procs;
mod restart;
mod workload;

/// `name` from the environment, else `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    // `cargo test --benches` runs this without `--bench`: nothing to do then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("scale: run with `cargo bench -p dra-controller --bench scale`");
        return Ok(());
    }
    let part = std::env::var("BENCH_PART").unwrap_or_default();
    let nodes = env_or("BENCH_NODES", 5000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "scale: {} cores; other processes on the machine share them",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    if part.is_empty() || part == "restart" {
        restart::run(
            &runtime,
            &restart::Sizes {
                nodes,
                devices: 20,
                claims: env_or("BENCH_CLAIMS", 100_000),
                runs: env_or("BENCH_RESTARTS", 3),
            },
        )?;
    }
    if part.is_empty() || part == "load" {
        load::run(
            &runtime,
            &load::Sizes {
                nodes,
                devices: 8,
                immediate: env_or("BENCH_IMMEDIATE", 18_000),
                pods: env_or("BENCH_PODS", 2_000),
                qps: env_or("BENCH_QPS", 50),
                seconds: env_or("BENCH_SECONDS", 10),
            },
        )?;
    }
    Ok(())
}
