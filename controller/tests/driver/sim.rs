//! The ledger-backed driver with the framework's `Controller` against the simulated cluster over
//! real HTTP: the simulator's scheduler, resourceclaim controller, garbage collector and kubelet
//! do their part, the driver its own.

use testkit::eventually;

use crate::e2e_support::{count, Env, Running, CLASS, DRIVER, WAIT};
use dra_allocator::ledger::AllocationState;
use dra_controller::driver::DriftKind;
use dra_controller::params::{DeviceClaimParametersSpec, RequirementSpec};
use dra_sim::cluster::ClusterConfig;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::ResourceSlice;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};

/// The controller's workers in these tests.
const WORKERS: usize = 2;

/// A simulated cluster of `nodes` nodes with `devices` devices each, prepared for the driver,
/// and the driver with the controller running on it.
async fn start(nodes: usize, devices: usize) -> (Env, Running) {
    let env = Env::start_simulated(ClusterConfig {
        nodes,
        devices_per_node: devices,
        ..ClusterConfig::default()
    })
    .await;
    let running = Running::start(&env.client, &env.ledger_path(), WORKERS).await;
    (env, running)
}

/// Template `template` of the default class with claim parameters `params`, and pod `name` with
/// one claim, `gpu`, made from it.
async fn templated_pod(env: &Env, name: &str, template: &str, params: &str) {
    env.template(template, CLASS, params).await;
    env.pod(name, &[("gpu", template)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_is_bound_with_its_claim_allocated_and_deleting_it_deallocates() {
    let (setup, running) = start(3, 2).await;
    setup
        .params(
            "two",
            DeviceClaimParametersSpec {
                shareable: Some(true),
                ..count(2)
            },
        )
        .await;
    templated_pod(&setup, "job", "gpu-pair", "two").await;

    let claim_name = setup.claim_of_pod("job").await;
    let (claim, data) = setup.allocated(&claim_name).await;
    let pods = Api::<Pod>::default_namespaced(setup.client.clone());
    let node = eventually("pod bound", WAIT, || async {
        pods.get("job").await.ok()?.spec?.node_name
    })
    .await;
    assert_eq!(data.node, node, "the pod runs where its devices are");
    assert_eq!(data.devices.len(), 2);
    assert_eq!(data.claim_uid, claim.uid().unwrap());
    let allocation = claim.status.as_ref().unwrap().allocation.as_ref().unwrap();
    assert_eq!(allocation.shareable, Some(true));
    let term = &allocation
        .available_on_nodes
        .as_ref()
        .unwrap()
        .node_selector_terms[0];
    let field = &term.match_fields.as_ref().unwrap()[0];
    assert_eq!(
        (field.key.as_str(), field.operator.as_str()),
        ("metadata.name", "In")
    );
    assert_eq!(field.values.as_deref(), Some(&[node.clone()][..]));
    assert!(claim
        .finalizers()
        .contains(&format!("{DRIVER}/deletion-protection")));
    let held = running
        .driver
        .ledger()
        .allocation(&data.claim_uid)
        .unwrap()
        .unwrap();
    assert_eq!(
        (held.node, held.devices),
        (data.node.clone(), data.devices.clone())
    );
    // The intent is confirmed as soon as the status write returns, not only by the reconcile.
    eventually("intent confirmed after the status write", WAIT, || async {
        let held = running.driver.ledger().allocation(&data.claim_uid).unwrap();
        held.filter(|a| a.state == AllocationState::Confirmed)
    })
    .await;

    let report = running.driver.reconcile_now().await.unwrap();
    assert_eq!(report.total_drift(), 0, "{report:?}");
    let held = running
        .driver
        .ledger()
        .allocation(&data.claim_uid)
        .unwrap()
        .unwrap();
    assert_eq!(held.state, AllocationState::Confirmed);

    pods.delete("job", &DeleteParams::default()).await.unwrap();
    let claims = setup.claims();
    eventually("claim deleted after its pod", WAIT, || async {
        claims
            .get_opt(&claim_name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(running
        .driver
        .ledger()
        .allocation(&data.claim_uid)
        .unwrap()
        .is_none());
    running.stop().await;
    setup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_claim_is_allocated_and_a_vanished_device_becomes_missing() {
    let (setup, running) = start(2, 2).await;
    setup.params("one", count(1)).await;
    setup.immediate_claim("now", "one").await;
    let (_, data) = setup.allocated("now").await;
    let held = running
        .driver
        .ledger()
        .allocation(&data.claim_uid)
        .unwrap()
        .unwrap();
    assert_eq!(
        (held.node.as_str(), &held.devices),
        (data.node.as_str(), &data.devices)
    );

    let slices = Api::<ResourceSlice>::all(setup.client.clone());
    let slice = slices
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|s| s.node_name.as_deref() == Some(data.node.as_str()))
        .expect("slice of the node");
    slices
        .delete(&slice.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let ledger = running.driver.ledger().clone();
    let devices = eventually("devices of the node updated", WAIT, || async {
        let devices = ledger.node_devices(&data.node).ok()??;
        (devices.len() == 1).then_some(devices)
    })
    .await;
    assert_eq!(devices[0].name, data.devices[0]);
    assert!(
        devices[0].missing,
        "the allocated device stays, marked missing"
    );
    running.stop().await;
    setup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_whose_selector_matches_nothing_stays_pending_with_an_event_saying_why() {
    let (setup, running) = start(2, 2).await;
    let selector = vec![RequirementSpec {
        attribute: "model".into(),
        operator: "In".into(),
        values: vec!["H200".into()],
    }];
    setup
        .params(
            "h200",
            DeviceClaimParametersSpec {
                selector,
                ..count(1)
            },
        )
        .await;
    templated_pod(&setup, "picky", "h200", "h200").await;

    let note = eventually("event on the pod", WAIT, || {
        setup.event_note("picky", Some("NoSuitableNode"))
    })
    .await;
    for node in setup.cluster.as_ref().unwrap().node_names() {
        assert!(
            note.contains(&format!(
                "{node}: claim gpu: 0 of 1 devices free matching model In [H200]"
            )),
            "{note}"
        );
    }
    let pod = Api::<Pod>::default_namespaced(setup.client.clone())
        .get("picky")
        .await
        .unwrap();
    assert!(
        pod.spec.unwrap().node_name.is_none(),
        "the pod stays pending"
    );
    running.stop().await;
    setup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_the_ledger_deleted_rebuilds_it_from_the_cluster() {
    let (setup, running) = start(2, 4).await;
    setup.params("two", count(2)).await;
    templated_pod(&setup, "job", "pair", "two").await;
    setup.immediate_claim("now", "two").await;
    let pod_claim = setup.claim_of_pod("job").await;
    let (_, pod_data) = setup.allocated(&pod_claim).await;
    let (_, immediate_data) = setup.allocated("now").await;
    running.stop().await;

    std::fs::remove_file(setup.ledger_path()).expect("ledger deleted");
    let restarted = Running::start(&setup.client, &setup.ledger_path(), WORKERS).await;
    for data in [&pod_data, &immediate_data] {
        let held = restarted
            .driver
            .ledger()
            .allocation(&data.claim_uid)
            .unwrap()
            .expect("rebuilt");
        assert_eq!((&held.node, &held.devices), (&data.node, &data.devices));
        assert_eq!(held.state, AllocationState::Confirmed);
    }
    assert!(restarted.driver.ledger().verify().unwrap().is_consistent());
    let report = restarted.driver.reconcile_now().await.unwrap();
    assert_eq!(
        report.count(DriftKind::MissingInLedger),
        0,
        "already rebuilt at start"
    );
    assert_eq!(report.total_drift(), 0, "{report:?}");
    restarted.stop().await;
    setup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_claim_parameters_leave_the_claim_unallocated_with_an_event_naming_the_field() {
    let (setup, running) = start(1, 2).await;
    setup.params("zero", count(0)).await;
    templated_pod(&setup, "broken", "zero", "zero").await;
    let claim_name = setup.claim_of_pod("broken").await;
    let note = eventually("event on the claim", WAIT, || {
        setup.event_note(&claim_name, None)
    })
    .await;
    assert!(
        note.contains("spec.count: must be between 1 and 16, got 0"),
        "{note}"
    );
    let claim = setup.claims().get(&claim_name).await.unwrap();
    assert!(claim.status.and_then(|s| s.allocation).is_none());
    assert_eq!(
        running
            .driver
            .ledger()
            .utilisation()
            .unwrap()
            .claims_allocated,
        0
    );
    running.stop().await;
    setup.shutdown().await;
}
