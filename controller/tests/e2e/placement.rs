//! End to end over real HTTP: the ledger-backed driver and the framework's `Controller` against the
//! simulated cluster (scheduler, resourceclaim controller, garbage collector, kubelet), on nodes
//! whose device inventories differ. Pods use claim templates (delayed allocation); each test ends
//! with the cluster-wide consistency check of `e2e_support`.

use crate::e2e_support::{
    assert_consistent, count, node, req, shared, with_devices, Env, Running, CLASS, WAIT,
};
use dra_controller::params::DeviceClaimParametersSpec;
use kube::api::DeleteParams;
use kube::Api;
use testkit::eventually;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_with_two_claims_lands_on_the_only_node_where_both_fit_together() {
    // node-a fits the H100 pair or the extra device, not both; node-b has one H100 only;
    // node-c has two H100 and one A100: the only node for the whole pod.
    let env = Env::start(&[
        node("node-a", "H100", "80Gi", &[0, 0]),
        with_devices(
            node("node-b", "H100", "80Gi", &[0]),
            "A100",
            "40Gi",
            &[1, 1],
        ),
        with_devices(
            node("node-c", "H100", "80Gi", &[0, 0]),
            "A100",
            "40Gi",
            &[1],
        ),
    ])
    .await;
    let running = Running::start(&env.client, &env.ledger_path(), 2).await;
    env.params(
        "h100-pair",
        DeviceClaimParametersSpec {
            selector: vec![req("model", "In", &["H100"])],
            ..count(2)
        },
    )
    .await;
    env.params("any-one", count(1)).await;
    env.template("h100-pair", CLASS, "h100-pair").await;
    env.template("any-one", CLASS, "any-one").await;
    env.pod("trainer", &[("train", "h100-pair"), ("aux", "any-one")])
        .await;

    let bound = env.wait_bound(&names(&["trainer"])).await;
    assert_eq!(bound["trainer"], "node-c");
    let claims = eventually("both claims allocated", WAIT, || async {
        let claims = env.claims_of_pod("trainer").await;
        (claims.len() == 2).then_some(claims)
    })
    .await;
    let (train, aux) = (&claims["train"].data, &claims["aux"].data);
    assert_eq!(
        (train.node.as_str(), aux.node.as_str()),
        ("node-c", "node-c")
    );
    let mut train_devices = train.devices.clone();
    train_devices.sort();
    assert_eq!(train_devices, ["gpu-0", "gpu-1"], "the two H100");
    assert_eq!(
        aux.devices,
        ["gpu-2"],
        "the extra device is the A100, not an H100"
    );
    assert_consistent(&env, running.ledger()).await;
    running.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_place_each_pod_on_the_node_whose_inventory_matches() {
    let env = Env::start(&[
        node("big", "H100", "80Gi", &[0, 0, 1, 1]),
        node("mid", "A100", "40Gi", &[0, 0]),
        node("small", "L4", "24Gi", &[0, 0, 0]),
    ])
    .await;
    let running = Running::start(&env.client, &env.ledger_path(), 2).await;
    let specs = [
        ("h100-pair", vec![req("model", "In", &["H100"])], 2),
        (
            "roomy-not-h100",
            vec![
                req("memory", "Gt", &["30Gi"]),
                req("model", "NotIn", &["H100"]),
            ],
            2,
        ),
        ("small-three", vec![req("memory", "Lt", &["30Gi"])], 3),
    ];
    for (name, selector, n) in specs {
        env.params(
            name,
            DeviceClaimParametersSpec {
                selector,
                ..count(n)
            },
        )
        .await;
        env.template(name, CLASS, name).await;
    }
    env.pod("h100-a", &[("gpu", "h100-pair")]).await;
    env.pod("h100-b", &[("gpu", "h100-pair")]).await;
    env.pod("roomy", &[("gpu", "roomy-not-h100")]).await;
    env.pod("small", &[("gpu", "small-three")]).await;

    let bound = env
        .wait_bound(&names(&["h100-a", "h100-b", "roomy", "small"]))
        .await;
    assert_eq!(bound["h100-a"], "big");
    assert_eq!(bound["h100-b"], "big");
    assert_eq!(bound["roomy"], "mid");
    assert_eq!(bound["small"], "small");

    // Every H100 is taken now: a third pair waits and the event says why, node by node.
    env.pod("h100-c", &[("gpu", "h100-pair")]).await;
    let note = eventually("event on the waiting pod", WAIT, || {
        env.pod_event("h100-c", "NoSuitableNode")
    })
    .await;
    assert!(
        note.contains("big: claim gpu: 0 of 2 devices free matching model In [H100]"),
        "{note}"
    );
    assert_eq!(env.pods().await["h100-c"], None, "the pod stays pending");
    assert_consistent(&env, running.ledger()).await;
    running.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_attribute_claim_takes_two_devices_of_one_numa_group_and_never_splits() {
    // node-x: three devices on NUMA 0, three on NUMA 1; node-y: one on each, so no pair there.
    let env = Env::start(&[
        node("node-x", "H100", "80Gi", &[0, 0, 0, 1, 1, 1]),
        node("node-y", "A100", "40Gi", &[0, 1]),
    ])
    .await;
    let running = Running::start(&env.client, &env.ledger_path(), 2).await;
    env.params(
        "numa0-pair",
        DeviceClaimParametersSpec {
            selector: vec![req("numa", "In", &["0"])],
            ..count(2)
        },
    )
    .await;
    env.params(
        "same-numa-pair",
        DeviceClaimParametersSpec {
            same_attribute: Some("numa".into()),
            ..count(2)
        },
    )
    .await;
    env.params("loose-pair", count(2)).await;
    for name in ["numa0-pair", "same-numa-pair", "loose-pair"] {
        env.template(name, CLASS, name).await;
    }
    env.pod("first", &[("gpu", "numa0-pair")]).await;
    env.wait_bound(&names(&["first"])).await;

    // NUMA 0 of node-x has one device left, NUMA 1 three: the pair must come from NUMA 1.
    env.pod("pair", &[("gpu", "same-numa-pair")]).await;
    let bound = env.wait_bound(&names(&["pair"])).await;
    assert_eq!(bound["pair"], "node-x");
    let claims = env.claims_of_pod("pair").await;
    let mut devices = claims["gpu"].data.devices.clone();
    devices.sort();
    assert!(
        devices
            .iter()
            .all(|d| ["gpu-3", "gpu-4", "gpu-5"].contains(&d.as_str())),
        "both devices on NUMA 1: {devices:?}"
    );

    // One device free on each NUMA group of both nodes: a same-NUMA pair fits nowhere...
    env.pod("split", &[("gpu", "same-numa-pair")]).await;
    let note = eventually("event on the pod that cannot fit", WAIT, || {
        env.pod_event("split", "NoSuitableNode")
    })
    .await;
    assert!(note.contains("node-x"), "{note}");
    // ...while a pair without the constraint does.
    env.pod("loose", &[("gpu", "loose-pair")]).await;
    env.wait_bound(&names(&["loose"])).await;
    assert_eq!(
        env.pods().await["split"],
        None,
        "the same-NUMA pair stays pending"
    );
    assert!(env.claims_of_pod("split").await.is_empty());
    assert_consistent(&env, running.ledger()).await;
    running.stop().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_device_takes_at_most_max_consumers_claims_and_frees_a_place_on_release() {
    let env = Env::start(&[with_devices(
        node("node-s", "H100", "80Gi", &[0]),
        "A100",
        "40Gi",
        &[0],
    )])
    .await;
    let running = Running::start(&env.client, &env.ledger_path(), 2).await;
    env.params(
        "shared-h100",
        DeviceClaimParametersSpec {
            selector: vec![req("model", "In", &["H100"])],
            sharing: Some(shared(2)),
            ..count(1)
        },
    )
    .await;
    env.template("shared-h100", CLASS, "shared-h100").await;
    env.pod("s1", &[("gpu", "shared-h100")]).await;
    env.pod("s2", &[("gpu", "shared-h100")]).await;
    env.wait_bound(&names(&["s1", "s2"])).await;
    let (c1, c2) = (
        env.claims_of_pod("s1").await.remove("gpu").unwrap(),
        env.claims_of_pod("s2").await.remove("gpu").unwrap(),
    );
    assert_ne!(c1.uid, c2.uid);
    assert_eq!(c1.data.devices, ["gpu-0"]);
    assert_eq!(c2.data.devices, ["gpu-0"], "both claims share the one H100");

    env.pod("s3", &[("gpu", "shared-h100")]).await;
    eventually("event on the third pod", WAIT, || {
        env.pod_event("s3", "NoSuitableNode")
    })
    .await;
    assert_eq!(
        env.pods().await["s3"],
        None,
        "a third consumer does not fit"
    );
    assert_consistent(&env, running.ledger()).await;

    Api::<k8s_openapi::api::core::v1::Pod>::default_namespaced(env.client.clone())
        .delete("s1", &DeleteParams::default())
        .await
        .expect("pod deleted");
    env.wait_bound(&names(&["s3"])).await;
    let c3 = env.claims_of_pod("s3").await.remove("gpu").unwrap();
    assert_eq!(c3.data.devices, ["gpu-0"]);
    eventually("the first claim released", WAIT, || async {
        running
            .ledger()
            .allocation(&c1.uid)
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert_consistent(&env, running.ledger()).await;
    running.stop().await;
    env.shutdown().await;
}
