//! The `scheduler_perf` DRA workload replayed on the simulated cluster: 100 nodes with 20
//! devices each; the cluster is first filled halfway (not measured), then the measured pods are
//! created as fast as the API server takes them and timed until each is seen bound.
//!
//! - `1 claim/pod`: 1000 + 1000 pods, one claim each from a template (2000 devices: full).
//! - `4 claims/pod`: 250 + 250 pods, two claims of each of two classes (NUMA 0 and NUMA 1
//!   devices), so 2000 devices again.
//!
//! Each runs on the simulated Kubernetes 1.30 (`v1alpha2`: our controller allocates through
//! `PodSchedulingContexts`) and on 1.34 (`v1`: the simulated kube-scheduler
//! allocates from the simulator's `ResourceSlices` by CEL, the NUMA classes being selectors of
//! the templates; the controller mirrors the allocations into its ledger, and the run ends only
//! once the ledger holds every claim), so that the two protocols' figures stand side by side.
//!
//! The simulator (API server, scheduler, resourceclaim controller, garbage collector) runs as a
//! child process (`dra-ledger sim`), the controller in this process, so that the CPU time of each
//! can be read apart. As in the upstream harness, whose nodes are fake, the nodes run no kubelet:
//! a bound pod stays Pending. `BENCH_KUBELET=1` gives every node the simulator's kubelet, which
//! starts each pod once bound (a status write and its watch events per pod).
//!
//! Run with `cargo bench -p dra-controller --bench scheduler_perf`; `BENCH_WORKERS` (default 10)
//! sets the controller workers, `BENCH_SCALE` (default 1.0) scales the pod counts,
//! `BENCH_RELEASE` (`1.30` or `1.34`) runs one release only, and `BENCH_RATE` (pods per second)
//! creates the measured pods at that steady rate instead of all at once, so that a pod's latency
//! is the pipeline's rather than its place in a queue.

#[path = "../../tests/e2e/e2e_support/mod.rs"]
mod e2e_support;
mod instrument;
mod report;
mod tracker;
mod v1;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use dra_allocator::ledger::{Ledger, LedgerOptions};
use dra_controller::driver::{DriverConfig, LedgerDriver};
use dra_controller::mirror::{run_mirror, Mirror, MirrorConfig};
use dra_framework::ControllerConfig;
use e2e_support::{assert_consistent, count, req, Env, Running, DRIVER};
use futures::StreamExt;
use kube::api::PostParams;
use kube::Client;
use tokio::task::JoinHandle;

use instrument::{cpu_time, threads_cpu, Recorder, TimingLayer};
use report::{Measured, Stage};
use tracker::Tracker;

/// The allocator of the `dra-ledger` binary, so that the controller in this process allocates as
/// it does there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nodes of the simulated cluster and devices per node.
const NODES: usize = 100;
const DEVICES_PER_NODE: usize = 20;
/// Pod creations in flight at once.
const CREATE_CONCURRENCY: usize = 32;
/// How long a phase may take before the benchmark gives up on it.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// The release whose scheduler allocates (`v1`).
const V1_RELEASE: &str = "1.34";
/// The names of the threads that run the controller (its runtime and its ledger's writer), whose
/// CPU time is the controller's; the rest of this process is the load generator and its watches.
const CONTROLLER_THREADS: [&str; 2] = ["controller", "ledger-writer"];

/// One workload.
struct Variant {
    name: &'static str,
    /// The Kubernetes release the simulator plays: `1.30` or `1.34`.
    release: &'static str,
    init_pods: usize,
    measured_pods: usize,
    /// `(pod claim name, template)` of every pod.
    claims: &'static [(&'static str, &'static str)],
}

/// The simulated cluster in a child process; killed on drop.
struct SimProcess {
    child: Child,
    url: String,
}

impl SimProcess {
    fn start(release: &str, kubelet: bool) -> anyhow::Result<SimProcess> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dra-ledger"));
        command.args(["sim", "--listen", "127.0.0.1:0", "--numa-nodes", "2"]);
        if !kubelet {
            command.arg("--no-kubelet");
        }
        let mut child = command
            .args(["--kubernetes-version", release])
            .args(["--nodes", &NODES.to_string()])
            .args(["--devices-per-node", &DEVICES_PER_NODE.to_string()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start dra-ledger sim")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let url = line.trim().to_owned();
        anyhow::ensure!(url.starts_with("http"), "dra-ledger sim printed {url:?}");
        Ok(SimProcess { child, url })
    }

    fn cpu(&self) -> Duration {
        cpu_time(&self.child.id().to_string()).unwrap_or_default()
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(url: &str, layer: Option<TimingLayer>) -> anyhow::Result<Client> {
    let mut config = kube::Config::new(url.parse()?);
    config.default_namespace = "default".into();
    config.read_timeout = Some(Duration::from_secs(60));
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match layer {
        Some(layer) => builder.with_layer(&layer).build(),
        None => builder.build(),
    })
}

/// Classes, parameters and templates of the workloads.
async fn prepare(env: &Env) {
    env.params("one", count(1)).await;
    env.template("gpu-one", e2e_support::CLASS, "one").await;
    env.class("gpu-numa0", vec![req("numa", "In", &["0"])])
        .await;
    env.class("gpu-numa1", vec![req("numa", "In", &["1"])])
        .await;
    env.template("numa0-one", "gpu-numa0", "one").await;
    env.template("numa1-one", "gpu-numa1", "one").await;
}

/// Creates pods `<prefix>-0..count` with `claims`, several at a time, in the shape of
/// `release`; with `rate`, pod `i` is created no earlier than `i / rate` seconds after the first.
/// Each body is encoded once and the created pod the server answers with is not decoded, so that
/// the load generator's own CPU stays out of the measured pipeline's way.
async fn create_pods(
    client: &Client,
    tracker: &Tracker,
    (prefix, count): (&str, usize),
    claims: &[(&str, &str)],
    release: &str,
    rate: Option<f64>,
) {
    let start = tokio::time::Instant::now();
    let request = kube::core::Request::new("/api/v1/namespaces/default/pods");
    futures::stream::iter(0..count)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            let body = if release == V1_RELEASE {
                serde_json::to_vec(&v1::pod(&name, claims))
            } else {
                serde_json::to_vec(&e2e_support::pod(&name, claims))
            };
            let create = request
                .create(&PostParams::default(), body.expect("a pod body"))
                .expect("a create request");
            let due = rate.map(|rate| start + Duration::from_secs_f64(i as f64 / rate));
            async move {
                if let Some(due) = due {
                    tokio::time::sleep_until(due).await;
                }
                tracker.created(&name);
                client.request_text(create).await.expect("pod created");
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .collect::<()>()
        .await;
}

/// The controller of the run: on 1.30 the ledger driver that allocates, on 1.34 the mirror of
/// the scheduler's allocations (stopped by its sender).
enum Work {
    Allocate(Box<(Env, Running)>),
    Mirror(
        Arc<Mirror>,
        tokio::sync::oneshot::Sender<()>,
        JoinHandle<()>,
    ),
}

/// The objects the workload needs on `release`; on 1.30 the environment of the `v1alpha2` driver.
async fn prepare_release(plain: &Client, release: &str) -> anyhow::Result<Option<Env>> {
    if release == V1_RELEASE {
        v1::prepare(plain, DRIVER).await?;
        return Ok(None);
    }
    let env = Env::connect(plain.clone()).await;
    prepare(&env).await;
    Ok(Some(env))
}

/// Starts what the controller does (with `env` on 1.30), its API requests and commits timed.
async fn start_work(
    env: Option<Env>,
    controller_client: Client,
    recorder: &Recorder,
    workers: usize,
) -> anyhow::Result<Work> {
    let Some(env) = env else {
        let dir = tempfile::tempdir()?.keep();
        let options = LedgerOptions {
            on_commit: Some(recorder.commit_hook()),
            ..LedgerOptions::default()
        };
        let ledger = Ledger::open_with(dir.join("ledger.redb"), DRIVER, options)?;
        let mirror = Arc::new(
            Mirror::new(ledger, controller_client, MirrorConfig::new(DRIVER))
                .with_observer(Arc::new(recorder.clone())),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run_mirror(mirror.clone(), async {
            let _ = stopped.await;
        }));
        tokio::time::timeout(PHASE_TIMEOUT, mirror.readiness().wait())
            .await
            .context("the mirror did not become ready")?;
        return Ok(Work::Mirror(mirror, stop, task));
    };
    let options = LedgerOptions {
        on_commit: Some(recorder.commit_hook()),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::open_with(env.ledger_path(), DRIVER, options)?;
    let driver = LedgerDriver::new(ledger, controller_client.clone(), DriverConfig::new(DRIVER))
        .with_observer(Arc::new(recorder.clone()));
    let running = Running::start_driver(
        &controller_client,
        driver,
        ControllerConfig::default(),
        workers,
    )
    .await;
    Ok(Work::Allocate(Box::new((env, running))))
}

async fn run(
    variant: &Variant,
    workers: usize,
    rate: Option<f64>,
    kubelet: bool,
    controller_rt: &tokio::runtime::Handle,
) -> anyhow::Result<Measured> {
    let sim = SimProcess::start(variant.release, kubelet)?;
    let plain = client(&sim.url, None)?;
    let recorder = Recorder::default();
    // The controller, its client included, runs on its own runtime, so that its CPU time can be
    // read apart from the load generator's.
    let env = prepare_release(&plain, variant.release).await?;
    let work = {
        let (recorder, url) = (recorder.clone(), sim.url.clone());
        controller_rt
            .spawn(async move {
                let controller_client =
                    client(&url, Some(TimingLayer::new(Arc::new(recorder.clone()))))?;
                start_work(env, controller_client, &recorder, workers).await
            })
            .await??
    };
    let v1 = variant.release == V1_RELEASE;
    let tracker = Tracker::start(&plain, variant.claims.len(), v1);

    let init = ("init", variant.init_pods);
    create_pods(
        &plain,
        &tracker,
        init,
        variant.claims,
        variant.release,
        None,
    )
    .await;
    let seen = tracker.wait_bound(variant.init_pods, PHASE_TIMEOUT).await;
    anyhow::ensure!(
        seen >= variant.init_pods,
        "{}: only {seen} of {} init pods bound",
        variant.name,
        variant.init_pods
    );

    recorder.take();
    let own_cpu = cpu_time("self").unwrap_or_default();
    let (controller_cpu, sim_cpu) = (threads_cpu(&CONTROLLER_THREADS), sim.cpu());
    let started = Instant::now();
    let measured = ("measured", variant.measured_pods);
    create_pods(
        &plain,
        &tracker,
        measured,
        variant.claims,
        variant.release,
        rate,
    )
    .await;
    let created = started.elapsed();
    let total = variant.init_pods + variant.measured_pods;
    let seen = tracker.wait_bound(total, PHASE_TIMEOUT).await;
    let wall = started.elapsed();
    let controller_cpu = threads_cpu(&CONTROLLER_THREADS).saturating_sub(controller_cpu);
    let load_cpu = cpu_time("self")
        .unwrap_or_default()
        .saturating_sub(own_cpu)
        .saturating_sub(controller_cpu);
    let sim_cpu = sim.cpu().saturating_sub(sim_cpu);
    let timings = recorder.take();
    tracker.stop();

    match work {
        Work::Allocate(allocator) => {
            let (env, running) = *allocator;
            assert_consistent(&env, running.ledger()).await;
            running.stop().await;
        }
        Work::Mirror(mirror, stop, task) => {
            // Every claim of a bound pod is in the ledger once the mirror has caught up.
            let claims = (total * variant.claims.len()) as u64;
            let deadline = Instant::now() + PHASE_TIMEOUT;
            while mirror.ledger().utilisation()?.claims_allocated < claims {
                anyhow::ensure!(Instant::now() < deadline, "the mirror lags behind");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = stop.send(());
            task.await?;
        }
    }
    drop(sim);

    let timelines = tracker.timelines("measured-");
    Ok(Measured {
        name: variant.name,
        release: variant.release,
        pods: variant.measured_pods,
        claims: variant.measured_pods * variant.claims.len(),
        bound: seen - variant.init_pods,
        created,
        wall,
        controller_cpu,
        load_cpu,
        sim_cpu,
        latencies: Stage::all(&timelines),
        split: Stage::split(&timelines),
        timings,
    })
}

fn main() -> anyhow::Result<()> {
    // `cargo test --benches` runs this without `--bench`: nothing to do then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("scheduler_perf: run with `cargo bench -p dra-controller --bench scheduler_perf`");
        return Ok(());
    }
    let workers = std::env::var("BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(10);
    let scale: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let rate: Option<f64> = std::env::var("BENCH_RATE")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|r: &f64| *r > 0.0);
    let kubelet = std::env::var("BENCH_KUBELET").is_ok_and(|k| k == "1");
    let scaled = |n: usize| ((n as f64 * scale).round() as usize).max(1);
    let mut variants = Vec::new();
    for release in ["1.30", V1_RELEASE] {
        variants.push(Variant {
            name: "1 claim/pod",
            release,
            init_pods: scaled(1000),
            measured_pods: scaled(1000),
            claims: &[("gpu", "gpu-one")],
        });
        variants.push(Variant {
            name: "4 claims/pod, 2 classes",
            release,
            init_pods: scaled(250),
            measured_pods: scaled(250),
            claims: &[
                ("a0", "numa0-one"),
                ("a1", "numa0-one"),
                ("b0", "numa1-one"),
                ("b1", "numa1-one"),
            ],
        });
    }
    if let Ok(only) = std::env::var("BENCH_RELEASE") {
        variants.retain(|v| v.release == only);
    }
    // The load generator and its watches are light: one thread spares the cores the wake-ups
    // of a second one.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Its blocking threads are kept alive for the whole run: an ended thread's CPU time would no
    // longer be counted.
    let controller_rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("controller")
        .thread_keep_alive(PHASE_TIMEOUT * 4)
        .enable_all()
        .build()?;
    let mut results = Vec::new();
    for variant in &variants {
        eprintln!(
            "scheduler_perf: running {} on {} ...",
            variant.name, variant.release
        );
        let measured = run(variant, workers, rate, kubelet, controller_rt.handle());
        results.push(runtime.block_on(measured)?);
    }
    report::print(&results, workers, rate, kubelet);
    Ok(())
}
