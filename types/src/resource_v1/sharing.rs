//! The fields that let devices be partitioned and shared: counter sets a slice shares between its
//! devices (`sharedCounters`) and what each device consumes of them (`consumesCounters`); a
//! capacity's `requestPolicy` for devices allocated more than once; what a request asks of each
//! capacity (`capacity.requests`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nullable;

/// A named set of counters a slice's devices draw from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CounterSet {
    /// The set's name (a DNS label).
    #[serde(default)]
    pub name: String,
    /// The counters by name (DNS labels).
    #[serde(default, deserialize_with = "nullable")]
    pub counters: BTreeMap<String, Counter>,
}

/// An amount of a counter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counter {
    /// The amount.
    #[serde(default)]
    pub value: Quantity,
}

/// What a device consumes of one counter set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCounterConsumption {
    /// The set's name.
    #[serde(default)]
    pub counter_set: String,
    /// The amounts by counter name.
    #[serde(default, deserialize_with = "nullable")]
    pub counters: BTreeMap<String, Counter>,
}

/// How a capacity of a device allocated more than once is consumed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequestPolicy {
    /// What a request that names no amount consumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Quantity>,
    /// The amounts a request may consume (ascending, at most 10).
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub valid_values: Vec<Quantity>,
    /// The range a request may consume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_range: Option<CapacityRequestPolicyRange>,
}

/// `requestPolicy.validRange`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequestPolicyRange {
    /// The least amount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Quantity>,
    /// The largest amount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Quantity>,
    /// The step between valid amounts, from `min`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Quantity>,
}

/// A request's `capacity`: the amount it needs of each capacity of a device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequirements {
    /// Amounts by capacity name.
    #[serde(default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}
