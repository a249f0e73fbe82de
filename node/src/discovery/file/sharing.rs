//! The sharing fields of an inventory file, written as the v1 API writes them: a device's
//! `capacity` (name -> `{value, requestPolicy}`), `allowMultipleAllocations` and
//! `consumesCounters`, and the file's top-level `sharedCounters`. Checked strictly: quantities
//! parse, names are valid, every consumed counter set and counter is defined in the file, a
//! capacity is not also given as a quantity attribute. Pure; depends on the file's parser only.

use std::collections::BTreeMap;

use dra_allocator::model::{ParseError, Quantity as ModelQuantity};
use dra_types::resource_v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, Counter, CounterSet, DeviceCapacity,
    DeviceCounterConsumption,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_yaml::Value;

use super::{scalar_text, unique_keys, InventoryFileError};
use crate::device::DeviceSharing;

/// At most this many `consumesCounters` entries per device (as the v1 API allows).
pub const MAX_CONSUMPTIONS_PER_DEVICE: usize = 2;

/// A counter set of `sharedCounters`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCounterSet {
    name: String,
    #[serde(deserialize_with = "unique_keys")]
    counters: BTreeMap<String, FileCounter>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCounter {
    value: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileCapacity {
    value: Value,
    #[serde(default)]
    request_policy: Option<FilePolicy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FilePolicy {
    #[serde(default)]
    default: Option<Value>,
    #[serde(default)]
    valid_values: Vec<Value>,
    #[serde(default)]
    valid_range: Option<FileRange>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRange {
    #[serde(default)]
    min: Option<Value>,
    #[serde(default)]
    max: Option<Value>,
    #[serde(default)]
    step: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileConsumption {
    counter_set: String,
    #[serde(deserialize_with = "unique_keys")]
    counters: BTreeMap<String, FileCounter>,
}

/// Why a sharing field is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SharingError {
    /// A quantity that is neither a string nor a number.
    #[error("a quantity is written as a string, such as \"80Gi\"")]
    NotAQuantity,
    /// A quantity that does not parse.
    #[error("{text:?}: {source}")]
    Quantity {
        /// The text.
        text: String,
        /// The parser's error.
        #[source]
        source: ParseError,
    },
    /// A counter set, counter or capacity name the v1 API does not take.
    #[error("{name:?} is not a valid name")]
    Name {
        /// The name.
        name: String,
    },
    /// Two counter sets of one name.
    #[error("the counter set {name} is defined twice")]
    DuplicateCounterSet {
        /// The name.
        name: String,
    },
    /// A consumed counter set the file does not define.
    #[error("the counter set {set} is not defined in sharedCounters")]
    UnknownCounterSet {
        /// The set.
        set: String,
    },
    /// A consumed counter its set does not have.
    #[error("the counter set {set} has no counter {counter}")]
    UnknownCounter {
        /// The set.
        set: String,
        /// The counter.
        counter: String,
    },
    /// More consumptions than a device may have.
    #[error("{count} entries, at most {max}")]
    TooManyConsumptions {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A capacity also given as a quantity attribute.
    #[error("also given as a quantity attribute; give it once")]
    AlsoAnAttribute,
}

/// The file's counter sets by name.
pub(super) fn counter_sets(
    sets: Vec<FileCounterSet>,
) -> Result<BTreeMap<String, CounterSet>, InventoryFileError> {
    let mut out = BTreeMap::new();
    for set in sets {
        let refuse = |field: String, reason| InventoryFileError::Sharing {
            owner: format!("counter set {}", set.name),
            field,
            reason: Box::new(reason),
        };
        if !crate::v1::is_dns_label(&set.name) {
            let name = set.name.clone();
            return Err(refuse("name".into(), SharingError::Name { name }));
        }
        if out.contains_key(&set.name) {
            let name = set.name.clone();
            return Err(refuse(
                "name".into(),
                SharingError::DuplicateCounterSet { name },
            ));
        }
        let counters = counters(&set.counters)
            .map_err(|(counter, reason)| refuse(format!("counters.{counter}"), reason))?;
        out.insert(
            set.name.clone(),
            CounterSet {
                name: set.name,
                counters,
            },
        );
    }
    Ok(out)
}

/// One device's sharing fields, checked against the file's counter sets and its attributes.
pub(super) fn device_sharing(
    device: &str,
    capacity: BTreeMap<String, FileCapacity>,
    allow_multiple_allocations: bool,
    consumes: Vec<FileConsumption>,
    quantity_attributes: &[&String],
    sets: &BTreeMap<String, CounterSet>,
) -> Result<DeviceSharing, InventoryFileError> {
    let refuse = |field: String, reason| InventoryFileError::Sharing {
        owner: format!("device {device}"),
        field,
        reason: Box::new(reason),
    };
    let mut out = DeviceSharing {
        allow_multiple_allocations,
        ..DeviceSharing::default()
    };
    for (name, file) in capacity {
        let field = format!("capacity.{name}");
        if !crate::v1::is_attribute_name(&name) {
            return Err(refuse(field, SharingError::Name { name }));
        }
        if quantity_attributes.contains(&&name) {
            return Err(refuse(field, SharingError::AlsoAnAttribute));
        }
        let value = quantity(&file.value).map_err(|r| refuse(format!("{field}.value"), r))?;
        let request_policy = file
            .request_policy
            .map(policy)
            .transpose()
            .map_err(|r| refuse(format!("{field}.requestPolicy"), r))?;
        out.capacity.insert(
            name,
            DeviceCapacity {
                value,
                request_policy,
            },
        );
    }
    if consumes.len() > MAX_CONSUMPTIONS_PER_DEVICE {
        let (count, max) = (consumes.len(), MAX_CONSUMPTIONS_PER_DEVICE);
        return Err(refuse(
            "consumesCounters".into(),
            SharingError::TooManyConsumptions { count, max },
        ));
    }
    for consumption in consumes {
        let field = format!("consumesCounters.{}", consumption.counter_set);
        let Some(set) = sets.get(&consumption.counter_set) else {
            let set = consumption.counter_set;
            return Err(refuse(field, SharingError::UnknownCounterSet { set }));
        };
        if let Some(counter) = consumption
            .counters
            .keys()
            .find(|c| !set.counters.contains_key(*c))
        {
            let (set, counter) = (set.name.clone(), counter.clone());
            return Err(refuse(field, SharingError::UnknownCounter { set, counter }));
        }
        let counters = counters(&consumption.counters)
            .map_err(|(counter, reason)| refuse(format!("{field}.{counter}"), reason))?;
        out.consumes_counters.push(DeviceCounterConsumption {
            counter_set: consumption.counter_set,
            counters,
        });
    }
    Ok(out)
}

fn counters(
    file: &BTreeMap<String, FileCounter>,
) -> Result<BTreeMap<String, Counter>, (String, SharingError)> {
    file.iter()
        .map(|(name, counter)| {
            // counter names are DNS labels, as the v1 API requires
            if !crate::v1::is_dns_label(name) {
                let reason = SharingError::Name { name: name.clone() };
                return Err((name.clone(), reason));
            }
            let value = quantity(&counter.value).map_err(|r| (name.clone(), r))?;
            Ok((name.clone(), Counter { value }))
        })
        .collect()
}

fn policy(file: FilePolicy) -> Result<CapacityRequestPolicy, SharingError> {
    let optional = |v: Option<Value>| v.as_ref().map(quantity).transpose();
    Ok(CapacityRequestPolicy {
        default: optional(file.default)?,
        valid_values: file
            .valid_values
            .iter()
            .map(quantity)
            .collect::<Result<_, _>>()?,
        valid_range: file
            .valid_range
            .map(|r| {
                Ok::<_, SharingError>(CapacityRequestPolicyRange {
                    min: optional(r.min)?,
                    max: optional(r.max)?,
                    step: optional(r.step)?,
                })
            })
            .transpose()?,
    })
}

/// A quantity as the API writes it, checked to parse.
fn quantity(value: &Value) -> Result<Quantity, SharingError> {
    let text = scalar_text(value).ok_or(SharingError::NotAQuantity)?;
    ModelQuantity::parse(&text).map_err(|source| SharingError::Quantity {
        text: text.clone(),
        source,
    })?;
    Ok(Quantity(text))
}
