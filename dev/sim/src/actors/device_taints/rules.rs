//! Where the simulated control plane reads `DeviceTaintRule`s from: which gates of a served
//! API make taints and rules count ([`taint_gates`]), and the rule as the actors' informers
//! decode it in each `resource.k8s.io` version that serves the kind ([`RuleVersion`]; the
//! `v1beta2` and `v1alpha3` rule has the `v1` shape, so each is the shared model under another
//! path).
//!
//! Types and lookups only; no I/O.

use std::borrow::Cow;
use std::sync::Arc;

use kube::runtime::reflector::Store;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ClusterResourceScope;
use serde::Deserialize;

use super::TaintGates;
use crate::release::FeatureGate;
use crate::ServedApi;
use dra_types::resource_v1::{DeviceTaintRule, GROUP};

/// The kind's name in the release table.
const KIND: &str = "DeviceTaintRule";

/// The `resource.k8s.io` versions that can serve the rules, in the order the actors prefer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleVersion {
    /// GA (1.37).
    V1,
    /// Beta (1.36, with `--runtime-config`).
    V1beta2,
    /// Alpha (1.34 to 1.37, with `--runtime-config`).
    V1alpha3,
}

impl RuleVersion {
    /// The version's name.
    pub fn name(self) -> &'static str {
        match self {
            RuleVersion::V1 => "v1",
            RuleVersion::V1beta2 => "v1beta2",
            RuleVersion::V1alpha3 => "v1alpha3",
        }
    }

    fn of(name: &str) -> Option<Self> {
        [RuleVersion::V1, RuleVersion::V1beta2, RuleVersion::V1alpha3]
            .into_iter()
            .find(|v| v.name() == name)
    }
}

/// What the taint features of `served` switch on, and the version the rules are read in.
/// Rules count where `DRADeviceTaints` is on, the rules gate too (from 1.35; in 1.34 the
/// taints gate covered the rules) and a served version has the kind.
pub fn taint_gates(served: &ServedApi) -> (TaintGates, Option<RuleVersion>) {
    let taints = served.gates.enabled(FeatureGate::DRADeviceTaints);
    let rules_gate = if served.release.minor() < 35 {
        taints
    } else {
        served.gates.enabled(FeatureGate::DRADeviceTaintRules)
    };
    let version = served
        .resource_versions
        .iter()
        .filter(|v| v.kinds.contains(&KIND))
        .filter_map(|v| RuleVersion::of(v.version))
        .min_by_key(|v| *v as u8);
    let version = version.filter(|_| taints && rules_gate);
    let gates = TaintGates {
        taints,
        rules: version.is_some(),
    };
    (gates, version)
}

/// What the actors read taints from: the gates, and the rule informer's store where rules
/// count. Cheap to clone.
#[derive(Clone, Default)]
pub struct TaintSource {
    /// The gates in force.
    pub gates: TaintGates,
    /// The rules, where they count.
    pub rules: Option<Store<DeviceTaintRule>>,
}

impl TaintSource {
    /// The rules in force now, or `None` while `DRADeviceTaints` is off.
    pub fn rules_now(&self) -> Option<Vec<Arc<DeviceTaintRule>>> {
        self.gates
            .taints
            .then(|| self.rules.as_ref().map(Store::state).unwrap_or_default())
    }
}

/// A rule decoded from a version other than `v1`; stored as the shared model.
macro_rules! rule_at {
    ($(#[$doc:meta])* $name:ident, $version:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub DeviceTaintRule);

        impl kube::Resource for $name {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind((): &()) -> Cow<'_, str> {
                Cow::Borrowed(KIND)
            }
            fn group((): &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version((): &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn api_version((): &()) -> Cow<'_, str> {
                Cow::Borrowed(concat!("resource.k8s.io/", $version))
            }
            fn plural((): &()) -> Cow<'_, str> {
                Cow::Borrowed("devicetaintrules")
            }
            fn meta(&self) -> &ObjectMeta {
                &self.0.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.0.metadata
            }
        }

        impl From<$name> for DeviceTaintRule {
            fn from(rule: $name) -> Self {
                rule.0
            }
        }
    };
}

rule_at!(
    /// A `resource.k8s.io/v1beta2` rule.
    RuleV1beta2,
    "v1beta2"
);
rule_at!(
    /// A `resource.k8s.io/v1alpha3` rule.
    RuleV1alpha3,
    "v1alpha3"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiOverrides, KubernetesVersion};

    fn gates_of(
        version: KubernetesVersion,
        flags: &str,
        runtime: &str,
    ) -> (TaintGates, Option<RuleVersion>) {
        let overrides = ApiOverrides {
            feature_gates: flags.parse().unwrap(),
            runtime_config: runtime.parse().unwrap(),
        };
        taint_gates(&ServedApi::new(version, &overrides).unwrap())
    }

    #[test]
    fn taints_count_from_1_36_and_rules_by_default_only_in_1_37() {
        let off = TaintGates::default();
        assert_eq!(gates_of(KubernetesVersion::V1_34, "", ""), (off, None));
        assert_eq!(gates_of(KubernetesVersion::V1_35, "", ""), (off, None));
        let taints_only = TaintGates {
            taints: true,
            rules: false,
        };
        assert_eq!(
            gates_of(KubernetesVersion::V1_36, "", ""),
            (taints_only, None)
        );
        let both = TaintGates {
            taints: true,
            rules: true,
        };
        assert_eq!(
            gates_of(KubernetesVersion::V1_37, "", ""),
            (both, Some(RuleVersion::V1))
        );
    }

    #[test]
    fn rules_need_their_gate_and_a_served_version() {
        let both = TaintGates {
            taints: true,
            rules: true,
        };
        let beta = "resource.k8s.io/v1beta2=true";
        let gates = "DRADeviceTaintRules=true";
        assert!(
            !gates_of(KubernetesVersion::V1_36, "", beta).0.rules,
            "gate off"
        );
        assert!(
            !gates_of(KubernetesVersion::V1_36, gates, "").0.rules,
            "kind not served"
        );
        assert_eq!(
            gates_of(KubernetesVersion::V1_36, gates, beta),
            (both, Some(RuleVersion::V1beta2))
        );
        assert_eq!(
            gates_of(
                KubernetesVersion::V1_35,
                "DRADeviceTaints=true,DRADeviceTaintRules=true",
                "resource.k8s.io/v1alpha3=true"
            ),
            (both, Some(RuleVersion::V1alpha3))
        );
        assert_eq!(
            gates_of(
                KubernetesVersion::V1_34,
                "DRADeviceTaints=true",
                "resource.k8s.io/v1alpha3"
            ),
            (both, Some(RuleVersion::V1alpha3)),
            "in 1.34 the taints gate covers the rules"
        );
    }
}
