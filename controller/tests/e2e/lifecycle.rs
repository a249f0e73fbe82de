//! End to end over real HTTP against the simulated cluster: a controller stopped while pods are
//! pending and started again on the same ledger converges without double allocation, and the
//! number of workers changes nothing about the final state of a workload.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::e2e_support::{
    assert_consistent, count, node, usage_per_node, Env, NodeInventory, Running, CLASS, WAIT,
};
use dra_controller::params::DeviceClaimParametersSpec;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::Api;
use testkit::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_restarted_while_pods_are_pending_converges_on_the_same_ledger() {
    let nodes: Vec<_> = (0..4)
        .map(|i| node(&format!("node-{i}"), "H100", "80Gi", &[0, 0, 1, 1]))
        .collect();
    let env = Env::start(&nodes).await;
    env.params("pair", count(2)).await;
    env.params("one", count(1)).await;
    env.template("pair", CLASS, "pair").await;
    env.template("one", CLASS, "one").await;

    let first = Running::start(&env.client, &env.ledger_path(), 4).await;
    let wave_a: Vec<String> = (0..4).map(|i| format!("a-{i}")).collect();
    for pod in &wave_a {
        env.pod(pod, &[("gpu", "pair")]).await;
    }
    env.wait_bound(&wave_a).await;
    // Wave B is in flight when the controller stops: some of it may be allocated, some not.
    let wave_b: Vec<String> = (0..3).map(|i| format!("b-{i}")).collect();
    for pod in &wave_b {
        env.pod(pod, &[("gpu", "pair")]).await;
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    first.stop().await;

    // While no controller runs: a pod goes away (its claim waits on our finalizer) and more come.
    let gone = env
        .claims_of_pod("a-0")
        .await
        .remove("gpu")
        .expect("claim of a-0");
    Api::<Pod>::default_namespaced(env.client.clone())
        .delete("a-0", &DeleteParams::default())
        .await
        .expect("pod deleted");
    env.pod("c-0", &[("gpu", "pair")]).await;
    env.pod("c-1", &[("x", "one"), ("y", "one")]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pending = env.pods().await.values().filter(|n| n.is_none()).count();
    assert!(pending >= 2, "pods wait while the controller is down");

    let second = Running::start(&env.client, &env.ledger_path(), 4).await;
    let mut all: Vec<String> = wave_a[1..].to_vec();
    all.extend(wave_b.iter().cloned());
    all.extend(["c-0".to_owned(), "c-1".to_owned()]);
    env.wait_bound(&all).await;
    eventually("the deleted pod's claim released", WAIT, || async {
        second
            .ledger()
            .allocation(&gone.uid)
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let claims = env.allocated_claims().await;
    assert_eq!(
        claims.len(),
        3 + 3 + 1 + 2,
        "one claim per pod claim, none left over"
    );
    let usage = usage_per_node(&claims);
    assert_eq!(
        usage.values().sum::<usize>(),
        16,
        "every device in use: {usage:?}"
    );
    let report = second.driver.reconcile_now().await.expect("reconcile runs");
    assert_eq!(report.total_drift(), 0, "nothing to repair: {report:?}");
    assert!(
        second.ledger().pending_intents().unwrap().is_empty(),
        "every intent confirmed by the reconcile"
    );
    assert_consistent(&env, second.ledger()).await;
    second.stop().await;
    env.shutdown().await;
}

/// Two nodes with two NUMA groups of four devices and four nodes with two groups of two.
fn mixed_nodes() -> Vec<NodeInventory> {
    let mut nodes: Vec<_> = (0..2)
        .map(|i| {
            node(
                &format!("big-{i}"),
                "H100",
                "80Gi",
                &[0, 0, 0, 0, 1, 1, 1, 1],
            )
        })
        .collect();
    nodes.extend((0..4).map(|i| node(&format!("small-{i}"), "A100", "40Gi", &[0, 0, 1, 1])));
    nodes
}

/// What must not depend on the number of workers: each pod claim's node kind and device count,
/// and the devices in use per node.
#[derive(Debug, PartialEq, Eq)]
struct FinalState {
    claims: BTreeMap<(String, String), (String, usize)>,
    usage: BTreeMap<String, usize>,
}

/// Runs the same workload with `workers` workers: first four same-NUMA quads (which only the big
/// nodes can hold), then eight pods of two devices (two pod claims of one, or one of two).
async fn run_workload(workers: usize) -> FinalState {
    let env = Env::start(&mixed_nodes()).await;
    let running = Running::start(&env.client, &env.ledger_path(), workers).await;
    env.params(
        "numa-quad",
        DeviceClaimParametersSpec {
            same_attribute: Some("numa".into()),
            ..count(4)
        },
    )
    .await;
    env.params("pair", count(2)).await;
    env.params("one", count(1)).await;
    for name in ["numa-quad", "pair", "one"] {
        env.template(name, CLASS, name).await;
    }
    let quads: Vec<String> = (0..4).map(|i| format!("quad-{i}")).collect();
    for pod in &quads {
        env.pod(pod, &[("gpu", "numa-quad")]).await;
    }
    env.wait_bound(&quads).await;
    let mut small: Vec<String> = Vec::new();
    for i in 0..4 {
        let (pair, split) = (format!("pair-{i}"), format!("split-{i}"));
        env.pod(&pair, &[("gpu", "pair")]).await;
        env.pod(&split, &[("x", "one"), ("y", "one")]).await;
        small.extend([pair, split]);
    }
    let bound = env.wait_bound(&small).await;
    for (pod, node) in &bound {
        assert!(node.starts_with("small-"), "{pod} on {node}");
    }
    assert_consistent(&env, running.ledger()).await;
    let claims = env.allocated_claims().await;
    let usage = usage_per_node(&claims);
    let state = FinalState {
        claims: claims
            .iter()
            .map(|c| {
                let kind = c.data.node.split('-').next().unwrap_or_default().to_owned();
                let key = (c.pod.clone().unwrap_or_default(), c.pod_claim.clone());
                (key, (kind, c.data.devices.len()))
            })
            .collect(),
        usage,
    };
    running.stop().await;
    env.shutdown().await;
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_and_sixteen_workers_reach_the_same_final_state() {
    let two = run_workload(2).await;
    let sixteen = run_workload(16).await;
    assert_eq!(two.claims.len(), 4 + 4 + 8, "every pod claim allocated");
    assert!(
        two.usage.values().all(|used| *used == 4 || *used == 8) && two.usage.len() == 6,
        "every device in use: {:?}",
        two.usage
    );
    assert_eq!(two, sixteen);
}
