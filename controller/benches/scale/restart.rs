//! Restart: a simulated cluster of `nodes` nodes whose devices a first `dra-ledger run` puts
//! into its ledger; then `claims` claims allocated straight in that ledger and shown in the
//! cluster (the fill), and `dra-ledger run` restarted on it several times, each timed from the
//! spawn to the first 200 of `/readyz` (ledger open, inventory synced, initial reconcile done),
//! with its resident memory then.

use std::time::Duration;

use dra_allocator::ledger::Ledger;

use crate::e2e_support::DRIVER;
use crate::procs::{self, mib, ms, Controller, Memory};
use crate::workload;

/// How long one start may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(600);

/// The sizes of the restart part.
pub struct Sizes {
    /// Nodes of the cluster.
    pub nodes: usize,
    /// Devices per node.
    pub devices: usize,
    /// Allocated claims in the ledger and the cluster.
    pub claims: usize,
    /// Restarts measured.
    pub runs: usize,
}

/// One start: the times from the spawn and the memory once ready.
struct Start {
    ledger_open: Duration,
    started: Duration,
    ready: Duration,
    memory: Memory,
    cpu: Duration,
}

fn start_once(kubeconfig: &std::path::Path, ledger: &std::path::Path) -> Start {
    let mut controller = Controller::start(kubeconfig, ledger);
    let ready = controller.wait_ready(READY_TIMEOUT);
    let start = Start {
        ledger_open: controller.ledger_open,
        started: controller.started,
        ready,
        memory: Memory::of(controller.pid()),
        cpu: procs::cpu_time(controller.pid()),
    };
    controller.stop();
    start
}

fn row(label: &str, start: &Start) {
    println!(
        "| {label} | {} | {} | {} | {} | {} | {:.2} |",
        ms(start.ledger_open),
        ms(start.started),
        ms(start.ready),
        mib(start.memory.rss_kib),
        mib(start.memory.hwm_kib),
        start.cpu.as_secs_f64(),
    );
}

/// Keeps the filled cluster up for starts by hand (a profiler's, say) until the file
/// `release` appears in `dir`.
fn hold(kubeconfig: &std::path::Path, ledger: &std::path::Path, dir: &std::path::Path) {
    let release = dir.join("release");
    eprintln!(
        "scale: restart: holding the cluster; kubeconfig {}, ledger {}; `touch {}` goes on",
        kubeconfig.display(),
        ledger.display(),
        release.display()
    );
    while !release.exists() {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Runs the restart part and prints its table.
pub fn run(runtime: &tokio::runtime::Runtime, sizes: &Sizes) -> anyhow::Result<()> {
    let dir = procs::run_dir();
    eprintln!(
        "scale: restart: starting the simulated cluster ({} nodes x {} devices) ...",
        sizes.nodes, sizes.devices
    );
    let sim = procs::sim(&dir, sizes.nodes, sizes.devices);
    let client = runtime.block_on(async { procs::client(&sim.url) })?;
    runtime.block_on(workload::prepare(&client));
    let ledger_path = dir.join("ledger.redb");

    // The first start creates the ledger and takes the inventory of every node from the slices.
    let empty = start_once(&sim.kubeconfig, &ledger_path);

    eprintln!("scale: restart: filling {} allocations ...", sizes.claims);
    let ledger = Ledger::open(&ledger_path, DRIVER)?;
    let fill = runtime.block_on(workload::fill_allocated(
        &client,
        &ledger,
        sizes.claims,
        sizes.nodes,
    ));
    let held = ledger.utilisation()?;
    drop(ledger);
    let file_size = std::fs::metadata(&ledger_path)?.len();
    if std::env::var_os("BENCH_HOLD").is_some() {
        hold(&sim.kubeconfig, &ledger_path, &dir);
    }

    let mut starts = Vec::new();
    for run in 0..sizes.runs {
        eprintln!("scale: restart: start {} of {} ...", run + 1, sizes.runs);
        starts.push(start_once(&sim.kubeconfig, &ledger_path));
    }
    drop(sim);

    println!();
    println!(
        "Restart: {} nodes x {} devices, {} claims allocated in the ledger and the cluster ({} in the ledger's count), ledger file {:.1} MiB, filled in {:.0} s",
        sizes.nodes,
        sizes.devices,
        sizes.claims,
        held.claims_allocated,
        file_size as f64 / (1024.0 * 1024.0),
        fill.as_secs_f64(),
    );
    println!();
    println!("| start | ledger open ms | controller started ms | /readyz 200 ms | VmRSS MiB | VmHWM MiB | CPU s |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    row("first (empty ledger)", &empty);
    for (i, start) in starts.iter().enumerate() {
        row(&format!("restart {}", i + 1), start);
    }
    let mut ready: Vec<Duration> = starts.iter().map(|s| s.ready).collect();
    ready.sort();
    let mut hwm: Vec<u64> = starts.iter().map(|s| s.memory.hwm_kib).collect();
    hwm.sort_unstable();
    if let (Some(median), Some(&peak)) = (ready.get(ready.len() / 2), hwm.get(hwm.len() / 2)) {
        println!();
        println!(
            "restart median: /readyz 200 after {} ms, VmHWM {} MiB (aims: 3000 ms, 150 MiB)",
            ms(*median),
            mib(peak)
        );
    }
    Ok(())
}
