//! Our opaque device configuration in a claim's allocation
//! (`status.allocation.devices.config[]` entries whose `opaque.driver` is ours): the
//! `dra-ledger.io/v1alpha1` `DeviceConfig` parameters, read strictly, and which entry applies
//! to which allocated device. Pure: no I/O, no API access.
//!
//! Parameters are `{"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceConfig",
//! "sharing": {"mode": "Exclusive" | "Shared", "maxConsumers": N}}`; `sharing` may be left out
//! (exclusive). Any other field, at any level, is an error naming it.
//!
//! Precedence is the one Kubernetes documents for `DeviceAllocationConfiguration`: the entries
//! from the device classes (`FromClass`) come before those from the claim (`FromClaim`), each
//! in list order, and a later entry wins over an earlier one. An entry with `requests` applies
//! only to the devices allocated for those requests (a request name also covers its
//! subrequests, `req` covers `req/sub`); an entry without applies to every device of the claim.
//! The entry that applies decides as a whole: a later entry without `sharing` makes the device
//! exclusive again. A device no entry applies to is exclusive.

use dra_allocator::model::Sharing;
use serde_json::{Map, Value};

use dra_types::resource_v1::DeviceAllocationResult;

/// The `apiVersion` of our parameters.
pub const CONFIG_API_VERSION: &str = "dra-ledger.io/v1alpha1";
/// The `kind` of our parameters.
pub const CONFIG_KIND: &str = "DeviceConfig";
/// Where the configuration entries of an allocation are, for error messages.
const CONFIG_PATH: &str = "status.allocation.devices.config";

/// One configuration entry of ours, read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceConfig {
    /// How a claim holds the devices the entry applies to.
    pub sharing: Sharing,
}

/// A configuration entry of ours with the requests it is limited to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopedConfig {
    /// The requests it applies to; empty: all of the claim's.
    pub requests: Vec<String>,
    /// The configuration.
    pub config: DeviceConfig,
}

impl ScopedConfig {
    /// Whether the entry applies to a device allocated for `request` (`req` or `req/sub`).
    pub fn applies_to(&self, request: &str) -> bool {
        let base = base_request(request);
        self.requests.is_empty()
            || self
                .requests
                .iter()
                .any(|r| r.as_str() == request || r.as_str() == base)
    }
}

/// The request a result names without its subrequest: `req` of `req/sub`.
pub fn base_request(request: &str) -> &str {
    request.split_once('/').map_or(request, |(base, _)| base)
}

/// Something in our configuration this release does not take; the text names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    /// The field, as a path from the claim (`status.allocation.devices.config[0].opaque.parameters.kind`).
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

fn refuse(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Our entries of `allocation` (those whose `opaque.driver` is `driver`), read and in
/// precedence order, lowest first. Entries of other drivers are not looked at.
pub fn our_configs(
    allocation: &DeviceAllocationResult,
    driver: &str,
) -> Result<Vec<ScopedConfig>, ConfigError> {
    let mut ours = Vec::new();
    for (index, entry) in allocation.config.iter().enumerate() {
        let Some(opaque) = entry.opaque.as_ref().filter(|o| o.driver == driver) else {
            continue;
        };
        let path = format!("{CONFIG_PATH}[{index}]");
        let rank = match entry.source.as_str() {
            "FromClass" => 0,
            "FromClaim" => 1,
            other => {
                return Err(refuse(
                    format!("{path}.source"),
                    format!("{other:?} is neither FromClass nor FromClaim"),
                ))
            }
        };
        let config = parse_parameters(&opaque.parameters, &format!("{path}.opaque.parameters"))?;
        let scoped = ScopedConfig {
            requests: entry.requests.clone(),
            config,
        };
        ours.push((rank, scoped));
    }
    // stable: list order is kept within each source
    ours.sort_by_key(|(rank, _)| *rank);
    Ok(ours.into_iter().map(|(_, scoped)| scoped).collect())
}

/// The configuration of a device allocated for `request`: the last entry of `configs` (in
/// precedence order) that applies to it, else the default (exclusive).
pub fn config_for(request: &str, configs: &[ScopedConfig]) -> DeviceConfig {
    configs
        .iter()
        .rev()
        .find(|c| c.applies_to(request))
        .map(|c| c.config)
        .unwrap_or_default()
}

/// Reads our parameters at `path`.
pub fn parse_parameters(parameters: &Value, path: &str) -> Result<DeviceConfig, ConfigError> {
    let object = parameters
        .as_object()
        .ok_or_else(|| refuse(path, "must be a JSON object"))?;
    for (key, expected) in [("apiVersion", CONFIG_API_VERSION), ("kind", CONFIG_KIND)] {
        match object.get(key) {
            None => {
                return Err(refuse(
                    format!("{path}.{key}"),
                    format!("required, must be {expected}"),
                ))
            }
            Some(Value::String(s)) if s == expected => {}
            Some(other) => {
                return Err(refuse(
                    format!("{path}.{key}"),
                    format!("{other} is not {expected}"),
                ))
            }
        }
    }
    reject_unknown(object, path, &["apiVersion", "kind", "sharing"])?;
    let sharing = match object.get("sharing") {
        None => Sharing::Exclusive,
        Some(sharing) => parse_sharing(sharing, &format!("{path}.sharing"))?,
    };
    Ok(DeviceConfig { sharing })
}

fn parse_sharing(sharing: &Value, path: &str) -> Result<Sharing, ConfigError> {
    let object = sharing
        .as_object()
        .ok_or_else(|| refuse(path, "must be an object with mode and maxConsumers"))?;
    reject_unknown(object, path, &["mode", "maxConsumers"])?;
    let max = object.get("maxConsumers");
    match object.get("mode") {
        None => Err(refuse(
            format!("{path}.mode"),
            "required, must be Exclusive or Shared",
        )),
        Some(Value::String(mode)) if mode == "Exclusive" => match max {
            None => Ok(Sharing::Exclusive),
            Some(_) => Err(refuse(
                format!("{path}.maxConsumers"),
                "must not be set when mode is Exclusive",
            )),
        },
        Some(Value::String(mode)) if mode == "Shared" => {
            let field = format!("{path}.maxConsumers");
            let max = max.ok_or_else(|| refuse(&field, "required when mode is Shared"))?;
            let count = max
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    refuse(
                        &field,
                        format!("must be a whole number from 1 to {}, got {max}", u32::MAX),
                    )
                })?;
            Ok(Sharing::Shared {
                max_consumers: count,
            })
        }
        Some(other) => Err(refuse(
            format!("{path}.mode"),
            format!("{other} is neither Exclusive nor Shared"),
        )),
    }
}

/// The first field of `object` not in `known`, as an error.
fn reject_unknown(
    object: &Map<String, Value>,
    path: &str,
    known: &[&str],
) -> Result<(), ConfigError> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(refuse(
            format!("{path}.{key}"),
            format!("unknown field (known: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
