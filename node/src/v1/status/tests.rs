use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_allocator::model::AttributeValue;
use dra_runtime::workqueue::RateLimit;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::{TimeZone, Utc};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::*;
use crate::device::NodeDevice;
use crate::prepare::ClaimRequest;

const DRIVER: &str = "gpu.example.com";
const NODE: &str = "node-0";
const UID: &str = "uid-1";

fn pool() -> OurPool {
    OurPool {
        driver: DRIVER.into(),
        node: NODE.into(),
    }
}

fn at(second: u32) -> Time {
    Time(Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, second).unwrap())
}

fn inventory() -> Inventory {
    let gpu = |name: &str, attributes: &[(&str, &str)]| NodeDevice {
        name: name.into(),
        attributes: attributes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), AttributeValue::String((*v).to_owned())))
            .chain([("model".to_owned(), AttributeValue::String("H100".into()))])
            .collect(),
        ..NodeDevice::default()
    };
    [
        gpu(
            "gpu-0",
            &[("uuid", "GPU-0f"), ("pciAddress", "0000:3b:00.0")],
        ),
        gpu("gpu-1", &[("pciAddress", "0000:5e:00.0")]),
        gpu("gpu-2", &[]),
    ]
    .into_iter()
    .map(|d| (d.name.clone(), d))
    .collect()
}

/// A claim allocated `gpu-0` and `gpu-1` of our pool, `eth1` of another driver and `gpu-7` of
/// our driver on another node, with `devices` as its status entries.
#[allow(clippy::needless_pass_by_value)] // takes the `json!` value it embeds
fn claim(devices: Value) -> Value {
    let result = |driver: &str, pool: &str, device: &str| json!({"request": "r", "driver": driver, "pool": pool, "device": device});
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": UID, "resourceVersion": "7",
            "generation": 1},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}]}},
        "status": {
            "allocation": {"devices": {"results": [
                result(DRIVER, NODE, "gpu-0"), result(DRIVER, NODE, "gpu-1"),
                result("nic.example.com", NODE, "eth1"), result(DRIVER, "node-1", "gpu-7"),
            ]}, "futureField": {"kept": true}},
            "devices": devices,
        },
    })
}

fn other_entries() -> Value {
    json!([
        {"driver": "nic.example.com", "pool": NODE, "device": "eth1",
            "networkData": {"interfaceName": "net1"}, "shareID": "a-field-we-do-not-model"},
        {"driver": DRIVER, "pool": "node-1", "device": "gpu-7", "data": {"theirs": 1}},
    ])
}

fn ready(devices: &[&str]) -> Wanted {
    Wanted::Ready {
        devices: devices.iter().map(|d| (*d).to_owned()).collect(),
        cdi_ids: vec![format!("{DRIVER}/claim={UID}")],
    }
}

fn written(plan: Plan) -> Value {
    match plan {
        Plan::Write(claim) => claim,
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn a_prepared_claim_says_its_devices_are_ready_with_their_data_and_keeps_other_entries() {
    let read = claim(other_entries());
    let claim = written(plan(
        Some(&read),
        UID,
        &ready(&["gpu-0", "gpu-1"]),
        &pool(),
        &inventory(),
        &at(5),
    ));
    let condition = json!({"type": "Ready", "status": "True", "reason": "Prepared",
        "message": format!("prepared on node {NODE} as CDI device {DRIVER}/claim={UID}"),
        "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 1});
    let mut expected = read.clone();
    expected["status"]["devices"] = json!([
        other_entries()[0], other_entries()[1],
        {"driver": DRIVER, "pool": NODE, "device": "gpu-0", "conditions": [condition],
            "data": {"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
                "uuid": "GPU-0f", "pciAddress": "0000:3b:00.0"}},
        {"driver": DRIVER, "pool": NODE, "device": "gpu-1", "conditions": [condition],
            "data": {"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
                "pciAddress": "0000:5e:00.0"}},
    ]);
    // everything else, fields our model lacks included, goes back as read
    assert_eq!(claim, expected);
}

#[test]
fn each_share_of_a_device_gets_its_own_entry_with_its_share_id() {
    let mut read = claim(json!([]));
    let share = |id: &str| {
        json!({"request": "r", "driver": DRIVER, "pool": NODE,
        "device": "gpu-2", "shareID": id, "consumedCapacity": {"memory": "40Gi"}})
    };
    read["status"]["allocation"]["devices"]["results"] = json!([share("s-1"), share("s-2")]);
    let claim = written(plan(
        Some(&read),
        UID,
        &ready(&["gpu-2"]),
        &pool(),
        &inventory(),
        &at(5),
    ));
    let entries = claim["status"]["devices"].as_array().unwrap();
    let keys: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["device"].as_str().unwrap(),
                e["shareID"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(keys, [("gpu-2", "s-1"), ("gpu-2", "s-2")]);
    assert_eq!(
        plan(
            Some(&claim),
            UID,
            &ready(&["gpu-2"]),
            &pool(),
            &inventory(),
            &at(9)
        ),
        Plan::Unchanged
    );
}

#[test]
fn a_claim_already_saying_so_is_left_unchanged_and_keeps_its_transition_time() {
    let first = written(plan(
        Some(&claim(other_entries())),
        UID,
        &ready(&["gpu-0"]),
        &pool(),
        &inventory(),
        &at(5),
    ));
    let later = plan(
        Some(&first),
        UID,
        &ready(&["gpu-0"]),
        &pool(),
        &inventory(),
        &at(59),
    );
    assert_eq!(later, Plan::Unchanged);

    // a device that joins is Ready from now; the one that was stays Ready since before
    let both = written(plan(
        Some(&first),
        UID,
        &ready(&["gpu-0", "gpu-1"]),
        &pool(),
        &inventory(),
        &at(59),
    ));
    let since: Vec<&Value> = both["status"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["pool"] == NODE && d["driver"] == DRIVER)
        .map(|d| &d["conditions"][0]["lastTransitionTime"])
        .collect();
    assert_eq!(since, ["2026-01-02T03:04:05Z", "2026-01-02T03:04:59Z"]);
}

#[test]
fn an_unprepared_claim_loses_only_our_entries() {
    let prepared = written(plan(
        Some(&claim(other_entries())),
        UID,
        &ready(&["gpu-0", "gpu-1"]),
        &pool(),
        &inventory(),
        &at(5),
    ));
    let cleared = written(plan(
        Some(&prepared),
        UID,
        &Wanted::Cleared,
        &pool(),
        &inventory(),
        &at(6),
    ));
    assert_eq!(cleared["status"]["devices"], other_entries());
    assert_eq!(
        plan(
            Some(&cleared),
            UID,
            &Wanted::Cleared,
            &pool(),
            &inventory(),
            &at(7)
        ),
        Plan::Unchanged
    );

    // the last entry gone, the field goes too
    let alone = written(plan(
        Some(&claim(json!([]))),
        UID,
        &ready(&["gpu-2", "gpu-0"]),
        &pool(),
        &inventory(),
        &at(5),
    ));
    let empty = written(plan(
        Some(&alone),
        UID,
        &Wanted::Cleared,
        &pool(),
        &inventory(),
        &at(6),
    ));
    assert!(
        empty["status"].get("devices").is_none(),
        "{}",
        empty["status"]
    );
}

#[test]
fn devices_the_allocation_does_not_hold_here_get_no_entry() {
    // gpu-2 is not allocated to the claim and gpu-7 is in another node's pool
    let prepared = written(plan(
        Some(&claim(json!([]))),
        UID,
        &ready(&["gpu-2", "gpu-7", "gpu-1"]),
        &pool(),
        &inventory(),
        &at(5),
    ));
    let devices: Vec<&str> = prepared["status"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    assert_eq!(devices, ["gpu-1"]);

    let mut unallocated = claim(json!([]));
    unallocated["status"]
        .as_object_mut()
        .unwrap()
        .remove("allocation");
    assert_eq!(
        plan(
            Some(&unallocated),
            UID,
            &ready(&["gpu-0"]),
            &pool(),
            &inventory(),
            &at(5)
        ),
        Plan::Unchanged
    );
}

#[test]
fn a_claim_gone_or_replaced_is_left_alone() {
    let wanted = ready(&["gpu-0"]);
    assert_eq!(
        plan(None, UID, &wanted, &pool(), &inventory(), &at(5)),
        Plan::Gone
    );
    let mut replaced = claim(json!([]));
    replaced["metadata"]["uid"] = json!("uid-2");
    assert_eq!(
        plan(Some(&replaced), UID, &wanted, &pool(), &inventory(), &at(5)),
        Plan::Gone
    );
}

#[test]
fn a_device_discovery_knows_nothing_of_has_no_data() {
    assert_eq!(device_data(&inventory()["gpu-2"]), None);
    let mut device = inventory()["gpu-0"].clone();
    device
        .attributes
        .insert("uuid".into(), AttributeValue::Int(3));
    assert_eq!(
        device_data(&device),
        Some(
            json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
            "pciAddress": "0000:3b:00.0"})
        )
    );
}

/// One claim in memory, as the API server keeps it: a write must carry the current
/// resourceVersion; the first `failures` writes answer 500.
#[derive(Default)]
struct OneClaim {
    claim: Mutex<Option<Value>>,
    failures: AtomicU32,
    conflicts: AtomicU32,
    writes: AtomicU32,
}

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(kube::core::ErrorResponse {
        status: "Failure".into(),
        message: format!("answered {code}"),
        reason: String::new(),
        code,
    })
}

#[async_trait::async_trait]
impl ClaimStatusApi for OneClaim {
    async fn claim(&self, _namespace: &str, _name: &str) -> kube::Result<Option<Value>> {
        Ok(self.claim.lock().unwrap().clone())
    }

    async fn replace_status(
        &self,
        _namespace: &str,
        _name: &str,
        claim: &Value,
    ) -> kube::Result<()> {
        let take = |counter: &AtomicU32| {
            counter
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        };
        if take(&self.failures) {
            return Err(api_error(500));
        }
        let mut stored = self.claim.lock().unwrap();
        let Some(current) = stored.as_mut() else {
            return Err(api_error(404));
        };
        if take(&self.conflicts) {
            // someone else wrote the claim in between
            let version: u64 = current["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            current["metadata"]["resourceVersion"] = json!((version + 1).to_string());
        }
        if claim["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
            return Err(api_error(409));
        }
        let version: u64 = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        current["status"] = claim["status"].clone();
        current["metadata"]["resourceVersion"] = json!((version + 1).to_string());
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn reporter(api: &Arc<OneClaim>) -> StatusReporter {
    let (_, inventory) = watch::channel(inventory());
    StatusReporter::new(
        Arc::clone(api) as Arc<dyn ClaimStatusApi>,
        DRIVER,
        NODE,
        inventory,
        RateLimit::per_key(Duration::from_millis(10), Duration::from_millis(40)),
        None,
    )
}

async fn until_idle(reporter: &StatusReporter) {
    for _ in 0..500 {
        if reporter.is_idle() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the reporter did not finish: {reporter:?}");
}

fn our_devices(api: &OneClaim) -> Vec<String> {
    let claim = api.claim.lock().unwrap().clone().unwrap();
    claim["status"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["driver"] == DRIVER && d["pool"] == NODE)
        .map(|d| d["device"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn failed_and_conflicting_writes_are_retried_until_the_status_is_written() {
    let api = Arc::new(OneClaim {
        claim: Mutex::new(Some(claim(other_entries()))),
        failures: AtomicU32::new(2),
        conflicts: AtomicU32::new(2),
        ..OneClaim::default()
    });
    let reporter = reporter(&api);
    let workers = reporter.start();
    reporter.report(UID, "ns", "c", ready(&["gpu-0", "gpu-1"]));
    until_idle(&reporter).await;
    assert_eq!(our_devices(&api), ["gpu-0", "gpu-1"]);
    assert_eq!(api.writes.load(Ordering::SeqCst), 1);
    assert_eq!(api.failures.load(Ordering::SeqCst), 0);

    // unprepared: our entries go, the others stay
    let request = ClaimRequest {
        uid: UID.into(),
        namespace: "ns".into(),
        name: "c".into(),
        resource_handle: String::new(),
    };
    reporter.unprepared(&request);
    until_idle(&reporter).await;
    assert!(our_devices(&api).is_empty());
    let stored = api.claim.lock().unwrap().clone().unwrap();
    assert_eq!(stored["status"]["devices"], other_entries());
    reporter.shut_down();
    for worker in workers {
        worker.await.unwrap();
    }
}

#[tokio::test]
async fn the_last_request_for_a_claim_wins_and_a_claim_gone_is_done() {
    let api = Arc::new(OneClaim {
        claim: Mutex::new(Some(claim(json!([])))),
        ..OneClaim::default()
    });
    let reporter = reporter(&api);
    // queued before the workers run: only the unprepare is written, which changes nothing
    reporter.report(UID, "ns", "c", ready(&["gpu-0"]));
    reporter.report(UID, "ns", "c", Wanted::Cleared);
    let _workers = reporter.start();
    until_idle(&reporter).await;
    assert_eq!(api.writes.load(Ordering::SeqCst), 0);

    *api.claim.lock().unwrap() = None;
    reporter.report(UID, "ns", "c", ready(&["gpu-0"]));
    until_idle(&reporter).await;
    assert_eq!(api.writes.load(Ordering::SeqCst), 0);
}
