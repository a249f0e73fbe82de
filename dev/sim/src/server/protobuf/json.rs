//! The JSON form of a decoded Kubernetes protobuf message, as the API's JSON encoding writes the
//! same object: field names are the JSON names, unset fields and empty lists and maps are left
//! out, `int64` is a number, `bytes` is base64, and the apimachinery types that have their own
//! JSON form keep it (`Time`, `MicroTime`, `Quantity`, `IntOrString`, `RawExtension`,
//! `FieldsV1`), and an embedded message's fields are its parent's. The messages' field lists are in [`super::messages`], generated from k8s-pb.
//!
//! Pure; depends on k8s-pb's message types only.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// A value's JSON form; `None` when the field is left out.
pub trait ToJson {
    /// The JSON form, or `None` to leave the field out.
    fn to_json(&self) -> Option<Value>;
}

/// Sets `key` in `object` to `value`'s JSON form unless it is left out; an empty `key` is an
/// embedded message (Go's `json:",inline"`), whose fields are set in `object` itself.
pub fn insert(object: &mut Map<String, Value>, key: &str, value: &impl ToJson) {
    match value.to_json() {
        Some(Value::Object(fields)) if key.is_empty() => object.extend(fields),
        Some(v) if !key.is_empty() => {
            object.insert(key.to_owned(), v);
        }
        _ => {}
    }
}

/// `impl ToJson` for a k8s-pb message: its fields with their JSON names.
macro_rules! message {
    ($($path:ident)::+ { $($field:ident: $json:literal),* $(,)? }) => {
        impl $crate::server::protobuf::json::ToJson for k8s_pb::$($path)::+ {
            #[allow(unused_mut)]
            fn to_json(&self) -> Option<serde_json::Value> {
                let mut object = serde_json::Map::new();
                $( $crate::server::protobuf::json::insert(&mut object, $json, &self.$field); )*
                Some(serde_json::Value::Object(object))
            }
        }
    };
}
pub(crate) use message;

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Option<Value> {
        self.as_ref().and_then(ToJson::to_json)
    }
}

impl<T: ToJson> ToJson for Box<T> {
    fn to_json(&self) -> Option<Value> {
        (**self).to_json()
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Option<Value> {
        let items: Vec<Value> = self
            .iter()
            .map(|item| item.to_json().unwrap_or(Value::Null))
            .collect();
        (!items.is_empty()).then_some(Value::Array(items))
    }
}

/// `bytes`: base64, as Go's JSON encoding writes a `[]byte`.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
}

impl<V: ToJson> ToJson for BTreeMap<String, V> {
    fn to_json(&self) -> Option<Value> {
        let object: Map<String, Value> = self
            .iter()
            .map(|(k, v)| (k.clone(), v.to_json().unwrap_or(Value::Null)))
            .collect();
        (!object.is_empty()).then_some(Value::Object(object))
    }
}

impl ToJson for String {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.clone()))
    }
}

macro_rules! scalar {
    ($($ty:ty),*) => {
        $(impl ToJson for $ty {
            fn to_json(&self) -> Option<Value> {
                Some(Value::from(*self))
            }
        })*
    };
}
scalar!(bool, i32, i64, u32, u64, f32, f64);

fn timestamp(seconds: Option<i64>, nanos: Option<i32>, micros: bool) -> Option<Value> {
    let nanos = u32::try_from(nanos.unwrap_or_default()).unwrap_or_default();
    let time = chrono::DateTime::from_timestamp(seconds.unwrap_or_default(), nanos)?;
    let format = if micros {
        chrono::SecondsFormat::Micros
    } else {
        chrono::SecondsFormat::Secs
    };
    Some(Value::String(time.to_rfc3339_opts(format, true)))
}

/// `metav1.Time`: RFC 3339 in seconds.
impl ToJson for Time {
    fn to_json(&self) -> Option<Value> {
        timestamp(self.seconds, self.nanos, false)
    }
}

/// `metav1.MicroTime`: RFC 3339 in microseconds.
impl ToJson for MicroTime {
    fn to_json(&self) -> Option<Value> {
        timestamp(self.seconds, self.nanos, true)
    }
}

/// A `Quantity` is its string.
impl ToJson for Quantity {
    fn to_json(&self) -> Option<Value> {
        self.string.to_json()
    }
}

/// An `IntOrString` is the number (type 0) or the string (type 1).
impl ToJson for IntOrString {
    fn to_json(&self) -> Option<Value> {
        if self.r#type == Some(1) {
            self.str_val.to_json()
        } else {
            Some(Value::from(self.int_val.unwrap_or_default()))
        }
    }
}

/// Embedded JSON (`RawExtension`, `FieldsV1`): the document the bytes hold.
fn embedded(raw: Option<&Vec<u8>>) -> Option<Value> {
    serde_json::from_slice(raw?).ok()
}

impl ToJson for RawExtension {
    fn to_json(&self) -> Option<Value> {
        embedded(self.raw.as_ref())
    }
}

impl ToJson for FieldsV1 {
    fn to_json(&self) -> Option<Value> {
        embedded(self.raw.as_ref())
    }
}
