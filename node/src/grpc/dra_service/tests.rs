use std::sync::Mutex;

use dra_allocator::model::Sharing;
use serde_json::json;

use super::*;
use crate::prepare::{AllocatedClaim, PrepareError};
use crate::v1::claims::MemoryClaims;
use dra_types::resource_v1::{
    DeviceAllocationConfiguration, DeviceAllocationResult, DeviceRequestAllocationResult,
    ResourceClaim,
};

const DRIVER: &str = "gpu.dra-ledger.io";
const NODE: &str = "node-a";

/// Prepares whatever it is given but `gpu-9`, which is not on the node; records its calls.
#[derive(Default)]
struct Recorder {
    prepared: Mutex<Vec<AllocatedClaim>>,
    unprepared: Mutex<Vec<ClaimRequest>>,
}

impl ClaimPreparer for Recorder {
    fn prepare(&self, _: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        unreachable!("the v1 service prepares allocated claims")
    }

    fn prepare_allocated(
        &self,
        claims: &[AllocatedClaim],
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.prepared.lock().unwrap().extend(claims.iter().cloned());
        claims
            .iter()
            .map(|c| {
                let answer = match c.devices.iter().find(|d| *d == "gpu-9") {
                    Some(device) => Err(PrepareError::UnknownDevice {
                        uid: c.uid.clone(),
                        device: device.clone(),
                    }),
                    None => Ok(vec![format!("{DRIVER}/claim={}", c.uid)]),
                };
                (c.uid.clone(), answer)
            })
            .collect()
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)> {
        self.unprepared
            .lock()
            .unwrap()
            .extend(claims.iter().cloned());
        claims.iter().map(|c| (c.uid.clone(), Ok(()))).collect()
    }
}

struct Fixture {
    claims: Arc<MemoryClaims>,
    preparer: Arc<Recorder>,
    service: DraService<Recorder>,
}

fn fixture() -> Fixture {
    let claims = Arc::new(MemoryClaims::default());
    let preparer = Arc::new(Recorder::default());
    let source: Arc<dyn ClaimSource> = claims.clone();
    let service = DraService::new(Arc::clone(&preparer), source, DRIVER, NODE);
    Fixture {
        claims,
        preparer,
        service,
    }
}

fn allocated(name: &str, uid: &str, results: &[(&str, &str, &str, &str)]) -> ResourceClaim {
    ResourceClaim::new("default", name, uid).allocated(DeviceAllocationResult {
        results: results
            .iter()
            .map(|(request, driver, pool, device)| {
                DeviceRequestAllocationResult::new(request, driver, pool, device)
            })
            .collect(),
        config: Vec::new(),
    })
}

fn claim(name: &str, uid: &str) -> v1::Claim {
    v1::Claim {
        namespace: "default".into(),
        uid: uid.into(),
        name: name.into(),
    }
}

#[tokio::test]
async fn each_result_of_ours_here_is_one_device_with_its_base_request_and_the_claims_cdi_id() {
    let f = fixture();
    f.claims.put(allocated(
        "pair",
        "u1",
        &[
            ("gpus/h100", DRIVER, NODE, "gpu-0"),
            ("gpus/h100", DRIVER, NODE, "gpu-1"),
            ("nic", "nic.example.com", NODE, "eth-0"),
        ],
    ));
    let answer = f.service.prepare(vec![claim("pair", "u1")]).await;
    let entry = &answer.claims["u1"];
    assert_eq!(entry.error, "");
    let devices: Vec<(&[String], &str, &str, &[String])> = entry
        .devices
        .iter()
        .map(|d| {
            (
                d.request_names.as_slice(),
                d.pool_name.as_str(),
                d.device_name.as_str(),
                d.cdi_device_ids.as_slice(),
            )
        })
        .collect();
    let ids = ["gpu.dra-ledger.io/claim=u1".to_owned()];
    let names = ["gpus".to_owned()];
    assert_eq!(
        devices,
        [
            (&names[..], NODE, "gpu-0", &ids[..]),
            (&names[..], NODE, "gpu-1", &ids[..])
        ]
    );
    assert!(entry.devices.iter().all(|d| d.share_id.is_none()));
    let prepared = f.preparer.prepared.lock().unwrap().clone();
    assert_eq!(prepared.len(), 1);
    assert_eq!(prepared[0].devices, ["gpu-0", "gpu-1"]);
    assert_eq!(prepared[0].sharing, Sharing::Exclusive);
}

#[tokio::test]
async fn a_bad_claim_fails_alone_and_every_claim_of_the_batch_gets_an_entry() {
    let f = fixture();
    f.claims
        .put(allocated("good", "g", &[("gpu", DRIVER, NODE, "gpu-0")]));
    f.claims.put(allocated(
        "moved",
        "m",
        &[("gpu", DRIVER, "node-b", "gpu-0")],
    ));
    f.claims.put(allocated(
        "reborn",
        "new-uid",
        &[("gpu", DRIVER, NODE, "gpu-1")],
    ));
    f.claims.put(allocated(
        "missing-device",
        "x",
        &[("gpu", DRIVER, NODE, "gpu-9")],
    ));
    let mut bad_config = allocated("configured", "c", &[("gpu", DRIVER, NODE, "gpu-2")]);
    if let Some(status) = bad_config.status.as_mut() {
        if let Some(allocation) = status.allocation.as_mut() {
            allocation
                .devices
                .config
                .push(DeviceAllocationConfiguration::opaque(
                    "FromClaim",
                    &[],
                    DRIVER,
                    json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceConfig", "sharing": {"mode": "Shared"}}),
                ));
        }
    }
    f.claims.put(bad_config);
    let answer = f
        .service
        .prepare(vec![
            claim("good", "g"),
            claim("moved", "m"),
            claim("reborn", "old-uid"),
            claim("gone", "gone-uid"),
            claim("missing-device", "x"),
            claim("configured", "c"),
            claim("nameless", ""),
        ])
        .await;
    assert_eq!(answer.claims.len(), 7);
    let error = |uid: &str| answer.claims[uid].error.clone();
    assert_eq!(error("g"), "");
    assert!(
        error("m").contains("not in this node's pool node-a"),
        "{}",
        error("m")
    );
    assert!(
        error("old-uid").contains("got replaced"),
        "{}",
        error("old-uid")
    );
    assert!(
        error("gone-uid").contains("not found"),
        "{}",
        error("gone-uid")
    );
    assert!(error("x").contains("gpu-9"), "{}", error("x"));
    assert!(
        error("c").contains("sharing.maxConsumers: required when mode is Shared"),
        "{}",
        error("c")
    );
    assert!(error("").contains("no claim UID"), "{}", error(""));
    assert!(answer
        .claims
        .iter()
        .filter(|(uid, _)| *uid != "g")
        .all(|(_, c)| c.devices.is_empty()));
    let prepared: Vec<String> = f
        .preparer
        .prepared
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.uid.clone())
        .collect();
    assert_eq!(
        prepared,
        ["g", "x"],
        "only readable claims of ours reach the preparer"
    );
}

#[tokio::test]
async fn refusals_before_the_preparer_count_as_failed_prepares() {
    let metrics = NodeMetrics::new().unwrap();
    let f = fixture();
    let service = f.service.with_metrics(metrics.clone());
    service.prepare(vec![claim("gone", "u")]).await;
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("dra_ledger_node_prepare_total{outcome=\"error\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn unprepare_needs_only_the_uid_and_reads_no_claim() {
    let f = fixture();
    // no claim is stored: unprepare must not depend on the API server
    let answer = f
        .service
        .unprepare(vec![claim("gone", "u1"), claim("gone", "u1")])
        .await;
    assert_eq!(answer.claims.len(), 1);
    assert_eq!(answer.claims["u1"].error, "");
    let unprepared = f.preparer.unprepared.lock().unwrap().clone();
    assert_eq!(unprepared.len(), 1);
    assert_eq!(unprepared[0].uid, "u1");
}

#[tokio::test]
async fn the_v1beta1_service_answers_as_v1_does() {
    use v1beta1::dra_plugin_server::DraPlugin as _;
    let f = fixture();
    f.claims
        .put(allocated("one", "u1", &[("gpu", DRIVER, NODE, "gpu-0")]));
    let beta = DraServiceV1beta1(Arc::new(f.service));
    let request = v1beta1::NodePrepareResourcesRequest {
        claims: vec![v1beta1::Claim {
            namespace: "default".into(),
            uid: "u1".into(),
            name: "one".into(),
        }],
    };
    let answer = beta
        .node_prepare_resources(Request::new(request))
        .await
        .unwrap()
        .into_inner();
    let device = &answer.claims["u1"].devices[0];
    assert_eq!(device.device_name, "gpu-0");
    assert_eq!(device.pool_name, NODE);
    assert_eq!(device.request_names, ["gpu"]);
    assert_eq!(device.cdi_device_ids, ["gpu.dra-ledger.io/claim=u1"]);
    let request = v1beta1::NodeUnprepareResourcesRequest {
        claims: vec![v1beta1::Claim {
            namespace: "default".into(),
            uid: "u1".into(),
            name: "one".into(),
        }],
    };
    let answer = beta
        .node_unprepare_resources(Request::new(request))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.claims["u1"].error, "");
}

#[tokio::test]
async fn a_share_of_a_device_is_answered_with_its_share_id_and_prepared_with_its_consumption() {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let f = fixture();
    let mut result = DeviceRequestAllocationResult::new("gpu", DRIVER, NODE, "gpu-0");
    result.share_id = Some("5f1c0d3e-share".into());
    result.consumed_capacity = [("memory".to_owned(), Quantity("40Gi".into()))].into();
    f.claims.put(
        ResourceClaim::new("default", "half", "u1").allocated(DeviceAllocationResult {
            results: vec![result],
            config: Vec::new(),
        }),
    );
    let answer = f.service.prepare(vec![claim("half", "u1")]).await;
    let entry = &answer.claims["u1"];
    assert_eq!(entry.error, "");
    assert_eq!(entry.devices[0].share_id.as_deref(), Some("5f1c0d3e-share"));
    let prepared = f.preparer.prepared.lock().unwrap().clone();
    assert_eq!(prepared[0].devices, ["gpu-0"]);
    assert_eq!(
        prepared[0].shares,
        [crate::device::DeviceShare {
            device: "gpu-0".into(),
            share_id: "5f1c0d3e-share".into(),
            consumed: [("memory".to_owned(), "40Gi".to_owned())].into(),
        }]
    );
}
