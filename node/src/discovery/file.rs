//! The `file:PATH` source: an inventory written by an operator, in YAML (or JSON, which the YAML
//! parser reads as well):
//!
//! ```yaml
//! devices:
//!   - name: gpu-0
//!     attributes:
//!       model: H100            # a string
//!       numa: 0                # an integer
//!       mig: false             # a boolean
//!       memory: {quantity: 80Gi}
//!       driver: {version: 550.54.15}
//!       cores: [0, 1, 2]       # a list of integers (or of strings)
//!     deviceNodes: [/dev/nvidia0, /dev/nvidiactl]
//!     env: {NVIDIA_VISIBLE_DEVICES: GPU-5d2a...}
//!     health: Unhealthy        # optional: Healthy (the default), Unhealthy or Unknown
//!     healthMessage: fan failed
//!   - name: gpu-0-mig-1g-0     # a partition: the v1 device fields, written as the API writes them
//!     capacity: {memory: {value: 10Gi}}
//!     consumesCounters:
//!       - counterSet: gpu-0-counters
//!         counters: {memory: {value: 10Gi}, compute: {value: "1"}}
//!   - name: gpu-1              # a device several claims share, each consuming some memory
//!     allowMultipleAllocations: true
//!     capacity:
//!       memory: {value: 80Gi, requestPolicy: {default: 10Gi, validRange: {min: 1Gi, step: 1Gi}}}
//! sharedCounters:              # the pool's counter sets the partitions consume
//!   - name: gpu-0-counters
//!     counters: {memory: {value: 80Gi}, compute: {value: "7"}}
//! ```
//!
//! A quantity attribute (`memory: {quantity: 80Gi}`) is published as the capacity of its name, so
//! a capacity may be given either way, not both. [`parse_discovered`] gives the sharing fields
//! and counter sets as well (checked by [`sharing`]); [`parse`] gives the devices alone.
//!
//! Strict: an unknown field, a duplicate key, a duplicate device name, a device name that is
//! not a DNS label, a relative device node path, an attribute value of no known kind, a quantity
//! that does not parse, or a consumed counter set or counter the file does not define is an
//! error naming the device (or counter set) and the field. [`parse`] is pure; [`read`] reads the file.
//! [`parse_health`] and [`read_health`] give the `health` fields as observations
//! ([`crate::health::file`] is the health source over them): a device marked `Unhealthy` or
//! `Unknown` has the reason `Marked` and its `healthMessage`, if any.

pub mod sharing;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dra_allocator::model::{AttributeValue, ParseError, Quantity, Version};
use serde::Deserialize;
use serde_yaml::Value;

use super::DiscoveryError;
use crate::device::{Discovered, Inventory, NodeDevice};
use crate::health::{HealthState, Observation, Observations, Reason};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InventoryFile {
    devices: Vec<FileDevice>,
    #[serde(default)]
    shared_counters: Vec<sharing::FileCounterSet>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileDevice {
    name: String,
    #[serde(default, deserialize_with = "unique_keys")]
    attributes: BTreeMap<String, Value>,
    #[serde(default)]
    device_nodes: Vec<PathBuf>,
    #[serde(default, deserialize_with = "unique_keys")]
    env: BTreeMap<String, String>,
    #[serde(default)]
    health: Option<HealthState>,
    #[serde(default)]
    health_message: Option<String>,
    #[serde(default, deserialize_with = "unique_keys")]
    capacity: BTreeMap<String, sharing::FileCapacity>,
    #[serde(default)]
    allow_multiple_allocations: bool,
    #[serde(default)]
    consumes_counters: Vec<sharing::FileConsumption>,
}

/// A map whose keys appear once; the derived map would keep the last of two silently.
fn unique_keys<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Unique<V>(std::marker::PhantomData<V>);

    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Unique<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if out.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
                }
                let value = map.next_value()?;
                out.insert(key, value);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_map(Unique(std::marker::PhantomData))
}

/// What is wrong with an inventory file, naming the device and field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryFileError {
    /// The text is not YAML of the inventory's shape (an unknown field, a duplicate key).
    #[error("{source}")]
    Syntax {
        /// The parser's error.
        #[source]
        source: serde_yaml::Error,
    },
    /// A device name that is not a DNS label.
    #[error(
        "device name {device:?} is not a DNS label (lowercase letters, digits and '-', at most 63)"
    )]
    DeviceName {
        /// The name.
        device: String,
    },
    /// An attribute value of no known kind.
    #[error("device {device}: attribute {attribute}: {source}")]
    Attribute {
        /// The device.
        device: String,
        /// The attribute's name.
        attribute: String,
        /// What is wrong with its value.
        #[source]
        source: AttributeValueError,
    },
    /// A device node path that is not absolute.
    #[error("device {device}: deviceNodes: {} is not an absolute path", path.display())]
    DeviceNode {
        /// The device.
        device: String,
        /// The path.
        path: PathBuf,
    },
    /// An environment key that cannot name a variable.
    #[error("device {device}: env: {key:?} is not a variable name")]
    EnvKey {
        /// The device.
        device: String,
        /// The key.
        key: String,
    },
    /// A sharing field (`capacity`, `consumesCounters`, `sharedCounters`) that is not valid.
    #[error("{owner}: {field}: {reason}")]
    Sharing {
        /// `device NAME` or `counter set NAME`.
        owner: String,
        /// The field, such as `capacity.memory.value`.
        field: String,
        /// What is wrong with it.
        #[source]
        reason: Box<sharing::SharingError>,
    },
    /// Two devices of one name.
    #[error("device {device}: the name is used twice")]
    DuplicateDevice {
        /// The device.
        device: String,
    },
}

/// Why an attribute's value has no known kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttributeValueError {
    /// A number that is not a 64-bit integer.
    #[error("{number} is not a 64-bit integer (write a fraction as {{quantity: \"{number}\"}})")]
    NotAnInteger {
        /// The number as written.
        number: String,
    },
    /// A map of other than one key.
    #[error("a typed value has exactly one key, quantity or version")]
    TypedKeys,
    /// A typed value whose text is neither a string nor a number.
    #[error("the {kind} must be written as a string")]
    TypedText {
        /// `quantity` or `version`.
        kind: String,
    },
    /// A quantity or version that does not parse.
    #[error("{source}")]
    Typed {
        /// The parser's error.
        #[source]
        source: ParseError,
    },
    /// A typed value of an unknown kind.
    #[error("unknown typed value `{kind}`, expected quantity or version")]
    UnknownType {
        /// The kind written.
        kind: String,
    },
    /// An empty list.
    #[error("an empty list has no type; leave the attribute out")]
    EmptyList,
    /// A list starting with an integer holding something else.
    #[error("a list of integers holds only integers")]
    MixedIntegers,
    /// A list starting with a string holding something else.
    #[error("a list of strings holds only strings")]
    MixedStrings,
    /// A list of other items.
    #[error("a list holds integers or strings")]
    ListItem,
    /// `null`.
    #[error("no value")]
    Null,
    /// A YAML tag.
    #[error("unexpected tag {tag}")]
    Tagged {
        /// The tag.
        tag: String,
    },
}

/// Reads and checks an inventory file.
///
/// # Errors
/// The file cannot be read, or is not a valid inventory.
pub fn read(path: &Path) -> Result<Inventory, DiscoveryError> {
    read_with(path, parse)
}

/// Reads an inventory file with its sharing fields and counter sets.
///
/// # Errors
/// The file cannot be read, or is not a valid inventory.
pub fn read_discovered(path: &Path) -> Result<Discovered, DiscoveryError> {
    read_with(path, parse_discovered)
}

/// Reads an inventory file's `health` fields.
///
/// # Errors
/// The file cannot be read, or is not a valid inventory.
pub fn read_health(path: &Path) -> Result<Observations, DiscoveryError> {
    read_with(path, parse_health)
}

fn read_with<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, InventoryFileError>,
) -> Result<T, DiscoveryError> {
    let text = std::fs::read_to_string(path).map_err(|source| DiscoveryError::InventoryRead {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|source| DiscoveryError::InventoryFile {
        path: path.to_owned(),
        source,
    })
}

/// Parses and checks the text of an inventory file; the error says what is wrong where.
///
/// # Errors
/// See the module documentation.
pub fn parse(text: &str) -> Result<Inventory, InventoryFileError> {
    parse_both(text).map(|(discovered, _)| discovered.devices)
}

/// Parses and checks the text of an inventory file: the devices, their sharing fields and the
/// pool's counter sets.
///
/// # Errors
/// See the module documentation.
pub fn parse_discovered(text: &str) -> Result<Discovered, InventoryFileError> {
    parse_both(text).map(|(discovered, _)| discovered)
}

/// The health the file gives its devices: `Unhealthy` and `Unknown` ones with the reason
/// `Marked` and their `healthMessage`; a `Healthy` or unmarked device has no entry. The whole
/// file is checked as [`parse`] checks it.
///
/// # Errors
/// See the module documentation.
pub fn parse_health(text: &str) -> Result<Observations, InventoryFileError> {
    parse_both(text).map(|(_, health)| health)
}

fn parse_both(text: &str) -> Result<(Discovered, Observations), InventoryFileError> {
    let file: InventoryFile =
        serde_yaml::from_str(text).map_err(|source| InventoryFileError::Syntax { source })?;
    let counter_sets = sharing::counter_sets(file.shared_counters)?;
    let mut shared = BTreeMap::new();
    let mut inventory = Inventory::new();
    let mut health = Observations::new();
    for device in file.devices {
        let name = device.name;
        check_name(&name)?;
        let mut attributes = BTreeMap::new();
        for (attribute, value) in &device.attributes {
            let value = attribute_value(value).map_err(|source| InventoryFileError::Attribute {
                device: name.clone(),
                attribute: attribute.clone(),
                source,
            })?;
            attributes.insert(attribute.clone(), value);
        }
        if let Some(path) = device.device_nodes.iter().find(|p| !p.is_absolute()) {
            return Err(InventoryFileError::DeviceNode {
                device: name,
                path: path.clone(),
            });
        }
        if let Some(key) = device.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(InventoryFileError::EnvKey {
                device: name,
                key: key.clone(),
            });
        }
        if inventory.contains_key(&name) {
            return Err(InventoryFileError::DuplicateDevice { device: name });
        }
        let quantities: Vec<&String> = attributes
            .iter()
            .filter(|(_, v)| matches!(v, AttributeValue::Quantity(_)))
            .map(|(k, _)| k)
            .collect();
        let device_sharing = sharing::device_sharing(
            &name,
            device.capacity,
            device.allow_multiple_allocations,
            device.consumes_counters,
            &quantities,
            &counter_sets,
        )?;
        if !device_sharing.is_empty() {
            shared.insert(name.clone(), device_sharing);
        }
        if let Some(state @ (HealthState::Unhealthy | HealthState::Unknown)) = device.health {
            let observation = Observation {
                state,
                reason: Some(Reason::Marked),
                message: device.health_message,
            };
            health.insert(name.clone(), observation);
        }
        inventory.insert(
            name.clone(),
            NodeDevice {
                name,
                attributes,
                device_nodes: device.device_nodes,
                env: device.env,
            },
        );
    }
    let discovered = Discovered {
        devices: inventory,
        sharing: shared,
        counter_sets,
    };
    Ok((discovered, health))
}

/// Device names go into `namedResources` instances: DNS labels.
fn check_name(name: &str) -> Result<(), InventoryFileError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(InventoryFileError::DeviceName {
            device: name.to_owned(),
        })
    }
}

/// One attribute's value: an integer, a boolean, a string, `{quantity: ..}`, `{version: ..}`,
/// or a non-empty list of integers or of strings.
fn attribute_value(value: &Value) -> Result<AttributeValue, AttributeValueError> {
    match value {
        Value::Bool(b) => Ok(AttributeValue::Bool(*b)),
        Value::Number(n) => {
            n.as_i64()
                .map(AttributeValue::Int)
                .ok_or_else(|| AttributeValueError::NotAnInteger {
                    number: n.to_string(),
                })
        }
        Value::String(s) => Ok(AttributeValue::String(s.clone())),
        Value::Mapping(map) => {
            let mut entries = map.iter();
            let (Some((Value::String(kind), inner)), None) = (entries.next(), entries.next())
            else {
                return Err(AttributeValueError::TypedKeys);
            };
            let text = scalar_text(inner)
                .ok_or_else(|| AttributeValueError::TypedText { kind: kind.clone() })?;
            let typed = match kind.as_str() {
                "quantity" => Quantity::parse(&text).map(AttributeValue::Quantity),
                "version" => Version::parse(&text).map(AttributeValue::Version),
                other => {
                    return Err(AttributeValueError::UnknownType {
                        kind: other.to_owned(),
                    })
                }
            };
            typed.map_err(|source| AttributeValueError::Typed { source })
        }
        Value::Sequence(items) => list(items),
        Value::Null => Err(AttributeValueError::Null),
        Value::Tagged(tagged) => Err(AttributeValueError::Tagged {
            tag: tagged.tag.to_string(),
        }),
    }
}

/// A quantity or version as text; YAML reads `80` and `1.5` as numbers, so they are taken too.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn list(items: &[Value]) -> Result<AttributeValue, AttributeValueError> {
    match items.first() {
        None => Err(AttributeValueError::EmptyList),
        Some(Value::Number(_)) => items
            .iter()
            .map(|item| item.as_i64().ok_or(AttributeValueError::MixedIntegers))
            .collect::<Result<_, _>>()
            .map(AttributeValue::IntSlice),
        Some(Value::String(_)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or(AttributeValueError::MixedStrings)
            })
            .collect::<Result<_, _>>()
            .map(AttributeValue::StringSlice),
        Some(_) => Err(AttributeValueError::ListItem),
    }
}
