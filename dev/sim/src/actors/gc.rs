//! The garbage collector: keeps a graph of owner references over the kinds the simulator serves
//! and deletes dependents whose owners are all gone (background propagation), drops references to
//! absent owners when other owners remain, and completes foreground and orphan deletions of owners
//! (`foregroundDeletion`: delete blocking dependents, then drop the finalizer; `orphan`: remove
//! the owner references from dependents, then drop the finalizer). Objects with finalizers are
//! only asked to be deleted; the API server keeps them with a deletionTimestamp until their
//! finalizers go.
//!
//! Talks to the API server only through `kube::Client` (dynamic objects); the decision is pure
//! (`verdict`).

use dra_runtime::lock::LockExt;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
    PropagationPolicy,
};
use kube::{Api, Client};

use super::error::{is_not_found, ActorError, Result};
use super::writes::with_retry;
use crate::actors::ACTOR_BACKOFF;
use dra_runtime::informer::Change;
use dra_runtime::workqueue::{Next, WorkQueue};

/// Finalizer of an owner deleted with foreground propagation.
pub(crate) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer of an owner deleted with orphan propagation.
pub(crate) const ORPHAN_FINALIZER: &str = "orphan";
/// How often an owner in a foreground deletion looks again at dependents that block it (changes
/// of the dependents wake it earlier).
const OWNER_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// One kind the collector tracks.
#[derive(Debug, Clone)]
pub(crate) struct Kind {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

#[derive(Debug, Clone)]
struct Vertex {
    kind: usize,
    namespace: Option<String>,
    name: String,
    owners: Vec<OwnerReference>,
    deleting: bool,
    finalizers: Vec<String>,
}

#[derive(Debug, Default)]
struct Graph {
    vertices: HashMap<String, Vertex>,
    dependents: HashMap<String, HashSet<String>>,
}

/// What the collector does with a dependent whose owners were looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep it as it is.
    Keep,
    /// Every owner is gone: delete it.
    Delete,
    /// Some owners are gone: remove the references with these UIDs.
    DropOwners(Vec<String>),
}

/// The decision for a dependent given, per owner reference, whether the owner still exists.
pub(crate) fn verdict(
    owners: &[OwnerReference],
    exists: &dyn Fn(&OwnerReference) -> bool,
) -> Verdict {
    if owners.is_empty() {
        return Verdict::Keep;
    }
    let absent: Vec<String> = owners
        .iter()
        .filter(|o| !exists(o))
        .map(|o| o.uid.clone())
        .collect();
    if absent.is_empty() {
        Verdict::Keep
    } else if absent.len() == owners.len() {
        Verdict::Delete
    } else {
        Verdict::DropOwners(absent)
    }
}

/// The garbage collector actor.
pub(crate) struct GarbageCollector {
    client: Client,
    kinds: Vec<Kind>,
    graph: Mutex<Graph>,
    /// UIDs of objects to examine.
    pub queue: WorkQueue<String>,
}

impl GarbageCollector {
    /// A collector over `kinds` (the index of a kind in this list is what `observe` takes).
    pub(crate) fn new(client: Client, kinds: Vec<Kind>) -> Self {
        Self {
            client,
            kinds,
            graph: Mutex::new(Graph::default()),
            queue: WorkQueue::new(ACTOR_BACKOFF),
        }
    }

    /// Records a change of an object of kind number `kind`.
    pub(crate) fn observe(&self, kind: usize, change: &Change<'_, ObjectMeta>) {
        let mut graph = self.graph.lock_or_recover();
        match change {
            Change::Applied(meta) => {
                let Some(uid) = meta.uid.clone() else { return };
                let vertex = Vertex {
                    kind,
                    namespace: meta.namespace.clone(),
                    name: meta.name.clone().unwrap_or_default(),
                    owners: meta.owner_references.clone().unwrap_or_default(),
                    deleting: meta.deletion_timestamp.is_some(),
                    finalizers: meta.finalizers.clone().unwrap_or_default(),
                };
                let old = graph.vertices.get(&uid).cloned();
                if let Some(old) = &old {
                    for owner in &old.owners {
                        if let Some(set) = graph.dependents.get_mut(&owner.uid) {
                            set.remove(&uid);
                        }
                    }
                }
                for owner in &vertex.owners {
                    graph
                        .dependents
                        .entry(owner.uid.clone())
                        .or_default()
                        .insert(uid.clone());
                    // An owner waiting for its dependents in a foreground deletion looks again.
                    if graph.vertices.get(&owner.uid).is_some_and(|o| o.deleting) {
                        self.queue.add(&owner.uid.clone());
                    }
                }
                // Status updates change neither owners nor deletion state: nothing to examine.
                let owners_changed = old.as_ref().is_none_or(|o| o.owners != vertex.owners);
                let owner_deletion = vertex.deleting
                    && vertex
                        .finalizers
                        .iter()
                        .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER)
                    && old
                        .as_ref()
                        .is_none_or(|o| !o.deleting || o.finalizers != vertex.finalizers);
                let interesting = (owners_changed && !vertex.owners.is_empty()) || owner_deletion;
                graph.vertices.insert(uid.clone(), vertex);
                if interesting {
                    self.queue.add(&uid);
                }
            }
            Change::Deleted(meta) => {
                let Some(uid) = meta.uid.clone() else { return };
                if let Some(old) = graph.vertices.remove(&uid) {
                    for owner in &old.owners {
                        if let Some(set) = graph.dependents.get_mut(&owner.uid) {
                            set.remove(&uid);
                        }
                        if graph.vertices.get(&owner.uid).is_some_and(|o| o.deleting) {
                            self.queue.add(&owner.uid.clone());
                        }
                    }
                }
                for dependent in graph.dependents.get(&uid).into_iter().flatten() {
                    self.queue.add(&dependent.clone());
                }
            }
            Change::Resynced => {
                // Owners deleted while a watch was down produced no deletion: re-check everyone.
                for (uid, vertex) in &graph.vertices {
                    if !vertex.owners.is_empty() || vertex.deleting {
                        self.queue.add(&uid.clone());
                    }
                }
            }
        }
    }

    fn api(&self, kind: usize, namespace: Option<&str>) -> Api<DynamicObject> {
        let k = &self.kinds[kind];
        match namespace.filter(|_| k.namespaced) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &k.resource),
            None => Api::all_with(self.client.clone(), &k.resource),
        }
    }

    fn kind_of(&self, owner: &OwnerReference) -> Option<usize> {
        self.position(&owner.kind, &owner.api_version)
    }

    /// The number `observe` takes for objects of `resource`, if the collector tracks it.
    pub(crate) fn kind_index(&self, resource: &ApiResource) -> Option<usize> {
        self.position(&resource.kind, &resource.api_version)
    }

    fn position(&self, kind: &str, api_version: &str) -> Option<usize> {
        self.kinds
            .iter()
            .position(|k| k.resource.kind == kind && k.resource.api_version == api_version)
    }

    /// Whether the owner exists: known to the graph, or confirmed by a live read. Owners of kinds
    /// the collector does not track are assumed to exist.
    async fn owner_exists(&self, owner: &OwnerReference, namespace: Option<&str>) -> Result<bool> {
        if self
            .graph
            .lock_or_recover()
            .vertices
            .contains_key(&owner.uid)
        {
            return Ok(true);
        }
        let Some(kind) = self.kind_of(owner) else {
            return Ok(true);
        };
        let api = self.api(kind, namespace);
        let live = with_retry("get owner", || api.get_opt(&owner.name)).await?;
        Ok(live.is_some_and(|o| o.metadata.uid.as_deref() == Some(owner.uid.as_str())))
    }

    /// Whether every owner of `vertex` is in the graph and none is in a foreground deletion: the
    /// dependent stays, and there is nothing to read. As in the upstream collector, only a
    /// dependent with an owner the graph does not know, or whose owner is being deleted, is
    /// looked at on the server; a later change of an owner or of the owner references queues the
    /// dependent again.
    fn owners_known_and_staying(&self, vertex: &Vertex) -> bool {
        let graph = self.graph.lock_or_recover();
        vertex.owners.iter().all(|owner| {
            graph.vertices.get(&owner.uid).is_some_and(|o| {
                !(o.deleting && o.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER))
            })
        })
    }

    /// Examines one object: as a deleting owner, then as a dependent.
    pub(crate) async fn sync(&self, uid: String) -> Result<Next> {
        let Some(vertex) = self.graph.lock_or_recover().vertices.get(&uid).cloned() else {
            return Ok(Next::Done);
        };
        if vertex.deleting {
            let waiting = self.finish_owner_deletion(&uid, &vertex).await?;
            return Ok(if waiting {
                Next::After(OWNER_RECHECK)
            } else {
                Next::Done
            });
        }
        if vertex.owners.is_empty() || self.owners_known_and_staying(&vertex) {
            return Ok(Next::Done);
        }
        self.settle_dependent(&uid, vertex).await?;
        Ok(Next::Done)
    }

    /// Decides on a dependent and carries the verdict out. The graph may lag behind (an owner
    /// reference may have been removed a moment ago): the decision is on the live object, as the
    /// upstream collector makes it.
    async fn settle_dependent(&self, uid: &str, mut vertex: Vertex) -> Result<()> {
        let api = self.api(vertex.kind, vertex.namespace.as_deref());
        let action = format!("get {}", vertex.name);
        let Some(live) = with_retry(&action, || api.get_opt(&vertex.name)).await? else {
            return Ok(());
        };
        if live.metadata.uid.as_deref() != Some(uid) || live.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        vertex.owners = live.metadata.owner_references.unwrap_or_default();
        let mut exists = HashMap::new();
        for owner in &vertex.owners {
            let present = self
                .owner_exists(owner, vertex.namespace.as_deref())
                .await?;
            exists.insert(owner.uid.clone(), present);
        }
        match verdict(&vertex.owners, &|o| {
            exists.get(&o.uid).copied().unwrap_or(true)
        }) {
            Verdict::Keep => {
                if self.blocks_foreground_owner(&vertex) {
                    self.delete(&api, &vertex.name, uid, PropagationPolicy::Foreground)
                        .await?;
                }
            }
            Verdict::Delete => {
                tracing::debug!(object = %vertex.name, "Deleting object whose owners are gone");
                self.delete(&api, &vertex.name, uid, PropagationPolicy::Background)
                    .await?;
            }
            Verdict::DropOwners(gone) => self.drop_owners(&api, uid, &vertex, &gone).await?,
        }
        Ok(())
    }

    /// Whether the dependent blocks an owner that is in a foreground deletion.
    fn blocks_foreground_owner(&self, vertex: &Vertex) -> bool {
        let graph = self.graph.lock_or_recover();
        vertex.owners.iter().any(|o| {
            o.block_owner_deletion == Some(true)
                && graph.vertices.get(&o.uid).is_some_and(|v| {
                    v.deleting && v.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER)
                })
        })
    }

    /// Removes the references to the owners in `gone` from the dependent; a dependent already
    /// gone is fine.
    async fn drop_owners(
        &self,
        api: &Api<DynamicObject>,
        uid: &str,
        vertex: &Vertex,
        gone: &[String],
    ) -> Result<()> {
        let remaining: Vec<&OwnerReference> = vertex
            .owners
            .iter()
            .filter(|o| !gone.contains(&o.uid))
            .collect();
        let patch = serde_json::json!({ "metadata": { "ownerReferences": remaining, "uid": uid } });
        let action = format!("drop absent owners of {}", vertex.name);
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        match with_retry(&action, || api.patch(&vertex.name, &params, &patch)).await {
            Ok(_) => Ok(()),
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn delete(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        uid: &str,
        policy: PropagationPolicy,
    ) -> Result<()> {
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let action = format!("delete dependent {name}");
        match with_retry(&action, || api.delete(name, &params)).await {
            Ok(_) => Ok(()),
            Err(ActorError::Api { source, .. })
                if is_not_found(&source) || source.to_string().contains("precondition") =>
            {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// The dependents of an owner as the API server has them now. The graph is not enough here:
    /// a dependent created just before its owner's deletion may not have reached it yet.
    async fn live_dependents(&self, uid: &str, owner: &Vertex) -> Result<Vec<(String, Vertex)>> {
        let mut found = Vec::new();
        for (index, kind) in self.kinds.iter().enumerate() {
            let namespace = owner.namespace.as_deref().filter(|_| kind.namespaced);
            let api = self.api(index, namespace);
            let action = format!("list {} dependents", kind.resource.plural);
            let params = ListParams::default();
            let list = with_retry(&action, || api.list(&params)).await?;
            for object in list.items {
                let owners = object.metadata.owner_references.clone().unwrap_or_default();
                if !owners.iter().any(|o| o.uid == uid) {
                    continue;
                }
                let dep_uid = object.metadata.uid.clone().unwrap_or_default();
                found.push((
                    dep_uid,
                    Vertex {
                        kind: index,
                        namespace: object.metadata.namespace.clone(),
                        name: object.metadata.name.clone().unwrap_or_default(),
                        owners,
                        deleting: object.metadata.deletion_timestamp.is_some(),
                        finalizers: object.metadata.finalizers.clone().unwrap_or_default(),
                    },
                ));
            }
        }
        Ok(found)
    }

    /// Foreground: delete blocking dependents, drop the finalizer once none is left.
    /// Orphan: remove this owner from its dependents, then drop the finalizer.
    async fn finish_owner_deletion(&self, uid: &str, owner: &Vertex) -> Result<bool> {
        let dependents = self.live_dependents(uid, owner).await?;
        let finalizer = if owner.finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
            for (dep_uid, dep) in &dependents {
                let remaining: Vec<&OwnerReference> =
                    dep.owners.iter().filter(|o| o.uid != uid).collect();
                let patch = serde_json::json!({ "metadata": { "ownerReferences": remaining, "uid": dep_uid } });
                let api = self.api(dep.kind, dep.namespace.as_deref());
                let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
                match with_retry("orphan dependent", || api.patch(&dep.name, &params, &patch)).await
                {
                    Ok(_) => {}
                    Err(ActorError::Api { source, .. }) if is_not_found(&source) => {}
                    Err(error) => return Err(error),
                }
            }
            ORPHAN_FINALIZER
        } else if owner.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
            let mut blocking = false;
            for (dep_uid, dep) in &dependents {
                let blocks = dep
                    .owners
                    .iter()
                    .any(|o| o.uid == uid && o.block_owner_deletion == Some(true));
                blocking |= blocks;
                if !dep.deleting {
                    let api = self.api(dep.kind, dep.namespace.as_deref());
                    self.delete(&api, &dep.name, dep_uid, PropagationPolicy::Foreground)
                        .await?;
                }
            }
            if blocking {
                return Ok(true);
            }
            FOREGROUND_FINALIZER
        } else {
            return Ok(false);
        };
        let api = self.api(owner.kind, owner.namespace.as_deref());
        let finalizers: Vec<&String> = owner
            .finalizers
            .iter()
            .filter(|f| f.as_str() != finalizer)
            .collect();
        let patch = serde_json::json!({ "metadata": { "finalizers": finalizers, "uid": uid } });
        let action = format!("remove {finalizer} finalizer of {}", owner.name);
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        match with_retry(&action, || api.patch(&owner.name, &params, &patch)).await {
            Ok(_) => Ok(false),
            Err(ActorError::Api { source, .. }) if is_not_found(&source) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests;
