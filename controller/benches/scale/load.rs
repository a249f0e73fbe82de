//! Scale: a simulated cluster of `nodes` x `devices` and `dra-ledger run` on a fresh ledger;
//! `immediate` `Immediate` claims and `pods` pods with one claim each are created, and the run
//! waits until the ledger holds every one. Then `oha` reads `/v1/nodes`, `/v1/claims` and
//! `/metrics` at a steady rate, one endpoint after the other, and Chromium loads the device page
//! ([`crate::page`]).
//!
//! The Allocate and `UnsuitableNodes` figures are the percentiles of the controller's own
//! histograms (`dra_ledger_allocate_duration_seconds`,
//! `dra_ledger_unsuitable_nodes_duration_seconds`), interpolated within their power-of-two
//! buckets as `histogram_quantile` does.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;

use crate::e2e_support;
use crate::procs::{self, histogram_quantile, mib, ms, sample, Controller, Memory};
use crate::workload;

/// Pod creations in flight at once.
const CONCURRENCY: usize = 32;
/// How long the claims may take to be allocated.
const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(1200);

/// The sizes of the scale part.
pub struct Sizes {
    /// Nodes of the cluster.
    pub nodes: usize,
    /// Devices per node.
    pub devices: usize,
    /// `Immediate` claims.
    pub immediate: usize,
    /// Pods with one claim each (delayed allocation through `PodSchedulingContexts`).
    pub pods: usize,
    /// Requests per second of the read load.
    pub qps: u32,
    /// How long the read load runs per endpoint.
    pub seconds: u32,
}

/// `oha` from `OHA` or `PATH`, or why the read load is skipped.
fn oha() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("OHA") {
        return Ok(PathBuf::from(path));
    }
    testkit::tools::on_path("oha").ok_or_else(|| {
        "oha is not on PATH (install it with `cargo install oha --locked`, or set OHA to its path): the read load is skipped".to_owned()
    })
}

/// The figures of one `oha` run.
struct Load {
    path: &'static str,
    requests_per_second: f64,
    success_rate: f64,
    p50: f64,
    p99: f64,
    max: f64,
    cpu: Duration,
    memory: Memory,
}

fn run_oha(oha: &PathBuf, controller: &Controller, path: &'static str, sizes: &Sizes) -> Load {
    let url = format!("http://{}{path}", controller.addr);
    let cpu_before = procs::cpu_time(controller.pid());
    let output = Command::new(oha)
        .args(["-z", &format!("{}s", sizes.seconds)])
        .args(["-q", &sizes.qps.to_string(), "-c", "8"])
        .args(["--no-tui", "--output-format", "json"])
        .arg(&url)
        .output()
        .expect("oha runs");
    let cpu = procs::cpu_time(controller.pid()).saturating_sub(cpu_before);
    let text = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|error| {
        panic!(
            "oha printed no JSON ({error}): {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let seconds = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    Load {
        path,
        requests_per_second: seconds(&report["summary"]["requestsPerSec"]),
        success_rate: seconds(&report["summary"]["successRate"]),
        p50: seconds(&report["latencyPercentiles"]["p50"]),
        p99: seconds(&report["latencyPercentiles"]["p99"]),
        max: seconds(&report["summary"]["slowest"]),
        cpu,
        memory: Memory::of(controller.pid()),
    }
}

async fn create_pods(client: &kube::Client, count: usize) {
    let pods = Api::<Pod>::default_namespaced(client.clone());
    futures::stream::iter(0..count)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod = e2e_support::pod(&format!("pod-{i}"), &[("gpu", workload::TEMPLATE)]);
                pods.create(&PostParams::default(), &pod)
                    .await
                    .expect("pod created");
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
}

/// Waits until the controller's ledger holds `claims` allocated devices; the allocated count
/// seen last.
fn wait_allocated(controller: &Controller, claims: usize) -> f64 {
    let deadline = Instant::now() + ALLOCATE_TIMEOUT;
    let name = "dra_ledger_devices{state=\"allocated\"}";
    let mut last = 0.0;
    while Instant::now() < deadline {
        last = sample(&controller.metrics(), name).unwrap_or(0.0);
        if last >= claims as f64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    last
}

fn print_histogram(metrics: &str, label: &str, name: &str) {
    let count = sample(metrics, &format!("{name}_count")).unwrap_or(0.0);
    let quantile = |q| histogram_quantile(metrics, name, q).map_or_else(|| "-".to_owned(), ms);
    println!(
        "| {label} | {count:.0} | {} | {} |",
        quantile(0.5),
        quantile(0.99)
    );
}

/// Runs `oha` on the admin endpoints in turn and prints their latency, or why it did not run.
fn print_read_load(controller: &Controller, sizes: &Sizes) {
    match oha() {
        Err(why) => {
            println!();
            println!("{why}");
        }
        Ok(oha) => {
            let loads: Vec<Load> = ["/v1/nodes", "/v1/claims", "/metrics"]
                .into_iter()
                .map(|path| {
                    eprintln!("scale: load: oha on {path} ...");
                    run_oha(&oha, controller, path, sizes)
                })
                .collect();
            println!();
            println!(
                "Read load: oha, {} requests/s for {} s per endpoint, 8 connections",
                sizes.qps, sizes.seconds
            );
            println!();
            println!("| endpoint | requests/s | success | p50 ms | p99 ms | max ms | controller CPU | VmRSS MiB |");
            println!("|---|---:|---:|---:|---:|---:|---:|---:|");
            for load in &loads {
                println!(
                    "| {} | {:.0} | {:.1} % | {:.2} | {:.2} | {:.1} | {:.0} % of one core | {} |",
                    load.path,
                    load.requests_per_second,
                    load.success_rate * 100.0,
                    load.p50 * 1000.0,
                    load.p99 * 1000.0,
                    load.max * 1000.0,
                    load.cpu.as_secs_f64() * 100.0 / f64::from(sizes.seconds),
                    mib(load.memory.rss_kib),
                );
            }
        }
    }
}

/// Runs the scale part and prints its tables.
pub fn run(runtime: &tokio::runtime::Runtime, sizes: &Sizes) -> anyhow::Result<()> {
    let dir = procs::run_dir();
    eprintln!(
        "scale: load: starting the simulated cluster ({} nodes x {} devices) ...",
        sizes.nodes, sizes.devices
    );
    let sim = procs::sim(&dir, sizes.nodes, sizes.devices);
    let client = runtime.block_on(async { procs::client(&sim.url) })?;
    runtime.block_on(workload::prepare(&client));
    let mut controller = Controller::start(&sim.kubeconfig, &dir.join("ledger.redb"));
    let ready = controller.wait_ready(Duration::from_secs(600));
    let idle = Memory::of(controller.pid());

    let claims = sizes.immediate + sizes.pods;
    eprintln!(
        "scale: load: {} Immediate claims and {} pods with one claim ...",
        sizes.immediate, sizes.pods
    );
    let cpu_before = procs::cpu_time(controller.pid());
    let started = Instant::now();
    runtime.block_on(async {
        workload::create_claims(&client, "claim", sizes.immediate).await;
        create_pods(&client, sizes.pods).await;
    });
    let created = started.elapsed();
    let allocated = wait_allocated(&controller, claims);
    let wall = started.elapsed();
    let cpu = procs::cpu_time(controller.pid()).saturating_sub(cpu_before);
    let loaded = Memory::of(controller.pid());
    let metrics = controller.metrics();

    println!();
    println!(
        "Scale: {} nodes x {} devices; {} Immediate claims and {} pods with one claim, created in {:.1} s; {allocated:.0} of {claims} allocated after {:.1} s",
        sizes.nodes,
        sizes.devices,
        sizes.immediate,
        sizes.pods,
        created.as_secs_f64(),
        wall.as_secs_f64(),
    );
    println!();
    println!("| controller | figure |");
    println!("|---|---:|");
    println!(
        "| start to /readyz 200 on an empty ledger | {} ms |",
        ms(ready)
    );
    println!("| VmRSS once ready | {} MiB |", mib(idle.rss_kib));
    println!("| VmRSS after the claims | {} MiB |", mib(loaded.rss_kib));
    println!("| VmHWM after the claims | {} MiB |", mib(loaded.hwm_kib));
    println!(
        "| CPU while allocating | {:.1} s ({:.2} ms per claim, {:.0} % of one core) |",
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1000.0 / claims.max(1) as f64,
        cpu.as_secs_f64() * 100.0 / wall.as_secs_f64()
    );
    println!();
    println!("| driver call | count | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    print_histogram(&metrics, "Allocate", "dra_ledger_allocate_duration_seconds");
    print_histogram(
        &metrics,
        "UnsuitableNodes",
        "dra_ledger_unsuitable_nodes_duration_seconds",
    );
    print_histogram(
        &metrics,
        "ledger commit",
        "dra_ledger_ledger_commit_duration_seconds",
    );

    print_read_load(&controller, sizes);
    crate::page::print_page_load(&controller);
    let _ = controller.wait_ready(Duration::from_secs(10));
    controller.stop();
    drop(sim);
    Ok(())
}
