//! The churn workload: immediate claims created and deleted, pods with claim templates (which
//! the simulated kubelet finishes after `sim.dra-ledger.io/run-seconds`) coming and going, with
//! enough demand that the devices are contended. Shapes: one exclusive device, two exclusive
//! devices on one NUMA node, one shared device (`maxConsumers` 2). Every request is retried on
//! the faults the simulator injects.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dra_controller::params::{
    crd_manifests, DeviceClaimParameters, DeviceClaimParametersSpec, DeviceClassParameters,
    DeviceClassParametersSpec, SharingSpec, API_GROUP,
};
use k8s_openapi::api::core::v1::{ClaimSource, Container, Pod, PodResourceClaim, PodSpec};
use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec, ResourceClass, ResourceClassParametersReference,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

use super::{retry, Random, DRIVER};

/// The class of every claim.
pub const CLASS: &str = "gpu";
/// Claim shapes: each names its claim parameters, and its template is `t-<shape>`.
const SHAPES: [&str; 3] = ["one", "two", "shared"];
/// Attempts of each request of the workload.
const ATTEMPTS: u32 = 40;

fn shape_spec(shape: &str) -> DeviceClaimParametersSpec {
    match shape {
        "two" => DeviceClaimParametersSpec {
            count: Some(2),
            same_attribute: Some("numa".into()),
            ..DeviceClaimParametersSpec::default()
        },
        "shared" => DeviceClaimParametersSpec {
            count: Some(1),
            sharing: Some(SharingSpec {
                mode: Some("Shared".into()),
                max_consumers: Some(2),
            }),
            ..DeviceClaimParametersSpec::default()
        },
        _ => DeviceClaimParametersSpec {
            count: Some(1),
            ..DeviceClaimParametersSpec::default()
        },
    }
}

fn params_ref(shape: &str) -> ResourceClaimParametersReference {
    ResourceClaimParametersReference {
        api_group: Some(API_GROUP.into()),
        kind: "DeviceClaimParameters".into(),
        name: shape.into(),
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    }
}

/// Creates `object` through `api`, retried; an object that already exists counts as created.
async fn create<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let params = PostParams::default();
    match retry(ATTEMPTS, || api.create(&params, object)).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" => {}
        Err(error) => panic!("cannot create {}: {error}", object.name_any()),
    }
}

/// Deletes `name` through `api`, retried; a missing object counts as deleted.
async fn delete<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams::default();
    match retry(ATTEMPTS, || api.delete(name, &params)).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => panic!("cannot delete {name}: {error}"),
    }
}

/// Installs the parameter CRDs, the class [`CLASS`] (policy `Pack`, parameters
/// `gpu-defaults`), the claim parameters and a template per shape.
pub async fn setup(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for doc in serde_yaml::Deserializer::from_str(&crd_manifests()) {
        let crd: CustomResourceDefinition =
            serde::Deserialize::deserialize(doc).expect("CRD parses");
        create(&crds, &crd).await;
    }
    let defaults = DeviceClassParameters::new(
        "gpu-defaults",
        DeviceClassParametersSpec {
            policy: Some("Pack".into()),
            ..DeviceClassParametersSpec::default()
        },
    );
    create(&Api::all(client.clone()), &defaults).await;
    let class = ResourceClass {
        metadata: meta(CLASS),
        driver_name: DRIVER.into(),
        parameters_ref: Some(ResourceClassParametersReference {
            api_group: Some(API_GROUP.into()),
            kind: "DeviceClassParameters".into(),
            name: "gpu-defaults".into(),
            namespace: None,
        }),
        structured_parameters: None,
        suitable_nodes: None,
    };
    create(&Api::all(client.clone()), &class).await;
    for shape in SHAPES {
        let params = DeviceClaimParameters::new(shape, shape_spec(shape));
        create(&Api::default_namespaced(client.clone()), &params).await;
        let template = ResourceClaimTemplate {
            metadata: meta(&format!("t-{shape}")),
            spec: ResourceClaimTemplateSpec {
                metadata: None,
                spec: ResourceClaimSpec {
                    resource_class_name: CLASS.into(),
                    allocation_mode: None,
                    parameters_ref: Some(params_ref(shape)),
                },
            },
        };
        create(&Api::default_namespaced(client.clone()), &template).await;
    }
}

/// An immediate claim of `shape`.
fn immediate_claim(name: &str, shape: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: meta(name),
        spec: ResourceClaimSpec {
            resource_class_name: CLASS.into(),
            allocation_mode: Some("Immediate".into()),
            parameters_ref: Some(params_ref(shape)),
        },
        status: None,
    }
}

/// A pod with one claim per shape in `shapes` that runs `run_seconds` once bound.
fn pod(name: &str, shapes: &[&str], run_seconds: f64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            annotations: Some(
                [(
                    dra_sim::actors::kubelet::RUN_SECONDS_ANNOTATION.to_owned(),
                    format!("{run_seconds:.1}"),
                )]
                .into(),
            ),
            ..meta(name)
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            resource_claims: Some(
                shapes
                    .iter()
                    .enumerate()
                    .map(|(i, shape)| PodResourceClaim {
                        name: format!("c{i}"),
                        source: Some(ClaimSource {
                            resource_claim_name: None,
                            resource_claim_template_name: Some(format!("t-{shape}")),
                        }),
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// How much work the churn keeps alive.
#[derive(Clone, Copy, Debug)]
pub struct ChurnConfig {
    /// Immediate claims alive at once.
    pub claims: usize,
    /// Pods alive at once.
    pub pods: usize,
    /// Lifetime of an immediate claim, in milliseconds (lowest, highest).
    pub claim_lifetime_ms: (u64, u64),
    /// Lifetime of a pod before it is deleted (done or not), in milliseconds.
    pub pod_lifetime_ms: (u64, u64),
}

impl Default for ChurnConfig {
    fn default() -> Self {
        ChurnConfig {
            claims: 8,
            pods: 8,
            claim_lifetime_ms: (500, 4000),
            pod_lifetime_ms: (2000, 8000),
        }
    }
}

/// What the churn did.
#[derive(Debug, Default)]
pub struct ChurnCounts {
    /// Immediate claims created.
    pub claims_created: AtomicU64,
    /// Pods created.
    pub pods_created: AtomicU64,
}

/// The churn running in a task until [`Churn::stop`].
pub struct Churn {
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
    /// Counters.
    pub counts: Arc<ChurnCounts>,
}

impl Churn {
    /// Starts the churn in namespace `default` with the random choices seeded by `seed`.
    pub fn start(client: &Client, config: ChurnConfig, seed: u64) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(ChurnCounts::default());
        let task = tokio::spawn(churn(
            client.clone(),
            config,
            seed,
            stop.clone(),
            counts.clone(),
        ));
        Churn { stop, task, counts }
    }

    /// Stops creating and deleting; waits for the task.
    pub async fn stop(self) -> Arc<ChurnCounts> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("churn task ends cleanly");
        self.counts
    }
}

async fn churn(
    client: Client,
    config: ChurnConfig,
    seed: u64,
    stop: Arc<AtomicBool>,
    counts: Arc<ChurnCounts>,
) {
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    let pods = Api::<Pod>::default_namespaced(client);
    let mut rng = Random::new(seed);
    let mut live_claims: VecDeque<(tokio::time::Instant, String)> = VecDeque::new();
    let mut live_pods: VecDeque<(tokio::time::Instant, String)> = VecDeque::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let now = tokio::time::Instant::now();
        live_claims.make_contiguous().sort();
        while live_claims.front().is_some_and(|(end, _)| *end <= now) {
            let (_, name) = live_claims.pop_front().expect("checked");
            delete(&claims, &name).await;
        }
        live_pods.make_contiguous().sort();
        while live_pods.front().is_some_and(|(end, _)| *end <= now) {
            let (_, name) = live_pods.pop_front().expect("checked");
            delete(&pods, &name).await;
        }
        if live_claims.len() < config.claims {
            n += 1;
            let name = format!("imm-{n}");
            let shape = SHAPES[rng.between(0, SHAPES.len() as u64 - 1) as usize];
            create(&claims, &immediate_claim(&name, shape)).await;
            counts.claims_created.fetch_add(1, Ordering::Relaxed);
            let life = rng.between(config.claim_lifetime_ms.0, config.claim_lifetime_ms.1);
            live_claims.push_back((now + Duration::from_millis(life), name));
        }
        if live_pods.len() < config.pods {
            n += 1;
            let name = format!("pod-{n}");
            let shapes: &[&str] = match rng.between(0, 3) {
                0 => &["one"],
                1 => &["two"],
                2 => &["shared", "one"],
                _ => &["shared"],
            };
            let run = 0.5 + 2.0 * rng.unit();
            create(&pods, &pod(&name, shapes, run)).await;
            counts.pods_created.fetch_add(1, Ordering::Relaxed);
            let life = rng.between(config.pod_lifetime_ms.0, config.pod_lifetime_ms.1);
            live_pods.push_back((now + Duration::from_millis(life), name));
        }
        tokio::time::sleep(Duration::from_millis(rng.between(30, 120))).await;
    }
}

/// Deletes every pod and claim of namespace `default` (the controller, once running, removes
/// its finalizers).
pub async fn delete_everything(client: &Client) {
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let all = ListParams::default();
    let list = retry(ATTEMPTS, || pods.list(&all))
        .await
        .expect("pods listed");
    for pod in list.items {
        delete(&pods, &pod.name_any()).await;
    }
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    let list = retry(ATTEMPTS, || claims.list(&all))
        .await
        .expect("claims listed");
    for claim in list.items {
        delete(&claims, &claim.name_any()).await;
    }
}

/// How many pods and claims remain in namespace `default`; `None` when the lists failed.
pub async fn remaining(client: &Client) -> Option<(usize, usize)> {
    let pods = Api::<Pod>::default_namespaced(client.clone());
    let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
    let all = ListParams::default();
    let pods = retry(ATTEMPTS, || pods.list(&all)).await.ok()?;
    let claims = retry(ATTEMPTS, || claims.list(&all)).await.ok()?;
    Some((pods.items.len(), claims.items.len()))
}
