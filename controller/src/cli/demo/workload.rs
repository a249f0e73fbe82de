//! The demo workload: pods that use claim templates (one device, two devices on one NUMA node,
//! or two separate one-device claims; on 1.34 also an H100-else-any prioritized list) or one of
//! the immediate claims (1.30 only), each running a few seconds through the simulated kubelet's
//! `sim.dra-ledger.io/run-seconds` annotation. Pods are written in the shape of the cluster's
//! release.
//!
//! Pods are submitted in waves so that at most about as many pods as there are devices wait at
//! once, which keeps the scheduler's work per pod small. Everything is deterministic from the pod
//! index: the same flags give the same workload.

use anyhow::Context;
use k8s_openapi::api::core::v1::{ClaimSource, Container, Pod, PodResourceClaim, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};

use super::setup::{immediate_claim_name, NAMESPACE, ONE_GPU, TWO_GPUS};
use super::v1::{pod_in_1_34_shape, H100_OR_ANY};

/// The simulated kubelet's run-time annotation.
pub const RUN_SECONDS_ANNOTATION: &str = dra_sim::actors::kubelet::RUN_SECONDS_ANNOTATION;

/// Where one pod claim comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimUse {
    /// A claim generated from this template.
    Template(&'static str),
    /// An existing (immediate) claim.
    Claim(String),
}

/// The plan of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPlan {
    /// The pod name.
    pub name: String,
    /// Its claims, named `gpu-0`, `gpu-1`, ... in the pod.
    pub claims: Vec<ClaimUse>,
    /// Seconds it runs once started.
    pub run_seconds: u32,
}

/// The shape of the workload.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadShape {
    /// Pods in total.
    pub pods: usize,
    /// Immediate claims; the first pods use one each.
    pub immediate_claims: usize,
    /// Whether two-device claims fit (at least two devices per NUMA node).
    pub pairs: bool,
    /// Whether every fourth pod asks for an H100 else any GPU (a 1.34 prioritized list).
    pub prioritized: bool,
}

/// The plan of pod number `index`.
pub fn plan(shape: WorkloadShape, index: usize) -> PodPlan {
    let claims = if index < shape.immediate_claims {
        vec![ClaimUse::Claim(immediate_claim_name(index))]
    } else {
        match index % 4 {
            1 if shape.prioritized => vec![ClaimUse::Template(H100_OR_ANY)],
            2 if shape.pairs => vec![ClaimUse::Template(TWO_GPUS)],
            3 => vec![ClaimUse::Template(ONE_GPU), ClaimUse::Template(ONE_GPU)],
            _ => vec![ClaimUse::Template(ONE_GPU)],
        }
    };
    PodPlan {
        name: format!("demo-{index:05}"),
        claims,
        run_seconds: 2 + (index % 4) as u32,
    }
}

impl PodPlan {
    /// Devices the pod needs (the tests check the shape with it).
    #[cfg(test)]
    pub fn devices(&self) -> usize {
        self.claims
            .iter()
            .map(|claim| match claim {
                ClaimUse::Template(TWO_GPUS) => 2,
                _ => 1,
            })
            .sum()
    }

    /// The Pod object.
    pub fn to_pod(&self) -> Pod {
        let claim_names: Vec<String> = (0..self.claims.len()).map(|i| format!("gpu-{i}")).collect();
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(NAMESPACE.to_owned()),
                annotations: Some(
                    [(
                        RUN_SECONDS_ANNOTATION.to_owned(),
                        self.run_seconds.to_string(),
                    )]
                    .into(),
                ),
                labels: Some([("app".to_owned(), "dra-ledger-demo".to_owned())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".to_owned(),
                    image: Some("registry.k8s.io/pause:3.9".to_owned()),
                    resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                        claims: Some(
                            claim_names
                                .iter()
                                .map(|name| k8s_openapi::api::core::v1::ResourceClaim {
                                    name: name.clone(),
                                })
                                .collect(),
                        ),
                        ..Default::default()
                    }),
                    ..Container::default()
                }],
                resource_claims: Some(
                    self.claims
                        .iter()
                        .zip(&claim_names)
                        .map(|(claim, name)| PodResourceClaim {
                            name: name.clone(),
                            source: Some(match claim {
                                ClaimUse::Template(template) => ClaimSource {
                                    resource_claim_template_name: Some((*template).to_owned()),
                                    resource_claim_name: None,
                                },
                                ClaimUse::Claim(claim) => ClaimSource {
                                    resource_claim_name: Some(claim.clone()),
                                    resource_claim_template_name: None,
                                },
                            }),
                        })
                        .collect(),
                ),
                restart_policy: Some("Never".to_owned()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }
}

/// Submits the pods of a workload in order.
#[derive(Debug)]
pub struct Submitter {
    api: Api<DynamicObject>,
    shape: WorkloadShape,
    v1: bool,
    next: usize,
}

impl Submitter {
    /// A submitter for `shape`, writing pods in the 1.34 shape when `v1`.
    pub fn new(client: &Client, shape: WorkloadShape, v1: bool) -> Self {
        Submitter {
            api: Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::erase::<Pod>(&())),
            shape,
            v1,
            next: 0,
        }
    }

    /// Pods submitted so far.
    pub fn submitted(&self) -> usize {
        self.next
    }

    /// Whether every pod was submitted.
    pub fn is_done(&self) -> bool {
        self.next >= self.shape.pods
    }

    /// Submits pods while fewer than `limit` are unfinished, at most `batch` at a time.
    pub async fn submit(
        &mut self,
        unfinished: usize,
        limit: usize,
        batch: usize,
    ) -> anyhow::Result<()> {
        let room = limit.saturating_sub(unfinished).min(batch);
        for _ in 0..room {
            if self.is_done() {
                break;
            }
            let mut pod = serde_json::to_value(plan(self.shape, self.next).to_pod())?;
            if self.v1 {
                pod = pod_in_1_34_shape(pod);
            }
            let pod: DynamicObject = serde_json::from_value(pod)?;
            self.api
                .create(&PostParams::default(), &pod)
                .await
                .with_context(|| {
                    format!("cannot create pod {}", plan(self.shape, self.next).name)
                })?;
            self.next += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: WorkloadShape = WorkloadShape {
        pods: 20,
        immediate_claims: 2,
        pairs: true,
        prioritized: false,
    };

    #[test]
    fn first_pods_use_the_immediate_claims_then_templates_rotate() {
        assert_eq!(
            plan(SHAPE, 0).claims,
            [ClaimUse::Claim("immediate-0".into())]
        );
        assert_eq!(
            plan(SHAPE, 1).claims,
            [ClaimUse::Claim("immediate-1".into())]
        );
        assert_eq!(plan(SHAPE, 2).claims, [ClaimUse::Template(TWO_GPUS)]);
        assert_eq!(plan(SHAPE, 3).devices(), 2);
        assert_eq!(plan(SHAPE, 3).claims.len(), 2);
        assert_eq!(plan(SHAPE, 4).claims, [ClaimUse::Template(ONE_GPU)]);
    }

    #[test]
    fn on_1_34_every_fourth_pod_asks_for_an_h100_else_any_gpu() {
        let shape = WorkloadShape {
            immediate_claims: 0,
            prioritized: true,
            ..SHAPE
        };
        let prioritized: Vec<usize> = (0..12)
            .filter(|&i| plan(shape, i).claims == [ClaimUse::Template(H100_OR_ANY)])
            .collect();
        assert_eq!(prioritized, [1, 5, 9]);
        assert!(!(0..12).any(|i| plan(SHAPE, i).claims == [ClaimUse::Template(H100_OR_ANY)]));
    }

    #[test]
    fn without_pairs_no_pod_asks_for_two_devices_in_one_claim() {
        let shape = WorkloadShape {
            pairs: false,
            ..SHAPE
        };
        assert!((0..40).all(|i| !plan(shape, i)
            .claims
            .contains(&ClaimUse::Template(TWO_GPUS))));
    }

    #[test]
    fn pod_object_references_every_claim_and_runs_for_its_seconds() {
        let pod = plan(SHAPE, 7).to_pod();
        let spec = pod.spec.unwrap();
        let pod_claims = spec.resource_claims.unwrap();
        assert_eq!(pod_claims.len(), 2);
        let container_claims = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.claims.as_ref())
            .unwrap();
        assert_eq!(container_claims.len(), 2);
        assert_eq!(
            pod.metadata.annotations.unwrap()[RUN_SECONDS_ANNOTATION],
            "5"
        );
    }
}
