//! Prepare latency as the agent runs it, fsyncs included: batches of 1 and of 8 new exclusive
//! claims, each prepare durable when it returns (the journal's two commits, the CDI files synced
//! and renamed, the directory synced). Two paths: `JournalPreparer` with resource handles (what
//! the 1.30 `v1alpha3.Node` service calls), and the `v1.DRAPlugin` call as a 1.34 kubelet
//! makes it, over the plugin's Unix socket, the service reading each claim's allocation (from an
//! in-memory claim source, so no API server latency is in the figure) before the same preparer.
//! The journal and CDI directory are made under the target directory, on disk rather than on a
//! tmpfs; the file system it is on is printed. Each batch is unprepared, untimed, before the
//! next. Prints p50 and p99 per batch and per claim.
//!
//! `cargo bench -p dra-node --bench prepare`; `DRA_NODE_BENCH_ROUNDS` sets the timed rounds per
//! batch size (default 200).

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use dra_allocator::handle::{HandleData, HandleSharing};
use dra_node::cdi::CdiDir;
use dra_node::device::{Inventory, NodeDevice};
use dra_node::grpc::{DraService, Plugin, PluginConfig, PluginServices};
use dra_node::journal::Journal;
use dra_node::prepare::{ClaimPreparer, ClaimRequest, JournalPreparer};
use dra_node::v1::claims::{ClaimSource, MemoryClaims};
use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::v1;
use dra_types::resource_v1::{
    DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
};

const DRIVER: &str = "gpu.dra-ledger.io";
const NODE: &str = "bench-node";
/// Untimed rounds before the timed ones, so that the files exist and the caches are warm.
const WARMUP: usize = 10;

fn inventory() -> Inventory {
    (0..8)
        .map(|i| {
            let name = format!("gpu-{i}");
            let device = NodeDevice {
                name: name.clone(),
                device_nodes: vec![format!("/dev/dri/renderD{}", 128 + i).into()],
                env: [("GPU_INDEX".to_owned(), i.to_string())].into(),
                ..NodeDevice::default()
            };
            (name, device)
        })
        .collect()
}

fn claim(round: usize, index: usize) -> ClaimRequest {
    let uid = format!("claim-{round}-{index}");
    let resource_handle = HandleData {
        node: NODE.to_owned(),
        devices: vec![format!("gpu-{index}")],
        sharing: HandleSharing::Exclusive,
        claim_uid: uid.clone(),
    }
    .to_json();
    ClaimRequest {
        uid,
        namespace: "bench".to_owned(),
        name: format!("claim-{index}"),
        resource_handle,
    }
}

/// The type of the file system `path` is on, from the longest mount point above it.
fn file_system(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (point, kind) = (fields.get(1)?, fields.get(2)?);
            path.starts_with(point)
                .then_some((point.len(), (*kind).to_owned()))
        })
        .max()
        .map_or_else(|| "unknown".to_owned(), |(_, kind)| kind)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank]
}

fn millis(time: Duration) -> f64 {
    time.as_secs_f64() * 1e3
}

/// The preparer over a new journal and CDI directory in `dir`.
fn preparer(dir: &Path) -> JournalPreparer {
    let journal = Journal::open(dir.join("journal.redb"), DRIVER).unwrap();
    let cdi = CdiDir::new(dir.join("cdi"), DRIVER);
    let inventory = Arc::new(RwLock::new(inventory()));
    JournalPreparer::new(journal, cdi, NODE, inventory, "bench-boot")
}

fn report(path: &str, batch: usize, rounds: usize, mut times: Vec<Duration>) {
    times.sort();
    let (p50, p99) = (percentile(&times, 0.50), percentile(&times, 0.99));
    let claims = batch as f64;
    println!(
        "{path}, batch of {batch}: p50 {:.2} ms, p99 {:.2} ms per batch; \
         p50 {:.2} ms, p99 {:.2} ms per claim ({rounds} rounds)",
        millis(p50),
        millis(p99),
        millis(p50) / claims,
        millis(p99) / claims,
    );
}

fn run(batch: usize, rounds: usize) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let preparer = preparer(dir.path());
    let mut times = Vec::with_capacity(rounds);
    for round in 0..WARMUP + rounds {
        let claims: Vec<ClaimRequest> = (0..batch).map(|i| claim(round, i)).collect();
        let started = Instant::now();
        let answers = preparer.prepare(&claims);
        let took = started.elapsed();
        assert!(
            answers.iter().all(|(_, r)| r.is_ok()),
            "prepare failed: {answers:?}"
        );
        if round >= WARMUP {
            times.push(took);
        }
        let answers = preparer.unprepare(&claims);
        assert!(
            answers.iter().all(|(_, r)| r.is_ok()),
            "unprepare failed: {answers:?}"
        );
    }
    report("prepare (v1alpha3, handles)", batch, rounds, times);
}

/// The claim `claim(round, index)` as the 1.34 scheduler leaves it allocated.
fn allocated(request: &ClaimRequest, index: usize) -> ResourceClaim {
    let result = DeviceRequestAllocationResult::new("gpu", DRIVER, NODE, &format!("gpu-{index}"));
    ResourceClaim::new(&request.namespace, &request.name, &request.uid).allocated(
        DeviceAllocationResult {
            results: vec![result],
            config: Vec::new(),
        },
    )
}

fn run_v1(batch: usize, rounds: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let claims = Arc::new(MemoryClaims::default());
    let source: Arc<dyn ClaimSource> = claims.clone();
    let service = DraService::new(Arc::new(preparer(dir.path())), source, DRIVER, NODE);
    let config = PluginConfig::new(
        DRIVER,
        dir.path().join("registry"),
        dir.path().join("plugins"),
    );
    let times = runtime.block_on(async {
        let plugin = Plugin::bind(config).unwrap();
        let socket = plugin.sockets().plugin().to_owned();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(plugin.serve_services(PluginServices::v1(service), async {
            let _ = stopped.await;
        }));
        let channel = dra_sim::actors::plugins::connect(&socket).await.unwrap();
        let mut kubelet = v1::dra_plugin_client::DraPluginClient::new(channel);
        let mut times = Vec::with_capacity(rounds);
        for round in 0..WARMUP + rounds {
            let requests: Vec<ClaimRequest> = (0..batch).map(|i| claim(round, i)).collect();
            for (index, request) in requests.iter().enumerate() {
                claims.put(allocated(request, index));
            }
            let kubelet_claims: Vec<v1::Claim> = requests
                .iter()
                .map(|r| v1::Claim {
                    namespace: r.namespace.clone(),
                    uid: r.uid.clone(),
                    name: r.name.clone(),
                })
                .collect();
            let started = Instant::now();
            let answer = kubelet
                .node_prepare_resources(v1::NodePrepareResourcesRequest {
                    claims: kubelet_claims.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            let took = started.elapsed();
            assert!(
                answer
                    .claims
                    .values()
                    .all(|c| c.error.is_empty() && c.devices.len() == 1),
                "prepare failed: {answer:?}"
            );
            if round >= WARMUP {
                times.push(took);
            }
            let answer = kubelet
                .node_unprepare_resources(v1::NodeUnprepareResourcesRequest {
                    claims: kubelet_claims,
                })
                .await
                .unwrap()
                .into_inner();
            assert!(
                answer.claims.values().all(|c| c.error.is_empty()),
                "unprepare failed: {answer:?}"
            );
            for request in &requests {
                claims.remove(&request.namespace, &request.name);
            }
        }
        let _ = stop.send(());
        server.await.unwrap().unwrap();
        times
    });
    report(
        "prepare (v1.DRAPlugin over the socket)",
        batch,
        rounds,
        times,
    );
}

fn main() {
    let rounds = std::env::var("DRA_NODE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(target).unwrap();
    println!(
        "prepare latency in {} ({}), fsync included",
        target.display(),
        file_system(target)
    );
    for batch in [1, 8] {
        run(batch, rounds);
    }
    for batch in [1, 8] {
        run_v1(batch, rounds);
    }
}
