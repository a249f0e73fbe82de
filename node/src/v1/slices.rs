//! The node's `resource.k8s.io/v1` `ResourceSlice`s, written by the agent itself (`v1` DRA has
//! no kubelet that publishes for the driver): one pool named after the node, laid out by
//! [`super::pool`] (one slice for whole devices; counter sets and partitions split over several
//! as 1.36 validates them), `generateName: <node>-<driver>-` and a controller owner reference
//! to the `Node` (so the slices go with the node).
//!
//! [`plan`] (in `plan.rs`) is the pure decision over the slices of our driver on this node as
//! listed; [`SlicePublisher`] lists, writes what the plan says and retries a conflict (409) with
//! a fresh list. The pool is replaced without a moment where its devices vanish: existing slices
//! are updated in place, an existing slice of ours is adopted at start (its pool generation goes
//! on from there), and any other slice of ours on the node is deleted only after the writes.
//! The pool generation grows by one with every change of the devices.
//!
//! Unhealthy devices carry the health taint ([`super::taints`]). Where the API server drops
//! device taints (1.34 and 1.35 with the `DRADeviceTaints` gate off), the first write shows it
//! (the slice comes back without them): from then on unhealthy devices are left out of the slice
//! instead, as in `v1alpha2` mode, so that neither a rewrite loop nor an allocation of an
//! unhealthy device follows.
//!
//! The sharing fields are published only where the API server keeps them: before the first
//! publish of a pool that uses them, a dry-run create of its slices shows which it keeps
//! ([`super::pool::kept_fields`]; nothing is stored). Without `DRAPartitionableDevices` the
//! partitions and counter sets are left out (a partition published as a whole device would let
//! the scheduler hand out one GPU twice); without `DRAConsumableCapacity` shared devices are
//! published for one claim at a time. Either is said once at warn; the answer holds for the
//! publisher's life, so nothing is rewritten in a loop.
//!
//! At a clean stop the slices are left in place, as the upstream kubelet-plugin helper leaves
//! its slices: a restarted agent adopts them, the kubelet deletes a driver's slices on its node
//! when no plugin of that driver has been registered for 30 s, and the owner reference removes
//! them with the node.

mod plan;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;

pub use plan::{node_owner, plan, SlicePlan, SliceWrite};

use super::pool::{kept_fields, pool_content, uses_sharing, Served};
use super::taints::{has_health_taints, taint_device, TaintEffect};
use super::{is_conflict, is_not_found, SliceError};
use crate::device::Discovered;
use crate::health::{without_unhealthy, HealthMap};
use dra_types::resource_v1::ResourceSlice;

/// How many times a publish starts over after a conflict before it gives up for this round.
const CONFLICT_RETRIES: usize = 5;

/// Why the node's slice could not be published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The inventory cannot be laid out in v1 slices.
    #[error("the inventory cannot be published: {0}")]
    Slice(#[from] SliceError),
    /// The node, which owns the slice, does not exist.
    #[error("node {node} not found: the ResourceSlice's owner must exist")]
    NodeNotFound {
        /// The node.
        node: String,
    },
    /// A call to the API server failed.
    #[error("{call}: {source}")]
    Api {
        /// What was called (`list ResourceSlices`, `update ResourceSlice node-a-gpu-x7k2q`).
        call: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Every attempt met a conflict.
    #[error(
        "ResourceSlice of node {node}: still conflicting after {CONFLICT_RETRIES} fresh reads"
    )]
    Conflicts {
        /// The node.
        node: String,
    },
}

fn api_error(call: impl Into<String>) -> impl FnOnce(kube::Error) -> PublishError {
    let call = call.into();
    move |source| PublishError::Api {
        call,
        source: Box::new(source),
    }
}

/// What one publish did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The names of the pool's slices.
    pub slices: Vec<String>,
    /// The pool generation.
    pub generation: i64,
    /// Whether any slice was created or updated (false: the pool was up to date).
    pub written: bool,
    /// The other slices of ours that were deleted.
    pub deleted: Vec<String>,
}

/// Publishes the node's pool through the API server.
pub struct SlicePublisher {
    slices: Api<ResourceSlice>,
    nodes: Api<Node>,
    node: String,
    driver: String,
    owner: Option<OwnerReference>,
    generation: i64,
    effect: TaintEffect,
    taints_dropped: bool,
    served: Option<Served>,
}

impl std::fmt::Debug for SlicePublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlicePublisher")
            .field("node", &self.node)
            .field("driver", &self.driver)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl SlicePublisher {
    /// The publisher of `driver`'s slice of node `node`.
    pub fn new(client: &Client, node: &str, driver: &str) -> Self {
        SlicePublisher {
            slices: Api::all(client.clone()),
            nodes: Api::all(client.clone()),
            node: node.to_owned(),
            driver: driver.to_owned(),
            owner: None,
            generation: 0,
            effect: TaintEffect::default(),
            taints_dropped: false,
            served: None,
        }
    }

    /// The publisher with unhealthy devices tainted with `effect`.
    #[must_use]
    pub fn with_taint_effect(mut self, effect: TaintEffect) -> Self {
        self.effect = effect;
        self
    }

    /// Whether the API server was seen dropping the device taints (unhealthy devices are then
    /// left out of the slice).
    pub fn taints_dropped(&self) -> bool {
        self.taints_dropped
    }

    /// Which sharing fields the API server keeps, once known (`None` until a pool that uses
    /// them was first published).
    pub fn served(&self) -> Option<Served> {
        self.served
    }

    /// The pool's slices that show `found` with `health` and the sharing fields `served`.
    fn desired(
        &self,
        found: &Discovered,
        health: &HealthMap,
        served: Served,
    ) -> Result<Vec<ResourceSlice>, SliceError> {
        let content = if self.taints_dropped {
            let healthy = Discovered {
                devices: without_unhealthy(&found.devices, health),
                ..found.clone()
            };
            pool_content(&healthy, served)?
        } else {
            let mut content = pool_content(found, served)?;
            for device in &mut content.devices {
                taint_device(device, health, &self.driver, self.effect);
            }
            content
        };
        Ok(content.into_slices(&self.node, &self.driver, 0))
    }

    /// Which sharing fields the API server keeps: asked once, by a dry-run create of each slice
    /// of `found`'s pool that uses them (nothing is stored), and said at warn where some are
    /// dropped.
    async fn sharing_served(&mut self, found: &Discovered) -> Result<Served, PublishError> {
        if let Some(served) = self.served {
            return Ok(served);
        }
        let full = pool_content(found, Served::ALL)?.into_slices(&self.node, &self.driver, 1);
        let probes: Vec<&ResourceSlice> = full.iter().filter(|s| uses_sharing(s)).collect();
        if probes.is_empty() {
            return Ok(Served::ALL);
        }
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let mut served = Served::ALL;
        for probe in probes {
            let back = self
                .slices
                .create(&dry_run, probe)
                .await
                .map_err(api_error("dry-run create ResourceSlice"))?;
            let kept = kept_fields(probe, &back);
            served.partitions &= kept.partitions;
            served.capacity &= kept.capacity;
        }
        self.served = Some(served);
        warn_left_out(&self.node, found, served);
        Ok(served)
    }

    /// The owner reference to the node, its UID read once.
    async fn owner(&mut self) -> Result<OwnerReference, PublishError> {
        if let Some(owner) = &self.owner {
            return Ok(owner.clone());
        }
        let node = self
            .nodes
            .get_opt(&self.node)
            .await
            .map_err(api_error(format!("get node {}", self.node)))?
            .ok_or_else(|| PublishError::NodeNotFound {
                node: self.node.clone(),
            })?;
        let owner = node_owner(&self.node, node.metadata.uid.as_deref().unwrap_or_default());
        self.owner = Some(owner.clone());
        Ok(owner)
    }

    /// The slices of our driver on this node.
    async fn ours(&self) -> Result<Vec<ResourceSlice>, PublishError> {
        let selector = format!("spec.nodeName={},spec.driver={}", self.node, self.driver);
        let listed = self
            .slices
            .list(&ListParams::default().fields(&selector))
            .await
            .map_err(api_error("list ResourceSlices"))?;
        Ok(listed.items)
    }

    /// Makes the node's pool show `found` with the health taints of `health`; a conflict
    /// starts over with a fresh list.
    pub async fn publish(
        &mut self,
        found: &Discovered,
        health: &HealthMap,
    ) -> Result<Published, PublishError> {
        let owner = self.owner().await?;
        let served = self.sharing_served(found).await?;
        let desired = self.desired(found, health, served)?;
        'attempt: for _ in 0..CONFLICT_RETRIES {
            let existing = self.ours().await?;
            let plan = plan(&existing, &desired, &owner, self.generation);
            let mut slices = plan.keep.clone();
            for write in &plan.writes {
                let sent = write.slice();
                let stored = match write {
                    SliceWrite::Create(slice) => {
                        match self.slices.create(&PostParams::default(), slice).await {
                            Ok(created) => created,
                            Err(e) if is_conflict(&e) => continue 'attempt,
                            Err(e) => return Err(api_error("create ResourceSlice")(e)),
                        }
                    }
                    SliceWrite::Update(slice) => {
                        let name = slice.metadata.name.clone().unwrap_or_default();
                        match self
                            .slices
                            .replace(&name, &PostParams::default(), slice)
                            .await
                        {
                            Ok(updated) => updated,
                            Err(e) if is_conflict(&e) || is_not_found(&e) => continue 'attempt,
                            Err(e) => {
                                return Err(api_error(format!("update ResourceSlice {name}"))(e))
                            }
                        }
                    }
                };
                self.generation = self.generation.max(plan.generation);
                if matches!(write, SliceWrite::Create(_)) {
                    slices.extend(stored.metadata.name.clone());
                }
                if has_health_taints(sent, &self.driver)
                    && !has_health_taints(&stored, &self.driver)
                {
                    tracing::warn!(
                        node = %self.node,
                        "The API server drops device taints (DRADeviceTaints off): unhealthy devices are left out of the ResourceSlice instead"
                    );
                    self.taints_dropped = true;
                }
            }
            self.generation = self.generation.max(plan.generation);
            let mut deleted = Vec::new();
            for other in &plan.delete {
                match self.slices.delete(other, &DeleteParams::default()).await {
                    Ok(_) => deleted.push(other.clone()),
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(api_error(format!("delete ResourceSlice {other}"))(e)),
                }
            }
            return Ok(Published {
                slices,
                generation: plan.generation,
                written: !plan.writes.is_empty(),
                deleted,
            });
        }
        Err(PublishError::Conflicts {
            node: self.node.clone(),
        })
    }
}

/// Says at warn what the pool leaves out of `found` because the API server does not keep
/// the sharing fields (`served`).
fn warn_left_out(node: &str, found: &Discovered, served: Served) {
    if !served.partitions {
        let partitions = found
            .sharing
            .values()
            .filter(|s| !s.consumes_counters.is_empty())
            .count();
        if partitions > 0 || !found.counter_sets.is_empty() {
            tracing::warn!(
                node,
                partitions,
                counter_sets = found.counter_sets.len(),
                "The API server drops sharedCounters and consumesCounters (DRAPartitionableDevices off): the partitions are left out and only whole devices are published, so that no GPU is handed out twice"
            );
        }
    }
    if !served.capacity {
        let shared = found
            .sharing
            .values()
            .filter(|s| {
                s.allow_multiple_allocations
                    || s.capacity.values().any(|c| c.request_policy.is_some())
            })
            .count();
        if shared > 0 {
            tracing::warn!(
                node,
                devices = shared,
                "The API server drops allowMultipleAllocations and capacity requestPolicy (DRAConsumableCapacity off): shared devices are published for one claim at a time"
            );
        }
    }
}

/// Keeps the node's pool published until `stop`: at once, after every change of `found`
/// or `health`, and every `resync` (a slice deleted by someone comes back); a failed publish is tried again
/// after a backoff from 1 s doubling up to `resync`. `on_published` is called after every
/// publish that succeeded. The slice is left in place when `stop` fires.
pub async fn keep_published(
    mut publisher: SlicePublisher,
    mut found: watch::Receiver<Discovered>,
    mut health: watch::Receiver<HealthMap>,
    resync: Duration,
    on_published: impl Fn(&Published) + Send,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let current = found.borrow_and_update().clone();
        let current_health = health.borrow_and_update().clone();
        let dropped = publisher.taints_dropped();
        let wait = match publisher.publish(&current, &current_health).await {
            // the first write that showed the taints dropped: publish again without the
            // unhealthy devices at once
            Ok(_) if publisher.taints_dropped() && !dropped => continue,
            Ok(outcome) => {
                if outcome.written || !outcome.deleted.is_empty() {
                    tracing::info!(
                        node = %publisher.node,
                        slices = ?outcome.slices,
                        generation = outcome.generation,
                        devices = current.devices.len(),
                        deleted = ?outcome.deleted,
                        "Published the node's ResourceSlice"
                    );
                }
                on_published(&outcome);
                backoff = Duration::from_secs(1);
                resync
            }
            Err(error) => {
                tracing::warn!(node = %publisher.node, %error, retry = ?backoff, "Failed to publish the node's ResourceSlice");
                let wait = backoff;
                backoff = (backoff * 2).min(resync.max(Duration::from_secs(1)));
                wait
            }
        };
        let ended = tokio::select! {
            changed = found.changed() => changed.is_err(),
            Ok(()) = health.changed() => false,
            () = tokio::time::sleep(wait) => false,
            _ = stop.wait_for(|s| *s) => return,
        };
        if ended {
            // no more inventories: the last one stays published until the stop
            let _ = stop.wait_for(|s| *s).await;
            return;
        }
    }
}

#[cfg(test)]
mod tests;
