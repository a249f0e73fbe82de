use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::*;
use crate::v1::config::{CONFIG_API_VERSION, CONFIG_KIND};
use dra_types::resource_v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult, OpaqueDeviceConfiguration, ResourceClaimSpec,
    ResourceClaimStatus,
};

const DRIVER: &str = "gpu.dra-ledger.io";
const NODE: &str = "node-a";

/// A claim built as the scheduler leaves it: `result(..)` and `config(..)` add to its allocation.
struct ClaimBuilder(ResourceClaim);

fn claim(uid: &str) -> ClaimBuilder {
    ClaimBuilder(ResourceClaim {
        api_version: "resource.k8s.io/v1".into(),
        kind: "ResourceClaim".into(),
        metadata: ObjectMeta {
            name: Some("gpus".into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: None,
    })
}

impl ClaimBuilder {
    fn devices(&mut self) -> &mut DeviceAllocationResult {
        let status = self
            .0
            .status
            .get_or_insert_with(ResourceClaimStatus::default);
        &mut status
            .allocation
            .get_or_insert_with(AllocationResult::default)
            .devices
    }

    fn result(mut self, request: &str, driver: &str, pool: &str, device: &str) -> Self {
        self.devices()
            .results
            .push(DeviceRequestAllocationResult::new(
                request, driver, pool, device,
            ));
        self
    }

    fn config(mut self, source: &str, requests: &[&str], sharing: &serde_json::Value) -> Self {
        self.devices().config.push(DeviceAllocationConfiguration {
            source: source.into(),
            requests: requests.iter().map(|r| (*r).to_owned()).collect(),
            opaque: Some(OpaqueDeviceConfiguration {
                driver: DRIVER.into(),
                parameters: json!({
                    "apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "sharing": sharing
                }),
            }),
        });
        self
    }

    fn build(self) -> ResourceClaim {
        self.0
    }
}

fn request(uid: &str) -> ClaimRequest {
    ClaimRequest {
        uid: uid.into(),
        namespace: "default".into(),
        name: "gpus".into(),
        resource_handle: String::new(),
    }
}

fn select(claim: &ResourceClaim) -> Result<NodeAllocation, ClaimError> {
    node_allocation(&request("u1"), Some(claim), DRIVER, NODE)
}

#[test]
fn only_our_drivers_results_in_this_nodes_pool_are_taken() {
    let claim = claim("u1")
        .result("gpu", DRIVER, NODE, "gpu-0")
        .result("nic", "nic.example.com", NODE, "eth-0")
        .result("gpu", DRIVER, "node-b", "gpu-5")
        .result("pair/h100", DRIVER, NODE, "gpu-1")
        .build();
    let allocation = select(&claim).unwrap();
    let devices: Vec<(&str, &str)> = allocation
        .results
        .iter()
        .map(|r| (r.request.as_str(), r.device.as_str()))
        .collect();
    assert_eq!(devices, [("gpu", "gpu-0"), ("pair/h100", "gpu-1")]);
    assert!(allocation.results.iter().all(|r| r.pool == NODE));
    assert_eq!(allocation.sharing, Sharing::Exclusive);
    let prepared = allocation.to_claim();
    assert_eq!(prepared.devices, ["gpu-0", "gpu-1"]);
    assert_eq!(
        (prepared.uid.as_str(), prepared.name.as_str()),
        ("u1", "gpus")
    );
}

#[test]
fn a_device_named_by_two_results_is_prepared_once() {
    let claim = claim("u1")
        .result("a", DRIVER, NODE, "gpu-0")
        .result("b", DRIVER, NODE, "gpu-0")
        .build();
    let allocation = select(&claim).unwrap();
    assert_eq!(allocation.results.len(), 2);
    assert_eq!(allocation.to_claim().devices, ["gpu-0"]);
}

#[test]
fn another_drivers_claim_and_another_nodes_claim_are_refused_naming_them() {
    let foreign = claim("u1")
        .result("nic", "nic.example.com", NODE, "eth-0")
        .build();
    let error = select(&foreign).unwrap_err();
    assert!(
        matches!(error, ClaimError::NoDeviceOfDriver { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "claim default/gpus: the allocation has no device of driver gpu.dra-ledger.io"
    );
    let elsewhere = claim("u1")
        .result("gpu", DRIVER, "node-c", "gpu-0")
        .result("gpu", DRIVER, "node-b", "gpu-1")
        .build();
    let error = select(&elsewhere).unwrap_err();
    assert_eq!(
        error.to_string(),
        "claim default/gpus: the devices of driver gpu.dra-ledger.io are allocated in pool \
         node-b, node-c, not in this node's pool node-a"
    );
}

#[test]
fn a_missing_replaced_or_unallocated_claim_is_refused() {
    let missing = node_allocation(&request("u1"), None, DRIVER, NODE).unwrap_err();
    assert!(matches!(missing, ClaimError::NotFound { .. }), "{missing}");
    let replaced = claim("u2").result("gpu", DRIVER, NODE, "gpu-0").build();
    let error = select(&replaced).unwrap_err();
    assert_eq!(
        error.to_string(),
        "claim default/gpus: got replaced (UID u2, the kubelet asked for u1)"
    );
    let pending = claim("u1").build();
    let error = select(&pending).unwrap_err();
    assert_eq!(error.to_string(), "claim default/gpus: not allocated");
}

#[test]
fn the_configuration_gives_the_claims_sharing() {
    let shared = claim("u1")
        .result("gpu", DRIVER, NODE, "gpu-0")
        .config(
            "FromClass",
            &[],
            &json!({"mode": "Shared", "maxConsumers": 8}),
        )
        .config(
            "FromClaim",
            &["gpu"],
            &json!({"mode": "Shared", "maxConsumers": 3}),
        )
        .build();
    assert_eq!(
        select(&shared).unwrap().sharing,
        Sharing::Shared { max_consumers: 3 }
    );
}

#[test]
fn a_bad_configuration_is_the_claims_error_naming_the_field() {
    let bad = claim("u1")
        .result("gpu", DRIVER, NODE, "gpu-0")
        .config("FromClaim", &[], &json!({"mode": "Sometimes"}))
        .build();
    let error = select(&bad).unwrap_err();
    assert_eq!(
        error.to_string(),
        "claim default/gpus: status.allocation.devices.config[0].opaque.parameters.sharing.mode: \
         \"Sometimes\" is neither Exclusive nor Shared"
    );
}

#[test]
fn requests_configured_with_different_sharing_are_refused_naming_both() {
    let mixed = claim("u1")
        .result("train", DRIVER, NODE, "gpu-0")
        .result("infer", DRIVER, NODE, "gpu-1")
        .config(
            "FromClaim",
            &["infer"],
            &json!({"mode": "Shared", "maxConsumers": 2}),
        )
        .build();
    let error = select(&mixed).unwrap_err();
    assert_eq!(
        error.to_string(),
        "claim default/gpus: request train is configured Exclusive and request infer Shared \
         (maxConsumers 2); all devices of one claim must share alike on this driver"
    );
    // a configuration only for a request whose devices are on another node does not count
    let elsewhere = claim("u1")
        .result("train", DRIVER, NODE, "gpu-0")
        .result("infer", DRIVER, "node-b", "gpu-1")
        .config(
            "FromClaim",
            &["infer"],
            &json!({"mode": "Shared", "maxConsumers": 2}),
        )
        .build();
    assert_eq!(select(&elsewhere).unwrap().sharing, Sharing::Exclusive);
}

#[test]
fn admin_access_results_make_an_admin_access_claim_and_mixed_ones_are_refused() {
    let mut admin = claim("u1").result("monitor", DRIVER, NODE, "gpu-0").build();
    let allocation = admin.status.as_mut().unwrap().allocation.as_mut().unwrap();
    allocation.devices.results[0].admin_access = Some(true);
    let allocation = select(&admin).unwrap();
    assert!(allocation.admin_access && allocation.results[0].admin_access);
    assert!(allocation.to_claim().admin_access);

    let mut mixed = claim("u1")
        .result("monitor", DRIVER, NODE, "gpu-0")
        .result("work", DRIVER, NODE, "gpu-1")
        .build();
    let allocation = mixed.status.as_mut().unwrap().allocation.as_mut().unwrap();
    allocation.devices.results[0].admin_access = Some(true);
    let error = select(&mixed).unwrap_err();
    assert_eq!(
        error.to_string(),
        "claim default/gpus: request monitor has admin access and request work does not; all \
         devices of one claim on a node must be held alike on this driver"
    );
    let plain = claim("u1").result("work", DRIVER, NODE, "gpu-1").build();
    assert!(!select(&plain).unwrap().to_claim().admin_access);
}
