//! Builders for the driver tests: a driver over a fresh ledger in a temporary directory with an
//! in-memory cluster, and hand-built classes, claims and pods.

use std::sync::Arc;
use std::time::Duration;

use dra_allocator::ledger::Ledger;
use dra_allocator::model::{AttributeValue, Device};
use dra_controller::driver::testing::MemoryCluster;
use dra_controller::driver::{DriverConfig, DriverObserver, LedgerDriver};
use dra_controller::params::{
    DeviceClaimParameters, DeviceClaimParametersSpec, DeviceClassParameters,
    DeviceClassParametersSpec, RequirementSpec, API_GROUP,
};
use dra_framework::{ClaimAllocation, Driver};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec,
    ResourceClaimStatus, ResourceClass, ResourceClassParametersReference,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub const DRIVER: &str = "gpu.dra-ledger.io";
pub const CLASS: &str = "gpu";
pub const CLASS_PARAMS: &str = "gpu-defaults";
pub const NAMESPACE: &str = "default";

pub struct Fixture {
    pub driver: Arc<LedgerDriver>,
    pub cluster: Arc<MemoryCluster>,
    _dir: tempfile::TempDir,
}

pub fn devices(count: usize, model: &str) -> Vec<Device> {
    (0..count)
        .map(|i| {
            Device::new(format!("gpu-{i}"))
                .with("model", AttributeValue::String(model.to_owned()))
                .with("numa", AttributeValue::Int(i64::try_from(i % 2).unwrap()))
        })
        .collect()
}

impl Fixture {
    /// A ready driver over nodes `(name, devices, model)`.
    pub fn new(nodes: &[(&str, usize, &str)]) -> Self {
        let f = Self::unready(nodes, Duration::from_secs(5));
        f.make_ready();
        f
    }

    /// A ready driver reporting to `observer`.
    pub fn observed(nodes: &[(&str, usize, &str)], observer: Arc<dyn DriverObserver>) -> Self {
        let mut f = Self::build(nodes, DriverConfig::new(DRIVER));
        let driver = Arc::try_unwrap(f.driver).expect("not shared yet");
        f.driver = Arc::new(driver.with_observer(observer));
        f.make_ready();
        f
    }

    /// A ready driver whose reconcile releases pending intents older than `grace`.
    pub fn with_grace(nodes: &[(&str, usize, &str)], grace: Duration) -> Self {
        let f = Self::build(
            nodes,
            DriverConfig {
                grace_period: grace,
                ..DriverConfig::new(DRIVER)
            },
        );
        f.make_ready();
        f
    }

    /// A driver that is not ready yet and waits `ready_timeout` for it.
    pub fn unready(nodes: &[(&str, usize, &str)], ready_timeout: Duration) -> Self {
        Self::build(
            nodes,
            DriverConfig {
                ready_timeout,
                ..DriverConfig::new(DRIVER)
            },
        )
    }

    fn build(nodes: &[(&str, usize, &str)], config: DriverConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("ledger.redb"), DRIVER).unwrap();
        for (node, count, model) in nodes {
            ledger.set_inventory(node, devices(*count, model)).unwrap();
        }
        let cluster = Arc::new(MemoryCluster::new());
        let driver = Arc::new(LedgerDriver::with_cluster(ledger, cluster.clone(), config));
        let f = Fixture {
            driver,
            cluster,
            _dir: dir,
        };
        f.put_class_params("Pack");
        f
    }

    /// A new driver process over the same ledger and cluster: nothing of the old one's memory
    /// (hand-outs, recent deallocations) is left.
    pub fn restart(&mut self) {
        let driver = LedgerDriver::with_cluster(
            self.driver.ledger().clone(),
            self.cluster.clone(),
            self.driver.config().clone(),
        );
        self.driver = Arc::new(driver);
        self.make_ready();
    }

    pub fn make_ready(&self) {
        let readiness = self.driver.readiness();
        readiness.set_inventory_synced();
        readiness.set_reconciled();
    }

    pub fn put_params(&self, name: &str, spec: DeviceClaimParametersSpec) {
        let mut object = DeviceClaimParameters::new(name, spec);
        object.metadata.namespace = Some(NAMESPACE.to_owned());
        self.cluster.put_claim_parameters(object);
    }

    pub fn put_class_params(&self, policy: &str) {
        self.put_class_spec(DeviceClassParametersSpec {
            policy: Some(policy.to_owned()),
            ..DeviceClassParametersSpec::default()
        });
    }

    pub fn put_class_spec(&self, spec: DeviceClassParametersSpec) {
        self.cluster
            .put_class_parameters(DeviceClassParameters::new(CLASS_PARAMS, spec));
    }

    /// A work item as the framework builds it, with the driver's parameters.
    /// `claim` allocated on the immediate path (the driver picks the node): the work item with
    /// the driver's outputs.
    pub async fn allocate_immediate(&self, claim: Claim) -> ClaimAllocation<LedgerDriver> {
        let mut items = vec![self.item("", claim).await];
        self.driver.allocate(&mut items, None).await;
        items.pop().expect("one item")
    }

    pub async fn item(&self, pod_claim: &str, claim: Claim) -> ClaimAllocation<LedgerDriver> {
        let class = class(Some(CLASS_PARAMS));
        let class_params = self.driver.get_class_parameters(&class).await.unwrap();
        let claim_params = self
            .driver
            .get_claim_parameters(&claim.0, &class, &class_params)
            .await
            .unwrap();
        ClaimAllocation::new(
            pod_claim,
            Arc::new(claim.0),
            Arc::new(class),
            Arc::new(class_params),
            Arc::new(claim_params),
        )
    }
}

pub fn req(attribute: &str, operator: &str, values: &[&str]) -> RequirementSpec {
    RequirementSpec {
        attribute: attribute.into(),
        operator: operator.into(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

pub fn params(count: i64) -> DeviceClaimParametersSpec {
    DeviceClaimParametersSpec {
        count: Some(count),
        ..DeviceClaimParametersSpec::default()
    }
}

pub fn class(parameters: Option<&str>) -> ResourceClass {
    ResourceClass {
        metadata: ObjectMeta {
            name: Some(CLASS.to_owned()),
            uid: Some("class-uid".to_owned()),
            resource_version: Some("1".to_owned()),
            ..ObjectMeta::default()
        },
        driver_name: DRIVER.to_owned(),
        parameters_ref: parameters.map(|name| ResourceClassParametersReference {
            api_group: Some(API_GROUP.to_owned()),
            kind: "DeviceClassParameters".to_owned(),
            name: name.to_owned(),
            namespace: None,
        }),
        structured_parameters: None,
        suitable_nodes: None,
    }
}

/// A claim under construction.
#[derive(Clone)]
pub struct Claim(pub ResourceClaim);

pub fn claim(name: &str, uid: &str) -> Claim {
    Claim(ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            uid: Some(uid.to_owned()),
            resource_version: Some("1".to_owned()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: CLASS.to_owned(),
            allocation_mode: None,
            parameters_ref: None,
        },
        status: None,
    })
}

impl Claim {
    pub fn params(mut self, name: &str) -> Self {
        self.0.spec.parameters_ref = Some(ResourceClaimParametersReference {
            api_group: Some(API_GROUP.to_owned()),
            kind: "DeviceClaimParameters".to_owned(),
            name: name.to_owned(),
        });
        self
    }

    pub fn immediate(mut self) -> Self {
        self.0.spec.allocation_mode = Some("Immediate".to_owned());
        self
    }
}

/// `claim` with `result` written to its status by this driver.
pub fn allocated(claim: &ResourceClaim, result: AllocationResult) -> ResourceClaim {
    let mut claim = claim.clone();
    claim.status = Some(ResourceClaimStatus {
        allocation: Some(result),
        driver_name: Some(DRIVER.to_owned()),
        ..ResourceClaimStatus::default()
    });
    claim
}

pub fn pod(name: &str, uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            uid: Some(uid.to_owned()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: None,
    }
}
