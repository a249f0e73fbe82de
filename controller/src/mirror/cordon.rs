//! Cordon on `resource.k8s.io/v1` clusters: the kube-scheduler allocates there, so a device is
//! kept out of allocation by a `DeviceTaintRule` (KEP 5055) with effect `NoSchedule` and key
//! `<driver>/cordoned` selecting the device (driver, the node's pool, which the node agent
//! names after the node, and the device); uncordon deletes it. Existing consumers keep their
//! device (`NoSchedule` evicts nothing). The rule is written in the first served version of
//! `v1` (Kubernetes 1.37) and `v1beta2` (1.36 with `--runtime-config`); a cluster that serves
//! neither gets a [`CordonError::Unavailable`] naming what to enable.
//!
//! [`rule_name`] and [`cordon_rule`] are pure; [`TaintRuleCordon`] does the discovery and the
//! writes.

use async_trait::async_trait;
use dra_api::{ClusterCordon, CordonError};
use dra_types::resource_v1::{
    DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector, GROUP, NO_SCHEDULE,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};

/// The answer where no served version has `DeviceTaintRule`.
pub const CORDON_UNAVAILABLE: &str = "cordon on a resource.k8s.io/v1 cluster writes a \
     DeviceTaintRule, which this cluster does not serve: it is served by default from \
     Kubernetes 1.37; on 1.36 start kube-apiserver with \
     --runtime-config=resource.k8s.io/v1beta2=true and kube-apiserver, kube-scheduler and \
     kube-controller-manager with --feature-gates=DRADeviceTaintRules=true";

/// The versions a rule is written in, preferred first.
const VERSIONS: [&str; 2] = ["v1", "v1beta2"];

/// The longest object name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The label that marks our rules.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "dra-ledger");

/// The taint key of a cordon.
pub fn cordon_key(driver: &str) -> String {
    format!("{driver}/cordoned")
}

/// The rule's name: `cordon.<node>.<device>.<driver>` (a device name has no dot, so the name
/// is unique per node and device of one driver); `None` when longer than a name may be.
pub fn rule_name(driver: &str, node: &str, device: &str) -> Option<String> {
    let name = format!("cordon.{node}.{device}.{driver}");
    (name.len() <= MAX_NAME).then_some(name)
}

/// The rule that cordons `device` of `node`.
pub fn cordon_rule(name: &str, driver: &str, node: &str, device: &str) -> DeviceTaintRule {
    DeviceTaintRule {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(driver.to_owned()),
                pool: Some(node.to_owned()),
                device: Some(device.to_owned()),
            }),
            taint: DeviceTaint {
                key: cordon_key(driver),
                effect: NO_SCHEDULE.to_owned(),
                ..DeviceTaint::default()
            },
        },
        ..DeviceTaintRule::default()
    }
}

/// Why a rule write failed.
#[derive(Debug, thiserror::Error)]
enum RuleWriteError {
    /// A discovery, create or delete call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The rule cannot be encoded.
    #[error("encode the DeviceTaintRule: {0}")]
    Encode(#[source] serde_json::Error),
    /// Node and device give a name longer than a name may be.
    #[error("the DeviceTaintRule name for node {node} and device {device} is longer than {MAX_NAME} characters")]
    NameTooLong {
        /// The node.
        node: String,
        /// The device.
        device: String,
    },
}

fn failed(error: RuleWriteError) -> CordonError {
    CordonError::Failed(Box::new(error))
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(response) => Some(response.code),
        _ => None,
    }
}

/// Cordon through `DeviceTaintRule`s of `driver`.
pub struct TaintRuleCordon {
    client: Client,
    driver: String,
}

impl TaintRuleCordon {
    /// Cordons devices of `driver` through `client`.
    pub fn new(client: Client, driver: impl Into<String>) -> Self {
        Self {
            client,
            driver: driver.into(),
        }
    }

    /// The first version in [`VERSIONS`] that serves `devicetaintrules`.
    async fn served_version(&self) -> Result<Option<&'static str>, RuleWriteError> {
        for version in VERSIONS {
            let group_version = format!("{GROUP}/{version}");
            match self.client.list_api_group_resources(&group_version).await {
                Ok(list) if list.resources.iter().any(|r| r.name == "devicetaintrules") => {
                    return Ok(Some(version));
                }
                Ok(_) => {}
                Err(error) if status_code(&error) == Some(404) => {}
                Err(source) => {
                    return Err(RuleWriteError::Api {
                        action: format!("discover {group_version}"),
                        source,
                    })
                }
            }
        }
        Ok(None)
    }
}

#[async_trait]
impl ClusterCordon for TaintRuleCordon {
    async fn set(&self, node: &str, device: &str, cordon: bool) -> Result<(), CordonError> {
        let Some(version) = self.served_version().await.map_err(failed)? else {
            return Err(CordonError::Unavailable(CORDON_UNAVAILABLE.to_owned()));
        };
        let name = rule_name(&self.driver, node, device).ok_or_else(|| {
            failed(RuleWriteError::NameTooLong {
                node: node.to_owned(),
                device: device.to_owned(),
            })
        })?;
        let resource = ApiResource {
            group: GROUP.to_owned(),
            version: version.to_owned(),
            api_version: format!("{GROUP}/{version}"),
            kind: "DeviceTaintRule".to_owned(),
            plural: "devicetaintrules".to_owned(),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        if cordon {
            let mut value = serde_json::to_value(cordon_rule(&name, &self.driver, node, device))
                .map_err(|e| failed(RuleWriteError::Encode(e)))?;
            value["apiVersion"] = resource.api_version.clone().into();
            let object: DynamicObject =
                serde_json::from_value(value).map_err(|e| failed(RuleWriteError::Encode(e)))?;
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => Ok(()),
                Err(error) if status_code(&error) == Some(409) => Ok(()),
                Err(source) => Err(failed(RuleWriteError::Api {
                    action: format!("create DeviceTaintRule {name}"),
                    source,
                })),
            }
        } else {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(error) if status_code(&error) == Some(404) => Ok(()),
                Err(source) => Err(failed(RuleWriteError::Api {
                    action: format!("delete DeviceTaintRule {name}"),
                    source,
                })),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rule_selects_the_device_in_the_nodes_pool_with_a_no_schedule_cordon_taint() {
        let name = rule_name("gpu.dra-ledger.io", "node-0", "gpu-1").unwrap();
        assert_eq!(name, "cordon.node-0.gpu-1.gpu.dra-ledger.io");
        let rule = cordon_rule(&name, "gpu.dra-ledger.io", "node-0", "gpu-1");
        assert_eq!(
            serde_json::to_value(&rule).unwrap(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "dra-ledger"}},
                "spec": {"deviceSelector": {"driver": "gpu.dra-ledger.io", "pool": "node-0", "device": "gpu-1"},
                    "taint": {"key": "gpu.dra-ledger.io/cordoned", "effect": "NoSchedule"}}})
        );
    }

    #[test]
    fn names_are_distinct_per_node_and_device_and_refused_past_the_name_limit() {
        let a = rule_name("d.io", "a.b", "c");
        let b = rule_name("d.io", "a", "b-c");
        assert_ne!(a, b);
        assert!(rule_name("d.io", &"n".repeat(240), "gpu-0").is_none());
    }
}
