//! `dra-ledger run` on a simulated 1.34 cluster (`--dra-api v1`, and `auto` finding it): the
//! kube-scheduler allocates from the node agents' slices and the controller only mirrors, as
//! the admin API shows it: each node's inventory is its slice, an allocation appears under the
//! claim UID on the node and devices the scheduler picked and goes with the claim, `/readyz` is
//! 200 only once the first listing is in the ledger, cordon answers 409, an unallocatable claim
//! of our classes gets a `NotAllocated` event, `POST /v1/reconcile` counts and repairs drift
//! (in its report and in the metrics), and a standby mirrors nothing until it holds the lease.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use dra_allocator::ledger::{ClaimRef, ImportRequest};
use dra_allocator::model::Sharing;
use dra_api::AdminToken;
use dra_controller::leader::LeaderConfig;
use dra_controller::mirror::cordon::CORDON_UNAVAILABLE;
use dra_controller::mirror::EXPLANATION_REASON;
use dra_controller::process::{ProcessConfig, RunningController};
use dra_sim::server::faults::Faults;
use dra_types::api_mode::{ApiMode, DraApi};
use dra_types::resource_v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_support::{gpus, h100s, ClusterV1, Gpu};

pub(crate) const TOKEN: &str = "v1-mirror-token";

/// A claim spec with one request `gpu` for one device of `class`.
pub(crate) fn one_of(class: &str) -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}})
}

/// The overlay's class of `model` (`h100.gpu.dra-ledger.io`).
pub(crate) fn class_of(model: &str) -> String {
    format!("{model}.{DRIVER}")
}

/// A 1.34 cluster with agents serving `nodes` and the overlay's device classes.
async fn cluster(dir: &Path, nodes: &[Vec<Gpu>]) -> ClusterV1 {
    let v1 = ClusterV1::start(dir, nodes, Duration::from_secs(60)).await;
    v1.overlay_device_classes().await;
    v1
}

/// The settings of a controller on `dir`'s ledger (reconciling only when asked, within a test).
pub(crate) fn settings(dir: &Path, dra_api: DraApi) -> ProcessConfig {
    ProcessConfig {
        driver_name: DRIVER.into(),
        ledger: dir.join("ledger.redb"),
        workers: 1,
        listen: "127.0.0.1:0".parse().unwrap(),
        reconcile_interval: Duration::from_secs(600),
        recheck_delay: Duration::from_secs(1),
        grace_period: None,
        admin_token: AdminToken::new(TOKEN),
        leader: None,
        dra_api,
        explain_after: Some(Duration::from_millis(300)),
        history_retention: None,
        history_rollup_after: None,
        leader_url: dra_controller::leader::LeaderUrlTemplate::default(),
        replica: "test".to_owned(),
    }
}

/// Starts the controller of `config` against `v1`'s API server.
pub(crate) async fn start(v1: &ClusterV1, config: ProcessConfig) -> RunningController {
    let kube_config = kube::Config::new(v1.cluster.url().parse().unwrap());
    RunningController::start(config, kube_config).await.unwrap()
}

/// [`start`], then waits until it is ready.
pub(crate) async fn start_ready(v1: &ClusterV1, config: ProcessConfig) -> RunningController {
    let controller = start(v1, config).await;
    tokio::time::timeout(WAIT, controller.wait_ready())
        .await
        .expect("the controller becomes ready");
    controller
}

/// `method path` on the controller's admin API (with the token when `token`): the status and
/// the body as JSON (`null` when it is not JSON).
pub(crate) async fn call(
    controller: &RunningController,
    method: &'static str,
    path: &str,
    token: bool,
) -> (u16, Value) {
    let (status, body) = call_text(controller, method, path, token).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// [`call`] with the body as text.
pub(crate) async fn call_text(
    controller: &RunningController,
    method: &'static str,
    path: &str,
    token: bool,
) -> (u16, String) {
    let addr = controller.local_addr.to_string();
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(&addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let auth = if token {
            format!("Authorization: Bearer {TOKEN}\r\n")
        } else {
            String::new()
        };
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_owned())
    })
    .await
    .unwrap()
}

/// `GET path`, which must answer 200.
pub(crate) async fn get(controller: &RunningController, path: &str) -> Value {
    let (status, body) = call(controller, "GET", path, false).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// The ledger's allocation of claim `uid` (`null` when it has none, or never saw the claim).
async fn ledger_allocation(controller: &RunningController, uid: &str) -> Value {
    let (status, body) = call(controller, "GET", &format!("/v1/claims/{uid}"), false).await;
    match status {
        200 => body["allocation"].clone(),
        404 => Value::Null,
        _ => panic!("GET /v1/claims/{uid}: {status} {body}"),
    }
}

/// `node -> (total, allocated, missing)` of `GET /v1/nodes`.
pub(crate) async fn node_counts(
    controller: &RunningController,
) -> BTreeMap<String, (u64, u64, u64)> {
    let nodes = get(controller, "/v1/nodes").await;
    nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let counts = &node["devices"];
            let count = |key: &str| counts[key].as_u64().unwrap();
            (
                node["name"].as_str().unwrap().to_owned(),
                (count("total"), count("allocated"), count("missing")),
            )
        })
        .collect()
}

/// `POST /v1/reconcile` with the token, which must answer 200: the drift report.
pub(crate) async fn reconcile(controller: &RunningController) -> Value {
    let (status, report) = call(controller, "POST", "/v1/reconcile", true).await;
    assert_eq!(status, 200, "{report}");
    report
}

/// Waits until claim `name` is allocated; its UID and `(pool, device)` results.
async fn allocated(v1: &ClusterV1, name: &str) -> (String, Vec<(String, String)>) {
    eventually(&format!("claim {name} allocated"), WAIT, || async {
        let claim = v1.claims().get(name).await.unwrap();
        let allocation = claim.status.as_ref()?.allocation.as_ref()?;
        let results = allocation
            .devices
            .results
            .iter()
            .map(|r| (r.pool.clone(), r.device.clone()))
            .collect();
        Some((claim.metadata.uid.clone().unwrap(), results))
    })
    .await
}

/// The name of the claim the resourceclaim controller made for pod `pod`.
pub(crate) async fn claim_name_of(v1: &ClusterV1, pod: &str) -> String {
    let claim: ResourceClaim = v1.claim_of(pod).await;
    claim.metadata.name.unwrap()
}

/// The notes of the `events.k8s.io` events about `object` with `reason`.
pub(crate) async fn notes(v1: &ClusterV1, object: &str, reason: &str) -> Vec<String> {
    Api::<Event>::default_namespaced(v1.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

/// The slice of `node`.
fn slice_of<'a>(slices: &'a [ResourceSlice], node: &str) -> &'a ResourceSlice {
    slices
        .iter()
        .find(|s| s.spec.node_name.as_deref() == Some(node))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_the_slices_and_the_schedulers_allocation_until_the_pod_goes() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), &[h100s(2), gpus("A100", 0, 3)]).await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::Auto)).await;
    assert_eq!(
        controller.mode,
        ApiMode::V1,
        "auto finds resource.k8s.io/v1"
    );
    assert!(controller.driver.is_none() && controller.mirror.is_some());

    // Each node's inventory is the devices of its slice, with their attributes.
    let slices = v1.slices().await;
    for (node, model) in [("node-0", "H100"), ("node-1", "A100")] {
        let mut published: Vec<String> = slice_of(&slices, node)
            .spec
            .devices
            .iter()
            .map(|d| d.name.clone())
            .collect();
        published.sort();
        let devices = get(&controller, &format!("/v1/nodes/{node}/devices")).await;
        let items = devices["items"].as_array().unwrap();
        let mut held: Vec<String> = items
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect();
        held.sort();
        assert_eq!(held, published, "{node}");
        for device in items {
            assert_eq!(device["attributes"]["model"], model, "{device}");
            assert_eq!(device["state"], "free", "{device}");
        }
    }
    let counts = node_counts(&controller).await;
    assert_eq!(counts["node-0"], (2, 0, 0));
    assert_eq!(counts["node-1"], (3, 0, 0));

    // The scheduler allocates an A100 for the pod; the ledger records it under the claim UID.
    v1.template("a100", one_of(&class_of("a100"))).await;
    v1.pod_from_template("a", "a100").await;
    let name = claim_name_of(&v1, "a").await;
    let (uid, results) = allocated(&v1, &name).await;
    assert_eq!(results.len(), 1);
    let (pool, device) = &results[0];
    assert_eq!(pool, "node-1");
    let recorded = eventually("the allocation in the ledger", WAIT, || async {
        let allocation = ledger_allocation(&controller, &uid).await;
        (!allocation.is_null()).then_some(allocation)
    })
    .await;
    assert_eq!(recorded["uid"], uid.as_str());
    assert_eq!(recorded["name"], name.as_str());
    assert_eq!(recorded["namespace"], "default");
    assert_eq!(recorded["node"], "node-1");
    assert_eq!(recorded["devices"], json!([device]));
    assert_eq!(recorded["sharing"]["mode"], "exclusive", "{recorded}");
    assert_eq!(node_counts(&controller).await["node-1"], (3, 1, 0));

    // The pod goes, its claim with it: the ledger releases the devices.
    v1.pods()
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the allocation released in the ledger", WAIT, || async {
        ledger_allocation(&controller, &uid).await.is_null()
    })
    .await;
    // The resourceclaim controller clears the allocation before it deletes the claim (as
    // upstream's does), so the ledger may release it a moment before the claim is gone.
    eventually("the pod's claim deleted", WAIT, || async {
        v1.claims().get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert_eq!(node_counts(&controller).await["node-1"], (3, 0, 0));
    // The allocation and deallocation rates of the dashboards count the mirrored ones.
    let (status, metrics) = call_text(&controller, "GET", "/metrics", false).await;
    assert_eq!(status, 200);
    for series in [
        "dra_ledger_allocations_total{mode=\"mirrored\",outcome=\"allocated\"} 1",
        "dra_ledger_deallocations_total{outcome=\"released\"} 1",
        "dra_ledger_allocate_duration_seconds_count 0",
    ] {
        assert!(metrics.contains(series), "{series} missing from\n{metrics}");
    }
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_only_once_the_first_listing_is_mirrored_and_cordon_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), &[h100s(2)]).await;
    v1.template("h100", one_of(&class_of("h100"))).await;
    v1.pod_from_template("a", "h100").await;
    let name = claim_name_of(&v1, "a").await;
    let (uid, results) = allocated(&v1, &name).await;

    // Every list fails for a while: the controller cannot list the claims and slices.
    let server = v1.cluster.server();
    server.set_faults(Faults::none().read_errors(1.0));
    let controller = start(&v1, settings(dir.path(), DraApi::V1)).await;
    for _ in 0..10 {
        let (status, body) = call(&controller, "GET", "/readyz", false).await;
        assert_eq!(status, 503, "{body}");
        assert!(body.to_string().contains("caches synced"), "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(node_counts(&controller).await.is_empty());
    server.set_faults(Faults::none());

    // At the first 200 the inventory and the allocation are in the ledger already.
    eventually("/readyz ready", WAIT, || async {
        call(&controller, "GET", "/readyz", false).await.0 == 200
    })
    .await;
    assert_eq!(get(&controller, "/readyz").await["status"], "ready");
    assert_eq!(node_counts(&controller).await["node-0"], (2, 1, 0));
    let recorded = ledger_allocation(&controller, &uid).await;
    assert_eq!(recorded["devices"], json!([results[0].1]), "{recorded}");

    // A 1.34 cluster serves no DeviceTaintRule: cordon and uncordon are refused with 409 and
    // what to enable (the token still checked first).
    let cordon = "/v1/nodes/node-0/devices/gpu-1/cordon";
    assert_eq!(call(&controller, "POST", cordon, false).await.0, 401);
    for path in [cordon, "/v1/nodes/node-0/devices/gpu-1/uncordon"] {
        let (status, body) = call(&controller, "POST", path, true).await;
        assert_eq!(status, 409, "{path}: {body}");
        assert_eq!(body["error"]["message"], CORDON_UNAVAILABLE, "{path}");
    }
    let devices = get(&controller, "/v1/nodes/node-0/devices").await;
    assert!(
        devices["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["cordoned"] == false),
        "{devices}"
    );
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_our_class_that_stays_unallocated_gets_one_not_allocated_event() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), &[h100s(2)]).await;
    v1.device_class("nic", "device.driver == 'nic.example.com'")
        .await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;

    // No node has an L40S; nothing ever allocates a claim without a pod, either.
    v1.claim("l40s", one_of(&class_of("l40s"))).await;
    v1.claim("nic", one_of("nic")).await;
    let events = eventually("a NotAllocated event about claim l40s", WAIT, || async {
        let events = notes(&v1, "l40s", EXPLANATION_REASON).await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let note = &events[0];
    assert!(
        note.starts_with(&format!(
            "2 of 2 devices of {DRIVER} are free in the ledger"
        )),
        "{note}"
    );
    assert!(note.contains(&class_of("l40s")), "{note}");
    // The same text is not posted again, and a claim of another driver's class gets none.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(notes(&v1, "l40s", EXPLANATION_REASON).await.len(), 1);
    assert!(notes(&v1, "nic", EXPLANATION_REASON).await.is_empty());
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_counts_and_repairs_what_changed_behind_the_mirrors_back() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), &[h100s(2), h100s(2)]).await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;
    v1.template("h100", one_of(&class_of("h100"))).await;
    v1.pod_from_template("a", "h100").await;
    let name = claim_name_of(&v1, "a").await;
    let (uid, results) = allocated(&v1, &name).await;
    let (node, device) = results[0].clone();
    eventually("the allocation in the ledger", WAIT, || async {
        !ledger_allocation(&controller, &uid).await.is_null()
    })
    .await;
    // The last write to the claim is the node agent's device status once it is prepared: from
    // then on no change of the claim makes the mirror look at it again before the reconcile.
    eventually("the claim's device status", WAIT, || async {
        !v1.device_status(&name).await.is_empty()
    })
    .await;
    assert_eq!(reconcile(&controller).await["drift"], zero_drift());

    // Behind the mirror's back: the claim's allocation released, an orphan recorded.
    let ledger = controller.ledger().clone();
    let other = if node == "node-0" { "node-1" } else { "node-0" };
    let orphan = ImportRequest {
        claim: ClaimRef::new("orphan-uid", "default", "orphan"),
        pod_uid: None,
        node: other.to_owned(),
        devices: vec!["gpu-0".to_owned()],
        sharing: Sharing::Exclusive,
        share_permille: BTreeMap::new(),
    };
    let key = uid.clone();
    tokio::task::spawn_blocking(move || {
        ledger.release(&key).unwrap().unwrap();
        ledger.import(orphan).unwrap();
    })
    .await
    .unwrap();
    assert!(ledger_allocation(&controller, &uid).await.is_null());

    let report = reconcile(&controller).await;
    let mut drift = zero_drift();
    drift["missing_in_ledger"] = json!(1);
    drift["orphan_in_ledger"] = json!(1);
    assert_eq!(report["drift"], drift, "{report}");
    assert_eq!(
        (report["imported"].as_u64(), report["released"].as_u64()),
        (Some(1), Some(1))
    );
    let recorded = ledger_allocation(&controller, &uid).await;
    assert_eq!(recorded["node"], node.as_str(), "{recorded}");
    assert_eq!(recorded["devices"], json!([device]));
    assert!(ledger_allocation(&controller, "orphan-uid").await.is_null());
    assert_eq!(reconcile(&controller).await["drift"], zero_drift());

    // The slice of the claim's node disappears: its allocated device is missing, and counted.
    let slices = Api::<ResourceSlice>::all(v1.client.clone());
    let slice = slice_of(&v1.slices().await, &node)
        .metadata
        .name
        .clone()
        .unwrap();
    slices
        .delete(&slice, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the allocated device missing in the ledger",
        WAIT,
        || async { node_counts(&controller).await.get(&node) == Some(&(1, 1, 1)) },
    )
    .await;
    let report = reconcile(&controller).await;
    let mut drift = zero_drift();
    drift["unpublished_device"] = json!(1);
    assert_eq!(report["drift"], drift, "{report}");
    assert!(!ledger_allocation(&controller, &uid).await.is_null());

    // The metrics count what the reconciles found, and the ledger's gauges show the mirror.
    let (status, metrics) = call_text(&controller, "GET", "/metrics", false).await;
    assert_eq!(status, 200);
    for series in [
        "dra_ledger_reconcile_drift_total{kind=\"missing_in_ledger\"} 1",
        "dra_ledger_reconcile_drift_total{kind=\"orphan_in_ledger\"} 1",
        "dra_ledger_reconcile_drift_total{kind=\"unpublished_device\"} 1",
        "dra_ledger_claims_allocated 1",
    ] {
        assert!(metrics.contains(series), "{series} missing from\n{metrics}");
    }
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

/// The drift of a report without any: every kind 0.
fn zero_drift() -> Value {
    json!({
        "missing_in_ledger": 0, "orphan_in_ledger": 0, "device_mismatch": 0, "stale_intent": 0,
        "bad_handle_data": 0, "device_conflict": 0, "unpublished_device": 0,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_mirrors_nothing_until_it_holds_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path(), &[h100s(2)]).await;
    // Another replica holds the lease and stops renewing it: it expires 2 s after it is seen.
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(chrono::Utc::now());
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": DRIVER},
        "spec": {"holderIdentity": "other-replica", "leaseDurationSeconds": 2,
                 "acquireTime": now, "renewTime": now},
    }))
    .unwrap();
    let leases = Api::<Lease>::default_namespaced(v1.client.clone());
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let leader = LeaderConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(1),
        retry_period: Duration::from_millis(200),
        ..LeaderConfig::new(DRIVER, "default", "mirror-0")
    };
    let config = ProcessConfig {
        leader: Some(leader),
        ..settings(dir.path(), DraApi::V1)
    };
    let controller = start(&v1, config).await;

    eventually("/readyz standby", WAIT, || async {
        call(&controller, "GET", "/readyz", false).await.1["status"] == "standby"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(&controller, "/readyz").await["status"], "standby");
    assert!(
        controller.ledger().nodes().unwrap().is_empty(),
        "a standby wrote"
    );
    // Its admin API does not show its own (empty) ledger: the leader's answers, and that one
    // is not reachable here.
    let (status, body) = call(&controller, "GET", "/v1/nodes", false).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "leader_unreachable", "{body}");

    eventually("/readyz ready as the leader", WAIT, || async {
        call(&controller, "GET", "/readyz", false).await.1["status"] == "ready"
    })
    .await;
    assert_eq!(node_counts(&controller).await["node-0"], (2, 0, 0));
    let held = leases.get(DRIVER).await.unwrap();
    let holder = held.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("mirror-0"));
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}
