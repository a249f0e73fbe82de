//! The ledger-backed driver with the framework's `Controller` against the simulated cluster over
//! real HTTP: the simulator's scheduler, resourceclaim controller, garbage collector and kubelet
//! do their part, the driver its own.

use std::sync::Arc;
use std::time::Duration;
use testkit::eventually;

use dra_allocator::ledger::{AllocationState, Ledger};
use dra_controller::driver::handle::{claim_allocation, ClaimAllocationState};
use dra_controller::driver::{run_background, DriftKind, DriverConfig, LedgerDriver};
use dra_controller::params::{
    crd_manifests, DeviceClaimParameters, DeviceClaimParametersSpec, DeviceClassParameters,
    DeviceClassParametersSpec, RequirementSpec, API_GROUP,
};
use dra_framework::{Controller, ControllerConfig};
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use k8s_openapi::api::core::v1::{ClaimSource, Container, Pod, PodResourceClaim, PodSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1alpha2::{
    ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec, ResourceClass, ResourceClassParametersReference, ResourceSlice,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

const DRIVER: &str = "gpu.dra-ledger.io";
const CLASS: &str = "gpu";
const WAIT: Duration = Duration::from_secs(30);

/// The driver, its background tasks and the controller, stoppable.
struct Running {
    driver: Arc<LedgerDriver>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    async fn start(client: &Client, ledger: &std::path::Path) -> Running {
        let ledger = Ledger::open(ledger, DRIVER).expect("ledger opens");
        let config = DriverConfig {
            grace_period: Duration::from_secs(5),
            ..DriverConfig::new(DRIVER)
        };
        let driver = Arc::new(LedgerDriver::new(ledger, client.clone(), config));
        let (stop, _) = watch::channel(false);
        let stopped = |stop: &watch::Sender<bool>| {
            let mut rx = stop.subscribe();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let controller_config = ControllerConfig {
            recheck_delay: Duration::from_secs(1),
            ..ControllerConfig::default()
        };
        let controller = Controller::new(DRIVER, driver.clone(), client.clone(), controller_config);
        let tasks = vec![
            tokio::spawn(run_background(
                driver.clone(),
                client.clone(),
                stopped(&stop),
            )),
            tokio::spawn(controller.run(2, stopped(&stop))),
        ];
        let readiness = driver.readiness();
        tokio::time::timeout(WAIT, readiness.wait())
            .await
            .expect("driver becomes ready");
        Running {
            driver,
            stop,
            tasks,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            task.await.expect("task ends cleanly");
        }
    }
}

struct Setup {
    cluster: ClusterHandle,
    client: Client,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn new(nodes: usize, devices: usize) -> Setup {
        let cluster = start_cluster(ClusterConfig {
            nodes,
            devices_per_node: devices,
            ..ClusterConfig::default()
        })
        .await
        .expect("cluster starts");
        let client = cluster.kube_client();
        install_crds(&client).await;
        let defaults = DeviceClassParameters::new(
            "gpu-defaults",
            DeviceClassParametersSpec {
                policy: Some("Pack".into()),
                ..DeviceClassParametersSpec::default()
            },
        );
        Api::<DeviceClassParameters>::all(client.clone())
            .create(&PostParams::default(), &defaults)
            .await
            .expect("class parameters created");
        let class = ResourceClass {
            metadata: ObjectMeta {
                name: Some(CLASS.into()),
                ..ObjectMeta::default()
            },
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
        Api::<ResourceClass>::all(client.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("class created");
        Setup {
            cluster,
            client,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn ledger_path(&self) -> std::path::PathBuf {
        self.dir.path().join("ledger.redb")
    }

    async fn params(&self, name: &str, spec: DeviceClaimParametersSpec) {
        Api::<DeviceClaimParameters>::default_namespaced(self.client.clone())
            .create(
                &PostParams::default(),
                &DeviceClaimParameters::new(name, spec),
            )
            .await
            .expect("claim parameters created");
    }

    async fn template(&self, name: &str, params: &str) {
        let template = ResourceClaimTemplate {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimTemplateSpec {
                metadata: None,
                spec: claim_spec(params, None),
            },
        };
        Api::<ResourceClaimTemplate>::default_namespaced(self.client.clone())
            .create(&PostParams::default(), &template)
            .await
            .expect("template created");
    }

    async fn pod(&self, name: &str, template: &str) {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    image: Some("busybox".into()),
                    ..Container::default()
                }],
                resource_claims: Some(vec![PodResourceClaim {
                    name: "gpu".into(),
                    source: Some(ClaimSource {
                        resource_claim_name: None,
                        resource_claim_template_name: Some(template.into()),
                    }),
                }]),
                ..PodSpec::default()
            }),
            status: None,
        };
        Api::<Pod>::default_namespaced(self.client.clone())
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
    }

    async fn immediate_claim(&self, name: &str, params: &str) {
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: claim_spec(params, Some("Immediate")),
            status: None,
        };
        Api::<ResourceClaim>::default_namespaced(self.client.clone())
            .create(&PostParams::default(), &claim)
            .await
            .expect("claim created");
    }

    fn claims(&self) -> Api<ResourceClaim> {
        Api::default_namespaced(self.client.clone())
    }

    /// The claim `name` once it shows our allocation, with its handle data.
    async fn allocated(
        &self,
        name: &str,
    ) -> (ResourceClaim, dra_controller::driver::handle::HandleData) {
        let claims = self.claims();
        eventually(&format!("claim {name} allocated"), WAIT, || async {
            let claim = claims.get_opt(name).await.ok()??;
            match claim_allocation(&claim, DRIVER) {
                Ok(ClaimAllocationState::Ours(data)) => Some((claim, data)),
                _ => None,
            }
        })
        .await
    }

    /// The name of the claim the resourceclaim controller made for `pod`.
    async fn claim_of_pod(&self, pod: &str) -> String {
        let pods = Api::<Pod>::default_namespaced(self.client.clone());
        eventually("template claim created", WAIT, || async {
            let pod = pods.get(pod).await.ok()?;
            pod.status?
                .resource_claim_statuses?
                .first()?
                .resource_claim_name
                .clone()
        })
        .await
    }
}

fn claim_spec(params: &str, mode: Option<&str>) -> ResourceClaimSpec {
    ResourceClaimSpec {
        resource_class_name: CLASS.into(),
        allocation_mode: mode.map(Into::into),
        parameters_ref: Some(ResourceClaimParametersReference {
            api_group: Some(API_GROUP.into()),
            kind: "DeviceClaimParameters".into(),
            name: params.into(),
        }),
    }
}

async fn install_crds(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for doc in serde_yaml::Deserializer::from_str(&crd_manifests()) {
        let crd: CustomResourceDefinition =
            serde::Deserialize::deserialize(doc).expect("CRD parses");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD created");
    }
}

fn count(n: i64) -> DeviceClaimParametersSpec {
    DeviceClaimParametersSpec {
        count: Some(n),
        ..DeviceClaimParametersSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_is_bound_with_its_claim_allocated_and_deleting_it_deallocates() {
    let setup = Setup::new(3, 2).await;
    let running = Running::start(&setup.client, &setup.ledger_path()).await;
    setup
        .params(
            "two",
            DeviceClaimParametersSpec {
                shareable: Some(true),
                ..count(2)
            },
        )
        .await;
    setup.template("gpu-pair", "two").await;
    setup.pod("job", "gpu-pair").await;

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
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_claim_is_allocated_and_a_vanished_device_becomes_missing() {
    let setup = Setup::new(2, 2).await;
    let running = Running::start(&setup.client, &setup.ledger_path()).await;
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
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_whose_selector_matches_nothing_stays_pending_with_an_event_saying_why() {
    let setup = Setup::new(2, 2).await;
    let running = Running::start(&setup.client, &setup.ledger_path()).await;
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
    setup.template("h200", "h200").await;
    setup.pod("picky", "h200").await;

    let events = Api::<Event>::default_namespaced(setup.client.clone());
    let event = eventually("event on the pod", WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("picky")
                    && e.reason.as_deref() == Some("NoSuitableNode")
            })
    })
    .await;
    let note = event.note.unwrap_or_default();
    for node in setup.cluster.node_names() {
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
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_the_ledger_deleted_rebuilds_it_from_the_cluster() {
    let setup = Setup::new(2, 4).await;
    let running = Running::start(&setup.client, &setup.ledger_path()).await;
    setup.params("two", count(2)).await;
    setup.template("pair", "two").await;
    setup.pod("job", "pair").await;
    setup.immediate_claim("now", "two").await;
    let pod_claim = setup.claim_of_pod("job").await;
    let (_, pod_data) = setup.allocated(&pod_claim).await;
    let (_, immediate_data) = setup.allocated("now").await;
    running.stop().await;

    std::fs::remove_file(setup.ledger_path()).expect("ledger deleted");
    let restarted = Running::start(&setup.client, &setup.ledger_path()).await;
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
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_claim_parameters_leave_the_claim_unallocated_with_an_event_naming_the_field() {
    let setup = Setup::new(1, 2).await;
    let running = Running::start(&setup.client, &setup.ledger_path()).await;
    setup.params("zero", count(0)).await;
    setup.template("zero", "zero").await;
    setup.pod("broken", "zero").await;
    let claim_name = setup.claim_of_pod("broken").await;
    let events = Api::<Event>::default_namespaced(setup.client.clone());
    let note = eventually("event on the claim", WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(claim_name.as_str())
            })?
            .note
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
    setup.cluster.shutdown().await;
}
