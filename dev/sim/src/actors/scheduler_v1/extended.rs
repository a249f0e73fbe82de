//! Extended resources backed by DRA (KEP 5004, gate `DRAExtendedResource`), as the 1.36+
//! `DynamicResources` plugin handles them (`extendeddynamicresources.go` of
//! `pkg/scheduler/framework/plugins/dynamicresources`): a container asking in
//! `resources.requests` for a `DeviceClass`'s `spec.extendedResourceName`, or for the implicit
//! `deviceclass.resource.kubernetes.io/<class>`, gets its devices through a claim the scheduler
//! makes for the pod: one `ExactCount` request per container and resource
//! (`container-<i>-request-<j>`, `<i>` counting init containers first, `<j>` the resource's index
//! among the container's sorted request names), with the request mappings the pod's
//! `status.extendedResourceClaimStatus` records. A name no class maps (or any such name while the
//! gate is off) is what `NodeResourcesFit` says of a resource no node has: `Insufficient NAME`.
//! Simulated nodes have no extended resources of their own, so every mapped name goes to DRA.
//!
//! Pure: the caller passes the pod and the classes, and does the writes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use serde_json::{json, Value};

use super::explain;
use crate::actors::scheduler_v1alpha2::explain::{fit_error, node_reasons};
use dra_types::resource_v1::{DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest};

/// The annotation of the claim the scheduler makes (`ExtendedResourceClaimAnnotation`).
pub const CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// The prefix of a class's implicit extended resource name (`ResourceDeviceClassPrefix`).
pub const IMPLICIT_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// The name the claim has in a cycle before it is created (`specialClaimInMemName`).
pub const IN_MEMORY_NAME: &str = "<extended-resources>";

/// One container's use of one request of the claim (`ContainerExtendedResourceRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The container.
    pub container: String,
    /// The extended resource name it asked for.
    pub resource: String,
    /// The claim's request that serves it.
    pub request: String,
}

/// The claim the scheduler makes for a pod's extended resources.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedClaim {
    /// Its `spec.devices`.
    pub spec: DeviceClaim,
    /// What each container gets from it.
    pub mappings: Vec<Mapping>,
}

/// What a pod's extended resources ask of the scheduler.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PodExtended {
    /// Nothing (no such request, or none with a quantity).
    #[default]
    None,
    /// A claim to allocate with the pod's other claims.
    Claim(ExtendedClaim),
    /// Names no class maps: no node fits (`Insufficient NAME`, sorted).
    Unmapped(Vec<String>),
}

/// Whether `name` is an extended resource name DRA may back (`IsDRAExtendedResourceName`): a
/// name with a domain outside `kubernetes.io` and not a quota's `requests.` name, or the
/// implicit class prefix.
pub fn is_dra_name(name: &str) -> bool {
    name.starts_with(IMPLICIT_PREFIX)
        || (name.contains('/')
            && !name.contains("kubernetes.io/")
            && !name.starts_with("requests."))
}

/// The class that maps `name`: the newest class naming it as `extendedResourceName` (ties by
/// name), else the class named after the implicit prefix.
pub fn class_for<'a>(name: &str, classes: &'a [Arc<DeviceClass>]) -> Option<&'a DeviceClass> {
    let explicit = classes
        .iter()
        .filter(|c| c.spec.extended_resource_name.as_deref() == Some(name))
        .max_by(|a, b| {
            let created = |c: &DeviceClass| c.metadata.creation_timestamp.clone();
            created(a)
                .cmp(&created(b))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        });
    let implicit = || {
        let class = name.strip_prefix(IMPLICIT_PREFIX)?;
        classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(class))
    };
    explicit.or_else(implicit).map(AsRef::as_ref)
}

/// A whole count from a quantity text (`AsInt64`): `2`, `2k`, `1e3`; none for fractions.
fn count(quantity: &str) -> Option<i64> {
    let q = super::quantity::Quantity::parse(quantity).ok()?;
    q.as_integer()
}

/// The containers in the order request names count them: init containers, then containers.
fn containers(pod: &Pod) -> (Vec<&Container>, usize) {
    let spec = pod.spec.as_ref();
    let init: Vec<&Container> = spec
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .collect();
    let inits = init.len();
    let all = init
        .into_iter()
        .chain(spec.into_iter().flat_map(|s| s.containers.iter()))
        .collect();
    (all, inits)
}

fn requests(container: &Container) -> BTreeMap<String, String> {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .map(|r| r.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

/// What the pod's extended resources ask for, with the gate `enabled` or not.
pub fn plan(pod: &Pod, classes: &[Arc<DeviceClass>], enabled: bool) -> PodExtended {
    let (containers, inits) = containers(pod);
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let mut unmapped: BTreeSet<String> = BTreeSet::new();
    for container in &containers {
        for (name, quantity) in requests(container) {
            if !is_dra_name(&name) || count(&quantity).unwrap_or(1) == 0 {
                continue;
            }
            if enabled && class_for(&name, classes).is_some() {
                wanted.insert(name);
            } else {
                unmapped.insert(name);
            }
        }
    }
    if !unmapped.is_empty() {
        return PodExtended::Unmapped(unmapped.into_iter().collect());
    }
    if wanted.is_empty() {
        return PodExtended::None;
    }
    let mut spec = DeviceClaim::default();
    let mut mappings = Vec::new();
    for name in &wanted {
        let Some(class) = class_for(name, classes) else {
            continue;
        };
        let class = class.metadata.name.clone().unwrap_or_default();
        let (mut reqs, maps) = for_resource(&containers, inits, name, &class);
        spec.requests.append(&mut reqs);
        mappings.extend(maps);
    }
    spec.requests.sort_by(|a, b| a.name.cmp(&b.name));
    PodExtended::Claim(ExtendedClaim { spec, mappings })
}

/// `createResourceRequestAndMappings`: the request container `index` needs for `resource`
/// beyond what the `reusable` requests (of later long-lived containers) give it.
fn container_request(
    index: usize,
    container: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<Mapping>) {
    let requests = requests(container);
    let Some(wanted) = requests.get(resource).and_then(|q| count(q)) else {
        return (None, Vec::new());
    };
    if wanted == 0 {
        return (None, Vec::new());
    }
    let mapping = |request: &str| Mapping {
        container: container.name.clone(),
        resource: resource.to_owned(),
        request: request.to_owned(),
    };
    let mut mappings = Vec::new();
    let mut sum = 0;
    for request in reusable.iter().flatten() {
        sum += request.exactly.as_ref().and_then(|e| e.count).unwrap_or(1);
        mappings.push(mapping(&request.name));
        if sum >= wanted {
            return (None, mappings);
        }
    }
    // The position among the container's request names, sorted.
    let position = requests.keys().position(|k| k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{position}");
    mappings.push(mapping(&name));
    let request = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_owned(),
            allocation_mode: Some("ExactCount".to_owned()),
            count: Some(wanted - sum),
            ..ExactDeviceRequest::default()
        }),
        ..DeviceRequest::default()
    };
    (Some(request), mappings)
}

/// The requests and mappings of one resource over all containers: each long-lived container
/// (regular containers and restartable init containers) its own request; init containers that
/// run to completion reuse the requests of the long-lived ones after them and share the largest
/// of their own.
fn for_resource(
    containers: &[&Container],
    inits: usize,
    resource: &str,
    class: &str,
) -> (Vec<DeviceRequest>, Vec<Mapping>) {
    let short_lived =
        |i: usize| i < inits && containers[i].restart_policy.as_deref() != Some("Always");
    let mut long: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
    let mut long_mappings = Vec::new();
    for (i, container) in containers
        .iter()
        .enumerate()
        .filter(|(i, _)| !short_lived(*i))
    {
        let (request, maps) = container_request(i, container, resource, class, &[]);
        long[i] = request;
        long_mappings.extend(maps);
    }
    let mut largest: Option<DeviceRequest> = None;
    let mut short_names = BTreeSet::new();
    let mut short_mappings = Vec::new();
    for (i, container) in containers
        .iter()
        .enumerate()
        .filter(|(i, _)| short_lived(*i))
    {
        let (request, maps) = container_request(i, container, resource, class, &long[i..]);
        if let Some(request) = request {
            short_names.insert(request.name.clone());
            let counted = |r: &DeviceRequest| r.exactly.as_ref().and_then(|e| e.count);
            if largest
                .as_ref()
                .is_none_or(|l| counted(l) < counted(&request))
            {
                largest = Some(request);
            }
        }
        short_mappings.extend(maps);
    }
    if let Some(largest) = &largest {
        for mapping in &mut short_mappings {
            if short_names.contains(&mapping.request) {
                mapping.request.clone_from(&largest.name);
            }
        }
    }
    let requests = largest
        .into_iter()
        .chain(long.into_iter().flatten())
        .collect();
    long_mappings.extend(short_mappings);
    (requests, long_mappings)
}

/// The claim as the scheduler creates it for `pod`: `generateName: <pod>-extended-resources-`,
/// the annotation, the pod as controller owner, and `spec`.
pub fn claim_object(pod: &Pod, claim: &ExtendedClaim) -> Value {
    let meta = &pod.metadata;
    json!({
        "apiVersion": dra_types::resource_v1::API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": format!("{}-extended-resources-", meta.name.as_deref().unwrap_or_default()),
            "namespace": meta.namespace,
            "annotations": {CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                "name": meta.name, "uid": meta.uid, "controller": true}],
        },
        "spec": {"devices": claim.spec},
    })
}

/// The pod status patch recording the claim (`status.extendedResourceClaimStatus`).
pub fn status_patch(claim_name: &str, mappings: &[Mapping]) -> Value {
    let mappings: Vec<Value> = mappings
        .iter()
        .map(|m| {
            json!({"containerName": m.container, "resourceName": m.resource,
                "requestName": m.request})
        })
        .collect();
    json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": claim_name}}})
}

/// The key the claim has in a cycle, before it exists.
pub fn in_memory_key(pod: &Pod) -> String {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    format!("{namespace}/{IN_MEMORY_NAME}")
}

/// The node reason of a resource no node has (`NodeResourcesFit`).
pub fn insufficient(name: &str) -> String {
    format!("Insufficient {name}")
}

/// The message of a cycle in which no node has the `names` no class maps: each schedulable node
/// fails `NodeResourcesFit` with `Insufficient NAME` per name, which preemption could cure in
/// principle (`No preemption victims found for incoming pod`; simulated pods have no priority
/// to preempt by), while cordoned nodes are unresolvable. The DRA plugin's `PostFilter` adds
/// its text only when the pod has claims of its own.
pub fn unmapped_failure(nodes: &[Arc<Node>], names: &[String], has_claims: bool) -> String {
    let mut reasons: Vec<String> = Vec::new();
    let mut preemption: Vec<&str> = Vec::new();
    for node in nodes {
        if super::plan::schedulable(node) {
            reasons.extend(names.iter().map(|n| insufficient(n)));
            preemption.push(NO_VICTIMS);
        } else {
            reasons.push(explain::NODE_UNSCHEDULABLE.to_owned());
            preemption.push(NOT_HELPFUL);
        }
    }
    let reasons: Vec<&str> = reasons.iter().map(String::as_str).collect();
    let count = nodes.len();
    let preemption = format!(
        "preemption: 0/{count} nodes are available: {}.",
        node_reasons(&preemption)
    );
    let post_filter = if has_claims {
        format!("{}, {preemption}", explain::POST_FILTER_STILL)
    } else {
        preemption
    };
    fit_error(count, &node_reasons(&reasons), &post_filter)
}

/// Preemption's verdict on a node whose failure evicting pods could cure.
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Preemption's verdict on a node no eviction helps.
const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

#[cfg(test)]
mod tests;
