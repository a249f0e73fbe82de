//! Device taints and the tolerations of requests (a taint keeps claims that do not tolerate it
//! off the device, `NoExecute` also evicts their pods), and `DeviceTaintRule` (cluster-scoped):
//! one taint put on every device its selector matches, with the status the eviction controller
//! reports; [`tolerates`], [`prevents_allocation`] and [`rule_selects`] decide which taints
//! keep a device from a request, as the scheduler and the eviction controller read them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::ClusterResourceScope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{api_version, nullable, v1_resource};

/// A taint's effect that keeps new pods off (the scheduler does not allocate the device).
pub const NO_SCHEDULE: &str = "NoSchedule";
/// A taint's effect that also evicts the pods already using the device.
pub const NO_EXECUTE: &str = "NoExecute";
/// A purely informational taint.
pub const EFFECT_NONE: &str = "None";
/// Every valid taint effect, in the API's order.
pub const TAINT_EFFECTS: [&str; 3] = [EFFECT_NONE, NO_EXECUTE, NO_SCHEDULE];
/// A toleration matching a taint's key and value.
pub const OP_EQUAL: &str = "Equal";
/// A toleration matching a taint's key whatever its value.
pub const OP_EXISTS: &str = "Exists";
/// At most this many taints per device.
pub const MAX_TAINTS_PER_DEVICE: usize = 4;
/// At most this many tolerations per request.
pub const MAX_TOLERATIONS: usize = 16;

/// A taint of a device (in a slice) or of a `DeviceTaintRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaint {
    /// The key (a label name).
    #[serde(default)]
    pub key: String,
    /// The value (a label value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `NoExecute` or `None`.
    #[serde(default)]
    pub effect: String,
    /// When the taint was added (or, in a rule, its effect changed); set by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

/// A toleration of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceToleration {
    /// The taint key it applies to; empty for every key (with `Exists`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (the default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// The value it matches (`Equal` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The effect it matches; empty for every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// How long a `NoExecute` taint is tolerated; unset is forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// A `DeviceTaintRule`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRule {
    /// `resource.k8s.io/v1` when stored (the rule is also served in `v1beta2` and `v1alpha3`).
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `DeviceTaintRule`.
    #[serde(default = "DeviceTaintRule::kind_name")]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The devices and the taint.
    #[serde(default)]
    pub spec: DeviceTaintRuleSpec,
    /// What the eviction controller reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeviceTaintRuleStatus>,
}

v1_resource!(DeviceTaintRule, "devicetaintrules", ClusterResourceScope, { spec, status });

/// `DeviceTaintRule.spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRuleSpec {
    /// Which devices; unset matches none, empty matches all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_selector: Option<DeviceTaintSelector>,
    /// The taint put on them.
    #[serde(default)]
    pub taint: DeviceTaint,
}

/// The devices a rule applies to: every criterion set must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintSelector {
    /// The slice's `spec.driver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The pool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The device's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// `DeviceTaintRule.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRuleStatus {
    /// `EvictionInProgress` and others (at most 8).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Whether `toleration` tolerates `taint` (`ToleratesTaint`): an empty effect matches every
/// effect, an empty key every key; `Equal` (also the empty operator) needs the same value,
/// `Exists` takes any value; an unknown operator tolerates nothing.
pub fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | OP_EQUAL => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        OP_EXISTS => true,
        _ => false,
    }
}

/// Whether one of `taints` keeps the device from a request with `tolerations`
/// (`taintPreventsAllocation`): a `NoSchedule` or `NoExecute` taint no toleration tolerates.
pub fn prevents_allocation<'t>(
    taints: impl IntoIterator<Item = &'t DeviceTaint>,
    tolerations: &[DeviceToleration],
) -> bool {
    taints.into_iter().any(|taint| {
        matches!(taint.effect.as_str(), NO_SCHEDULE | NO_EXECUTE)
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// Whether `rule` selects the device `driver/pool/device` (`ruleMatchesDevice`): a rule
/// without a selector selects nothing; each criterion it sets must match.
pub fn rule_selects(rule: &DeviceTaintRule, driver: &str, pool: &str, device: &str) -> bool {
    let Some(selector) = &rule.spec.device_selector else {
        return false;
    };
    selector.driver.as_deref().is_none_or(|d| d == driver)
        && selector.pool.as_deref().is_none_or(|p| p == pool)
        && selector.device.as_deref().is_none_or(|d| d == device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_reads_and_writes_in_the_api_shape() {
        let stored = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "r"},
            "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "p", "device": "d"},
                "taint": {"key": "k", "value": "v", "effect": "NoExecute",
                    "timeAdded": "2026-01-01T00:00:00Z"}},
            "status": {"conditions": [{"type": "EvictionInProgress", "status": "False",
                "reason": "Done", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let rule: DeviceTaintRule = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(rule.spec.taint.effect, NO_EXECUTE);
        assert_eq!(serde_json::to_value(&rule).unwrap(), stored);
    }
}
