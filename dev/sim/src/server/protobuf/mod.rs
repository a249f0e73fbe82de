//! Request bodies in `application/vnd.kubernetes.protobuf` (kubectl 1.32 and later sends its
//! `create namespace`, `create configmap`, ... that way): the `k8s\0` magic, a `runtime.Unknown`
//! envelope with the object's `apiVersion` and `kind`, and the message itself, decoded with the
//! Kubernetes messages of the k8s-pb crate and turned into the JSON the rest of the server
//! stores ([`json`]), so a protobuf write goes through the same decoding, defaulting and
//! validation as a JSON one.
//!
//! Accepted for the built-in kinds the server decodes with a typed model and k8s-pb has a
//! message for: core/v1 namespaces, nodes, pods, events, configmaps; events.k8s.io/v1 events;
//! coordination.k8s.io/v1 leases; resource.k8s.io/v1. Any other resource answers 415 with the
//! media types it accepts, as kube-apiserver does for custom resources (which have no protobuf
//! form); so do the 1.30 `resource.k8s.io/v1alpha2` kinds, which k8s-pb no longer has.
//!
//! Pure: bytes in, JSON out; no store or HTTP.

mod json;
#[rustfmt::skip]
mod messages;
#[cfg(test)]
mod generate;
#[cfg(test)]
mod tests;

use prost::Message;
use serde_json::{json, Value};

use super::error::{Result, StatusError};
use super::resources::ResourceInfo;
use json::ToJson;

/// The media type of protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every protobuf-encoded object.
const MAGIC: &[u8] = b"k8s\0";

/// The media types a write of `info` accepts, as kube-apiserver lists them in its 415.
fn accepted(info: &ResourceInfo) -> &'static str {
    if decoder(info).is_some() {
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    } else {
        "application/json, application/yaml"
    }
}

/// The 415 for a body in a media type `info` does not accept.
pub fn unsupported(info: &ResourceInfo) -> StatusError {
    StatusError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted(info)
    ))
}

type Decoder = fn(&[u8]) -> std::result::Result<Option<Value>, prost::DecodeError>;

fn decode_as<M: Message + Default + ToJson>(
    raw: &[u8],
) -> std::result::Result<Option<Value>, prost::DecodeError> {
    Ok(M::decode(raw)?.to_json())
}

/// The k8s-pb message of a resource's kind, if it is decoded from protobuf.
fn decoder(info: &ResourceInfo) -> Option<Decoder> {
    use k8s_pb::api::{coordination, core, events, resource};
    if info.custom {
        return None;
    }
    let decode: Decoder = match (
        info.group.as_str(),
        info.version.as_str(),
        info.kind.as_str(),
    ) {
        ("", "v1", "Namespace") => decode_as::<core::v1::Namespace>,
        ("", "v1", "Node") => decode_as::<core::v1::Node>,
        ("", "v1", "Pod") => decode_as::<core::v1::Pod>,
        ("", "v1", "Event") => decode_as::<core::v1::Event>,
        ("", "v1", "ConfigMap") => decode_as::<core::v1::ConfigMap>,
        ("events.k8s.io", "v1", "Event") => decode_as::<events::v1::Event>,
        ("coordination.k8s.io", "v1", "Lease") => decode_as::<coordination::v1::Lease>,
        ("resource.k8s.io", "v1", "DeviceClass") => decode_as::<resource::v1::DeviceClass>,
        ("resource.k8s.io", "v1", "ResourceClaim") => decode_as::<resource::v1::ResourceClaim>,
        ("resource.k8s.io", "v1", "ResourceClaimTemplate") => {
            decode_as::<resource::v1::ResourceClaimTemplate>
        }
        ("resource.k8s.io", "v1", "ResourceSlice") => decode_as::<resource::v1::ResourceSlice>,
        _ => return None,
    };
    Some(decode)
}

/// The object a protobuf body of a write of `info` holds, in JSON: 415 for a resource that takes
/// no protobuf, 400 for a body that does not decode.
pub fn decode(info: &ResourceInfo, body: &[u8]) -> Result<Value> {
    let decode = decoder(info).ok_or_else(|| unsupported(info))?;
    let bad = |why: String| {
        StatusError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
            kind = info.kind,
            version = info.version
        ))
    };
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into()))?;
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(envelope)
        .map_err(|e| bad(e.to_string()))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let mut object = decode(unknown.raw.as_deref().unwrap_or_default())
        .map_err(|e| bad(e.to_string()))?
        .unwrap_or_else(|| json!({}));
    for (key, value) in [
        ("apiVersion", type_meta.api_version),
        ("kind", type_meta.kind),
    ] {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            object[key] = Value::String(value);
        }
    }
    Ok(object)
}
