//! The objects the benchmark puts into the simulated cluster: the claim parameters and template
//! every claim uses, `Immediate` claims, and claims that already carry an allocation written
//! straight into the ledger (the fill of the restart part).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger};
use dra_allocator::model::{EffectiveRequest, Policy, Sharing};
use dra_controller::driver::handle::{allocation_result, HandleData};
use dra_controller::params::API_GROUP;
use futures::StreamExt;
use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::e2e_support::{self, Env, CLASS};

/// Requests in flight at once while filling.
const CONCURRENCY: usize = 64;

/// The claim parameters (one exclusive device) every claim of the benchmark names.
pub const PARAMS: &str = "one";
/// The claim template of the pods.
pub const TEMPLATE: &str = "gpu-one";

/// The parameter CRDs, the class, the claim parameters and the template.
pub async fn prepare(client: &Client) -> Env {
    let env = Env::connect(client.clone()).await;
    env.params(PARAMS, e2e_support::count(1)).await;
    env.template(TEMPLATE, CLASS, PARAMS).await;
    env
}

/// An `Immediate` claim `name` of the class, one device.
fn claim(name: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: CLASS.into(),
            allocation_mode: Some("Immediate".into()),
            parameters_ref: Some(ResourceClaimParametersReference {
                api_group: Some(API_GROUP.into()),
                kind: "DeviceClaimParameters".into(),
                name: PARAMS.into(),
            }),
        },
        status: None,
    }
}

/// Creates `Immediate` claims `<prefix>-0..count`, several at a time.
pub async fn create_claims(client: &Client, prefix: &str, count: usize) {
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    futures::stream::iter(0..count)
        .map(|i| {
            let claims = claims.clone();
            async move {
                claims
                    .create(&PostParams::default(), &claim(&format!("{prefix}-{i}")))
                    .await
                    .expect("claim created");
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
}

/// One exclusive device, no selector.
fn one_device() -> EffectiveRequest {
    EffectiveRequest {
        count: 1,
        selector: Vec::new(),
        sharing: Sharing::Exclusive,
        policy: Policy::Pack,
        same_attribute: None,
    }
}

/// Creates `count` `Immediate` claims spread round-robin over nodes `node-0..nodes` and, for
/// each, allocates one device on its node straight in `ledger`, confirms it and writes the
/// allocation into the claim's status, as the driver would have: the state a controller finds
/// after it ran on this cluster for a while. Prints its progress; returns how long it took.
pub async fn fill_allocated(
    client: &Client,
    ledger: &Ledger,
    count: usize,
    nodes: usize,
) -> Duration {
    let started = Instant::now();
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    futures::stream::iter(0..count)
        .map(|i| {
            let (claims, ledger, done) = (claims.clone(), ledger.clone(), done.clone());
            async move {
                let name = format!("held-{i}");
                let created = claims
                    .create(&PostParams::default(), &claim(&name))
                    .await
                    .expect("claim created");
                let uid = created.metadata.uid.clone().expect("a uid");
                let node = format!("node-{}", i % nodes);
                let request = AllocateRequest {
                    claim: ClaimRef::new(&uid, "default", &name),
                    pod_uid: None,
                    request: one_device(),
                    node: Some(node),
                };
                let allocation = tokio::task::spawn_blocking(move || {
                    ledger.allocate(request)?;
                    ledger.confirm(&uid)
                })
                .await
                .expect("ledger task")
                .expect("allocated in the ledger");
                let data = HandleData {
                    node: allocation.node.clone(),
                    devices: allocation.devices.clone(),
                    sharing: allocation.sharing.into(),
                    claim_uid: allocation.claim.uid.clone(),
                };
                let status = serde_json::json!({
                    "status": {
                        "driverName": e2e_support::DRIVER,
                        "allocation": allocation_result(e2e_support::DRIVER, &data, false),
                    }
                });
                claims
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .expect("claim status written");
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n % 10_000 == 0 {
                    eprintln!(
                        "scale: {n} of {count} allocated claims after {:.0} s",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
    started.elapsed()
}
