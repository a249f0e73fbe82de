//! The run of the demo once the controller is up: wait until it is ready (and the node agents
//! published every node's devices), submit the workload and print progress until it ends, then
//! wind down, verify the ledger and print the summary with the exit code.
//!
//! Drives what `super` started; must not start or stop the cluster or the controller.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use dra_controller::process::RunningController;
use dra_node::local::LocalAgents;
use dra_sim::cluster::ClusterHandle;

use super::progress::{self, CdiTracker, Snapshot};
use super::workload::{Submitter, WorkloadShape};
use super::{setup, stall, v1, watch_for_signal, DemoArgs};

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Done,
    TimeLimit,
    Interrupted,
    Stalled,
}

/// The demo gives up when no pod was submitted, started or finished for this long.
const STALL_LIMIT: Duration = Duration::from_secs(120);

/// How many CDI specs written and removed are printed as lines of their own.
const SPEC_LINES: usize = 2;

/// One demo run once the controller is up: what `drive` and `finish` share.
struct Run<'a> {
    controller: &'a RunningController,
    agents: Option<&'a LocalAgents>,
    store: dra_sim::server::StoreReader,
    shape: WorkloadShape,
    started: Instant,
    cdi: CdiTracker,
}

impl Run<'_> {
    async fn observe(&mut self, submitter: &Submitter) -> anyhow::Result<Snapshot> {
        let mut snapshot = Snapshot {
            elapsed: self.started.elapsed(),
            to_submit: self.shape.pods - submitter.submitted(),
            claims_allocated_total: self.controller.observer.claims_allocated(),
            ..Snapshot::default()
        };
        progress::count_pods(&self.store, &mut snapshot)?;
        progress::count_ledger(self.controller.ledger(), &mut snapshot).await?;
        // The ledger shows an allocation once it is durable, a moment before the driver's call
        // returns and is counted; the total is never less than what is allocated now.
        snapshot.claims_allocated_total = snapshot
            .claims_allocated_total
            .max(snapshot.claims_allocated);
        if let Some(agents) = self.agents {
            self.follow_specs(agents);
            snapshot.cdi = Some(self.cdi.counts());
        }
        Ok(snapshot)
    }

    /// Notes the CDI specs written and removed since the last look; the first few are printed.
    fn follow_specs(&mut self, agents: &LocalAgents) {
        let before = self.cdi.counts();
        let (written, removed) = self.cdi.update(agents.cdi_specs());
        let print = |what: &str, done: usize, specs: &[(String, String)]| {
            for (node, uid) in specs.iter().take(SPEC_LINES.saturating_sub(done)) {
                let file = agents.cdi_file(node, uid).unwrap_or_default();
                println!("  CDI spec {what} on {node}: {}", file.display());
            }
        };
        print("written", before.written, &written);
        print("removed", before.removed, &removed);
    }
}

/// Waits (at most 60 s each) until the controller is ready and, with node `agents`, until
/// every node's devices are published; says when each was done after `started`.
async fn wait_until_ready(
    args: &DemoArgs,
    controller: &RunningController,
    agents: bool,
    client: &kube::Client,
    started: Instant,
) -> anyhow::Result<()> {
    tokio::time::timeout(Duration::from_secs(60), controller.wait_ready())
        .await
        .context("the controller did not become ready within 60s")?;
    println!(
        "  controller ready after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    if agents {
        let published = async {
            if args.kubernetes_version.serves_v1() {
                v1::wait_for_slices(client, args.nodes).await
            } else {
                setup::wait_for_slices(client, args.nodes).await
            }
        };
        tokio::time::timeout(Duration::from_secs(60), published)
            .await
            .context("the node agents did not publish every node's devices within 60s")??;
        println!(
            "  node agents registered, devices published after {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

pub(super) async fn drive(
    args: &DemoArgs,
    cluster: &ClusterHandle,
    controller: &RunningController,
    agents: Option<&LocalAgents>,
    shape: WorkloadShape,
) -> anyhow::Result<ExitCode> {
    let stop = watch_for_signal().context("cannot watch for SIGTERM and Ctrl-C")?;
    let client = cluster.kube_client();
    let started = Instant::now();
    wait_until_ready(args, controller, agents.is_some(), &client, started).await?;
    setup::create_immediate_claims(&client, shape.immediate_claims).await?;

    let mut run = Run {
        controller,
        agents,
        store: cluster.server().store(),
        shape,
        started,
        cdi: CdiTracker::default(),
    };
    let mut submitter = Submitter::new(&client, shape, args.kubernetes_version.serves_v1());
    let limit = args.nodes * args.devices_per_node;
    let deadline = args.duration.map(|limit| started + limit);
    let mut signal = std::pin::pin!(stop);
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut last_print = Instant::now();
    let mut peak = 0.0_f64;
    let mut snapshot = Snapshot::default();
    let mut printed = false;
    let mut marker = (0, 0, 0);
    let mut last_change = Instant::now();
    let end = loop {
        tokio::select! {
            () = &mut signal => break End::Interrupted,
            _ = ticker.tick() => {}
        }
        snapshot = run.observe(&submitter).await?;
        peak = peak.max(snapshot.utilisation());
        printed = last_print.elapsed() >= Duration::from_secs(1);
        if printed {
            println!("{}", snapshot.line());
            last_print = Instant::now();
        }
        if let Some(node) = agents.and_then(LocalAgents::stopped_node) {
            anyhow::bail!("the node agent of {node} stopped (RUST_LOG=error shows why)");
        }
        if shape.pods > 0 && submitter.is_done() && snapshot.unfinished() == 0 {
            break End::Done;
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break End::TimeLimit;
        }
        let now = (
            submitter.submitted(),
            snapshot.running,
            snapshot.succeeded + snapshot.failed,
        );
        if now != marker {
            marker = now;
            last_change = Instant::now();
        } else if shape.pods > 0 && last_change.elapsed() >= STALL_LIMIT {
            break End::Stalled;
        }
        submitter.submit(snapshot.unfinished(), limit, 25).await?;
    };
    if !printed {
        println!("{}", snapshot.line());
    }
    finish(&mut run, &client, &submitter, end, peak).await
}

async fn finish(
    run: &mut Run<'_>,
    client: &kube::Client,
    submitter: &Submitter,
    end: End,
    peak: f64,
) -> anyhow::Result<ExitCode> {
    let mut snapshot = run.observe(submitter).await?;
    let how = match end {
        End::Done => "workload done",
        End::TimeLimit => "time limit reached",
        End::Interrupted => "interrupted",
        End::Stalled => {
            "stalled (no pod submitted, started or finished for 120s; RUST_LOG=warn shows why)"
        }
    };
    println!(
        "{how} after {:.1}s: {} pods succeeded, {} failed, {} running, {} pending; {} claims allocated in total; peak device utilisation {peak:.1}%",
        snapshot.elapsed.as_secs_f64(),
        snapshot.succeeded,
        snapshot.failed,
        snapshot.running,
        snapshot.pending,
        snapshot.claims_allocated_total,
    );
    if end == End::Stalled {
        for line in stall::describe_waiting_pods(&run.store) {
            println!("{line}");
        }
    }
    if end == End::Done {
        snapshot = wind_down(run, client, submitter, snapshot).await?;
    }
    if let Some(cdi) = snapshot.cdi {
        println!(
            "node agents: {} CDI specs written, {} removed, {} left on the nodes",
            cdi.written, cdi.removed, cdi.present
        );
    }
    let ledger = run.controller.ledger().clone();
    let report = tokio::task::spawn_blocking(move || ledger.verify()).await??;
    if end == End::Stalled {
        return Ok(ExitCode::FAILURE);
    }
    Ok(verdict(&report))
}

/// After a finished workload: deletes the immediate claims and waits (at most 30 s) until no
/// claim is allocated and no CDI spec is left, then says how many claims stay allocated; the
/// last snapshot.
async fn wind_down(
    run: &mut Run<'_>,
    client: &kube::Client,
    submitter: &Submitter,
    mut snapshot: Snapshot,
) -> anyhow::Result<Snapshot> {
    setup::delete_immediate_claims(client, run.shape.immediate_claims).await?;
    let wait_until = Instant::now() + Duration::from_secs(30);
    let prepared = |s: &Snapshot| s.cdi.map_or(0, |c| c.present);
    while (snapshot.claims_allocated > 0 || prepared(&snapshot) > 0) && Instant::now() < wait_until
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
        snapshot = run.observe(submitter).await?;
    }
    let what = if run.shape.immediate_claims > 0 {
        "immediate claims deleted"
    } else {
        "pods done"
    };
    println!(
        "{what}: {} claims left allocated in the ledger",
        snapshot.claims_allocated
    );
    Ok(snapshot)
}

/// The exit code of the ledger's verification, with what it found printed.
fn verdict(report: &dra_allocator::ledger::VerifyReport) -> ExitCode {
    if report.is_consistent() {
        println!(
            "ledger verified: consistent ({} devices, {} allocations, {} journal entries)",
            report.devices, report.allocations, report.intents
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "ledger verification found {} problem(s):",
            report.problems.len()
        );
        for problem in &report.problems {
            println!("  - {problem}");
        }
        ExitCode::FAILURE
    }
}
