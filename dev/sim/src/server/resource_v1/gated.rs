//! The fields of `resource.k8s.io/v1` that belong to a feature gate, and how the API server drops
//! them when the gate is off (`dropDisabledFields` of `pkg/registry/resource/*/strategy.go`): a
//! new object loses them; an update loses them only when the stored object did not use the
//! feature already (so a field written while the gate was on survives turning it off).
//!
//! A gated feature is one row of [`GATED`]: the gates it needs, the kind, and the paths of its
//! fields. Pure functions over the stored JSON; no store or HTTP dependencies.

use serde_json::Value;

use crate::{FeatureGate, FeatureGates};

/// A path into an object: field names, `[]` for every item of a list and `{}` for every value
/// of a map.
type Path = &'static [&'static str];

/// One gated feature of one kind.
struct Gated {
    /// The gates that must all be on.
    gates: &'static [FeatureGate],
    /// The kind whose fields these are.
    kind: &'static str,
    /// Where the fields are.
    paths: &'static [Path],
}

use FeatureGate as G;

const TAINT_GATES: &[FeatureGate] = &[G::DRADeviceTaints];
const BINDING_GATES: &[FeatureGate] = &[
    G::DRADeviceBindingConditions,
    G::DRAResourceClaimDeviceStatus,
];

/// The request fields of a claim spec under `prefix` (`spec` or `spec.spec`), for each gate.
macro_rules! claim_spec_rows {
    ($kind:literal, $($prefix:literal),*) => {
        [
            Gated {
                gates: &[G::DRAAdminAccess],
                kind: $kind,
                paths: &[&[$($prefix,)* "devices", "requests", "[]", "exactly", "adminAccess"]],
            },
            Gated {
                gates: &[G::DRAPrioritizedList],
                kind: $kind,
                paths: &[&[$($prefix,)* "devices", "requests", "[]", "firstAvailable"]],
            },
            Gated {
                gates: TAINT_GATES,
                kind: $kind,
                paths: &[
                    &[$($prefix,)* "devices", "requests", "[]", "exactly", "tolerations"],
                    &[$($prefix,)* "devices", "requests", "[]", "firstAvailable", "[]", "tolerations"],
                ],
            },
            Gated {
                gates: &[G::DRAConsumableCapacity],
                kind: $kind,
                paths: &[
                    &[$($prefix,)* "devices", "requests", "[]", "exactly", "capacity"],
                    &[$($prefix,)* "devices", "requests", "[]", "firstAvailable", "[]", "capacity"],
                    &[$($prefix,)* "devices", "constraints", "[]", "distinctAttribute"],
                ],
            },
        ]
    };
}

const CLAIM_SPEC: [Gated; 4] = claim_spec_rows!("ResourceClaim", "spec");
const TEMPLATE_SPEC: [Gated; 4] = claim_spec_rows!("ResourceClaimTemplate", "spec", "spec");

/// The path of a field of every allocation result of a claim.
macro_rules! result_field {
    ($field:literal) => {
        &["status", "allocation", "devices", "results", "[]", $field]
    };
}

/// The gated fields of slices, classes and claim status.
const GATED: &[Gated] = &[
    Gated {
        gates: TAINT_GATES,
        kind: "ResourceSlice",
        paths: &[&["spec", "devices", "[]", "taints"]],
    },
    Gated {
        gates: &[G::DRAPartitionableDevices],
        kind: "ResourceSlice",
        paths: &[
            &["spec", "sharedCounters"],
            &["spec", "perDeviceNodeSelection"],
            &["spec", "devices", "[]", "consumesCounters"],
            &["spec", "devices", "[]", "nodeName"],
            &["spec", "devices", "[]", "nodeSelector"],
            &["spec", "devices", "[]", "allNodes"],
        ],
    },
    Gated {
        gates: BINDING_GATES,
        kind: "ResourceSlice",
        paths: &[
            &["spec", "devices", "[]", "bindingConditions"],
            &["spec", "devices", "[]", "bindingFailureConditions"],
            &["spec", "devices", "[]", "bindsToNode"],
        ],
    },
    Gated {
        gates: &[G::DRAConsumableCapacity],
        kind: "ResourceSlice",
        paths: &[
            &["spec", "devices", "[]", "allowMultipleAllocations"],
            &["spec", "devices", "[]", "capacity", "{}", "requestPolicy"],
        ],
    },
    Gated {
        gates: &[G::DRAExtendedResource],
        kind: "DeviceClass",
        paths: &[&["spec", "extendedResourceName"]],
    },
    Gated {
        gates: &[G::DRAResourceClaimDeviceStatus],
        kind: "ResourceClaim",
        paths: &[&["status", "devices"]],
    },
    Gated {
        gates: &[G::DRAAdminAccess],
        kind: "ResourceClaim",
        paths: &[result_field!("adminAccess")],
    },
    Gated {
        gates: TAINT_GATES,
        kind: "ResourceClaim",
        paths: &[result_field!("tolerations")],
    },
    Gated {
        gates: BINDING_GATES,
        kind: "ResourceClaim",
        paths: &[
            result_field!("bindingConditions"),
            result_field!("bindingFailureConditions"),
            &["status", "allocation", "allocationTimestamp"],
        ],
    },
    Gated {
        gates: &[G::DRAConsumableCapacity],
        kind: "ResourceClaim",
        paths: &[
            result_field!("consumedCapacity"),
            result_field!("shareID"),
            &["status", "devices", "[]", "shareID"],
        ],
    },
];

fn rows() -> impl Iterator<Item = &'static Gated> {
    GATED.iter().chain(&CLAIM_SPEC).chain(&TEMPLATE_SPEC)
}

/// Whether any value at `path` below `v` is set.
fn uses(v: &Value, path: &[&str]) -> bool {
    let Some((head, rest)) = path.split_first() else {
        return !v.is_null();
    };
    match *head {
        "[]" => v
            .as_array()
            .is_some_and(|items| items.iter().any(|i| uses(i, rest))),
        "{}" => v
            .as_object()
            .is_some_and(|m| m.values().any(|i| uses(i, rest))),
        field => v.get(field).is_some_and(|child| uses(child, rest)),
    }
}

/// Removes every value at `path` below `v`.
fn remove(v: &mut Value, path: &[&str]) {
    match path {
        [] => {}
        [field] => {
            if let Some(map) = v.as_object_mut() {
                map.remove(*field);
            }
        }
        [head, rest @ ..] => match *head {
            "[]" => v
                .as_array_mut()
                .into_iter()
                .flatten()
                .for_each(|item| remove(item, rest)),
            "{}" => v
                .as_object_mut()
                .into_iter()
                .flat_map(|m| m.values_mut())
                .for_each(|item| remove(item, rest)),
            field => {
                if let Some(child) = v.get_mut(field) {
                    remove(child, rest);
                }
            }
        },
    }
}

/// Drops from `new` (an object of `kind`) the fields of the features whose gates are not all on
/// in `gates`, unless `old` (the stored object of an update) uses that feature already.
pub fn drop_disabled_fields(kind: &str, gates: FeatureGates, new: &mut Value, old: Option<&Value>) {
    for row in rows().filter(|r| r.kind == kind) {
        if row.gates.iter().all(|g| gates.enabled(*g)) {
            continue;
        }
        if old.is_some_and(|old| row.paths.iter().any(|p| uses(old, p))) {
            continue;
        }
        for path in row.paths {
            remove(new, path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KubernetesVersion;
    use serde_json::json;

    fn slice() -> Value {
        json!({"spec": {"driver": "d", "sharedCounters": [{"name": "s", "counters": {}}],
            "devices": [{"name": "a", "taints": [{"key": "k", "effect": "NoSchedule"}],
                "capacity": {"m": {"value": "1", "requestPolicy": {"default": "1"}}},
                "allowMultipleAllocations": true, "bindsToNode": true}]}})
    }

    #[test]
    fn a_new_slice_loses_the_fields_of_gates_off_in_1_35_and_keeps_them_in_1_36() {
        let mut new = slice();
        drop_disabled_fields(
            "ResourceSlice",
            KubernetesVersion::V1_35.facts().default_gates(),
            &mut new,
            None,
        );
        assert_eq!(
            new,
            json!({"spec": {"driver": "d", "devices": [{"name": "a", "capacity": {"m": {"value": "1"}}}]}})
        );
        let mut kept = slice();
        drop_disabled_fields(
            "ResourceSlice",
            KubernetesVersion::V1_36.facts().default_gates(),
            &mut kept,
            None,
        );
        assert_eq!(kept, slice());
    }

    #[test]
    fn an_update_keeps_a_disabled_field_the_stored_object_already_uses() {
        let gates = KubernetesVersion::V1_34.facts().default_gates();
        let old = json!({"spec": {"devices": [{"name": "a", "taints": [{"key": "x", "effect": "None"}]}]}});
        let mut new = slice();
        drop_disabled_fields("ResourceSlice", gates, &mut new, Some(&old));
        assert!(new["spec"]["devices"][0]["taints"].is_array());
        assert!(new["spec"].get("sharedCounters").is_none());
    }

    #[test]
    fn claim_tolerations_go_and_admin_access_stays_in_1_34() {
        let mut claim = json!({"spec": {"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "c", "adminAccess": true,
                "tolerations": [{"operator": "Exists"}]}},
            {"name": "b", "firstAvailable": [{"name": "s", "deviceClassName": "c",
                "tolerations": [{"operator": "Exists"}]}]}]}}});
        let gates = KubernetesVersion::V1_34.facts().default_gates();
        drop_disabled_fields("ResourceClaim", gates, &mut claim, None);
        let requests = &claim["spec"]["devices"]["requests"];
        assert_eq!(
            requests[0]["exactly"],
            json!({"deviceClassName": "c", "adminAccess": true})
        );
        assert_eq!(
            requests[1]["firstAvailable"][0],
            json!({"name": "s", "deviceClassName": "c"})
        );
        let mut template = json!({"spec": {"spec": claim["spec"].clone()}});
        template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = json!([{}]);
        drop_disabled_fields("ResourceClaimTemplate", gates, &mut template, None);
        assert!(
            template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
                .get("tolerations")
                .is_none()
        );
    }
}
