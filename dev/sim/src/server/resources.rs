//! The registry of served resources: the built-in kinds of this API server subset plus the custom
//! resources declared by `CustomResourceDefinitions`.
//!
//! Owns resource metadata only (names, kinds, scope, subresources, verbs); it must not depend on the
//! store, handlers or HTTP types.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{FeatureGates, KubernetesVersion, ServedApi};

/// Static description of one served resource (one group/version/plural).
// The flags mirror independent properties of Kubernetes resources; an enum would not fit.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`, `v1alpha2`.
    pub version: String,
    /// Plural resource name used in URLs.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind of a single object.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names for `kubectl`.
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Whether the `status` subresource is served.
    pub status: bool,
    /// Whether the pod `binding` subresource is served.
    pub binding: bool,
    /// Whether the resource is declared by a CRD (custom resources reject strategic merge patch).
    pub custom: bool,
    /// Whether a completed DELETE answers the deleted object rather than a `Status`: the
    /// registry's `ReturnDeletedObject` (`pkg/registry/<group>/<resource>/storage/storage.go`).
    pub return_deleted_object: bool,
    /// The release whose rules apply to the objects (pods' claim fields differ between 1.30 and
    /// 1.34).
    pub release: KubernetesVersion,
    /// The server's enabled DRA feature gates (which fields of `resource.k8s.io` it keeps).
    pub gates: FeatureGates,
}

impl ResourceInfo {
    /// Whether `api_version` is [`Self::api_version`], compared without building it.
    pub fn is_api_version(&self, api_version: &str) -> bool {
        if self.group.is_empty() {
            return api_version == self.version;
        }
        api_version
            .strip_prefix(self.group.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|version| version == self.version)
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Storage key shared by all versions of the resource: `group/plural` (events.k8s.io Events
    /// share the core Events' storage, as in Kubernetes).
    pub fn storage_key(&self) -> String {
        if self.group == "events.k8s.io" && self.plural == "events" {
            return "/events".into();
        }
        format!("{}/{}", self.group, self.plural)
    }

    /// The kind of the list type.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether `metadata.generation` is maintained (custom resources, CRDs, and the v1
    /// `DeviceClass` and `ResourceSlice`; the other built-in kinds served here do not track it).
    pub fn tracks_generation(&self) -> bool {
        self.custom
            || self.kind == "CustomResourceDefinition"
            || (super::resource_v1::handles(self)
                && super::resource_v1::tracks_generation(&self.kind))
    }

    /// Whether PUT must carry a resourceVersion (custom resources and CRDs do not allow
    /// unconditional updates).
    pub fn requires_resource_version_on_update(&self) -> bool {
        self.custom || self.kind == "CustomResourceDefinition"
    }
}

/// The verbs served on the main resource of every kind.
pub const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short_names: &[&str],
    status: bool,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: short_names.iter().map(|s| (*s).to_string()).collect(),
        categories: Vec::new(),
        status,
        binding: false,
        custom: false,
        return_deleted_object: false,
        release: KubernetesVersion::default(),
        gates: FeatureGates::default(),
    }
}

/// The built-in resources a server serving `api` has from the start: 1.30 serves
/// `resource.k8s.io/v1alpha2` (`v1alpha2`), the later releases the `resource.k8s.io` versions
/// and kinds of `api` (`v1` by default) instead.
pub fn builtin_resources_of(api: &ServedApi) -> Vec<ResourceInfo> {
    let r = dra_types::resource_v1::GROUP;
    let mut resources = builtin_resources();
    if api.release.serves_v1() {
        resources.retain(|info| info.group != r);
        for served in &api.resource_versions {
            for (plural, kind, namespaced, status) in super::resource_v1::RESOURCES {
                if served.kinds.contains(&kind) {
                    let mut info =
                        builtin(r, served.version, plural, kind, namespaced, &[], status);
                    info.return_deleted_object = true;
                    resources.push(info);
                }
            }
        }
    }
    for info in &mut resources {
        info.release = api.release;
        info.gates = api.gates;
    }
    resources
}

/// The built-in resources of 1.30.
// A data table; splitting it would only scatter the list.
#[allow(clippy::too_many_lines)]
pub fn builtin_resources() -> Vec<ResourceInfo> {
    let mut pods = builtin("", "v1", "pods", "Pod", true, &["po"], true);
    pods.binding = true;
    pods.categories = vec!["all".into()];
    let r = "resource.k8s.io";
    let mut resources = vec![
        builtin("", "v1", "namespaces", "Namespace", false, &["ns"], true),
        builtin("", "v1", "nodes", "Node", false, &["no"], true),
        pods,
        builtin("", "v1", "events", "Event", true, &["ev"], false),
        builtin("", "v1", "configmaps", "ConfigMap", true, &["cm"], false),
        builtin(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            true,
            &["ev"],
            false,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            false,
        ),
        builtin(
            r,
            "v1alpha2",
            "resourceclasses",
            "ResourceClass",
            false,
            &[],
            false,
        ),
        builtin(
            r,
            "v1alpha2",
            "resourceclaims",
            "ResourceClaim",
            true,
            &[],
            true,
        ),
        builtin(
            r,
            "v1alpha2",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            true,
            &[],
            false,
        ),
        builtin(
            r,
            "v1alpha2",
            "podschedulingcontexts",
            "PodSchedulingContext",
            true,
            &[],
            true,
        ),
        builtin(
            r,
            "v1alpha2",
            "resourceslices",
            "ResourceSlice",
            false,
            &[],
            false,
        ),
        builtin(
            r,
            "v1alpha2",
            "resourceclaimparameters",
            "ResourceClaimParameters",
            true,
            &[],
            false,
        ),
        builtin(
            r,
            "v1alpha2",
            "resourceclassparameters",
            "ResourceClassParameters",
            true,
            &[],
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
        ),
    ];
    // Upstream registries with `ReturnDeletedObject: true`: namespaces, pods and every
    // resource.k8s.io/v1alpha2 resource; nodes, events, configmaps, leases, CRDs and custom
    // resources answer a Status.
    for info in &mut resources {
        info.return_deleted_object = info.group == r
            || (info.group.is_empty() && matches!(info.plural.as_str(), "namespaces" | "pods"));
    }
    resources
}

/// All served resources, indexed by group/version/plural. Cheap to clone (shared snapshot).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_path: BTreeMap<(String, String, String), Arc<ResourceInfo>>,
    release: KubernetesVersion,
}

impl Registry {
    /// A registry with the built-in resources `release` serves by default.
    #[cfg(test)]
    pub fn with_builtins_of(release: KubernetesVersion) -> Self {
        Self::serving(&ServedApi::defaults(release))
    }

    /// A registry with the built-in resources of `api`.
    pub fn serving(api: &ServedApi) -> Self {
        let mut reg = Self {
            release: api.release,
            ..Self::default()
        };
        for info in builtin_resources_of(api) {
            reg.insert(info);
        }
        reg
    }

    /// The release the server plays.
    pub fn release(&self) -> KubernetesVersion {
        self.release
    }

    /// Every served resource (built-in and custom), by group, version and plural: what this
    /// server serves, for discovery and schema documents.
    pub fn served(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.by_path.values()
    }

    /// Adds or replaces a resource.
    pub fn insert(&mut self, info: ResourceInfo) {
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        );
        self.by_path.insert(key, Arc::new(info));
    }

    /// Removes every version of `group/plural`.
    pub fn remove(&mut self, group: &str, plural: &str) {
        self.by_path
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    /// Looks up a resource by URL parts.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        // A scan of a few dozen entries, compared without building an owned key.
        self.by_path
            .iter()
            .find(|((g, v, p), _)| p == plural && v == version && g == group)
            .map(|(_, info)| info.clone())
    }

    /// Any served version of `group/plural` (for in-process reads).
    pub fn find_any_version(&self, group: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.by_path
            .iter()
            .find(|((g, _, p), _)| g == group && p == plural)
            .map(|(_, v)| v.clone())
    }

    /// Resources of one group/version.
    pub fn resources_of(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.served()
            .filter(|info| info.group == group && info.version == version)
            .cloned()
            .collect()
    }

    /// Groups (excluding core) with their versions, in a stable order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for (g, v) in self.served().map(|info| (&info.group, &info.version)) {
            if g.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(name, _)| name == g) {
                Some((_, versions)) if !versions.contains(v) => versions.push(v.clone()),
                Some(_) => {}
                None => out.push((g.clone(), vec![v.clone()])),
            }
        }
        for (_, versions) in &mut out {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

/// The order of API versions in discovery (`version.CompareKubeAwareVersionStrings`): GA before
/// beta before alpha, and a higher number first within each; a version of another form last.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let Ok(major) = rest[..digits].parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits..];
    let stage = |prefix: &str, rank: u8| {
        tail.strip_prefix(prefix)
            .and_then(|n| n.parse::<u32>().ok())
            .map(|minor| (rank, major, minor))
    };
    if tail.is_empty() {
        return (3, major, 0);
    }
    stage("beta", 2)
        .or_else(|| stage("alpha", 1))
        .unwrap_or((0, 0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_are_listed_ga_then_beta_then_alpha() {
        let mut versions = vec!["v1alpha3", "v1beta1", "v1", "v1beta2", "v2alpha1", "x"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            ["v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha3", "x"]
        );
    }

    #[test]
    fn api_version_is_recognised_without_being_built() {
        for info in builtin_resources() {
            let own = info.api_version();
            assert!(info.is_api_version(&own), "{own}");
            assert!(!info.is_api_version(&format!("{own}x")), "{own}");
            assert!(!info.is_api_version(&format!("x{own}")), "{own}");
            assert!(!info.is_api_version(&info.group), "{own}");
            assert!(!info.is_api_version(""), "{own}");
        }
    }
}
