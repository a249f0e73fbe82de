//! Pods as a 1.34 API server sends them, read into the 1.30 `Pod` type the actors share.
//!
//! 1.34 names a pod claim's source directly (`spec.resourceClaims[]{name, resourceClaimName |
//! resourceClaimTemplateName}`) where 1.30 nests it in `source`; the k8s-openapi 1.30 type
//! would drop the 1.34 fields. [`Pod134`] moves them into `source` while decoding, so that the
//! 1.34 actors read the pod's claims with the same accessors as the 1.30 ones. Every other
//! field of a pod has the same shape in both releases.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A pod decoded from the 1.34 shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Pod134(pub Pod);

impl From<Pod134> for Pod {
    fn from(pod: Pod134) -> Self {
        pod.0
    }
}

/// Rewrites the 1.34 pod claim entries of a pod object into the 1.30 `source` form. An entry
/// that already has a `source` is left as it is.
pub fn nest_claim_sources(pod: &mut Value) {
    let Some(entries) = pod
        .pointer_mut("/spec/resourceClaims")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
        if entry.contains_key("source") {
            continue;
        }
        let mut source = serde_json::Map::new();
        for field in ["resourceClaimName", "resourceClaimTemplateName"] {
            if let Some(value) = entry.remove(field) {
                source.insert(field.to_owned(), value);
            }
        }
        if !source.is_empty() {
            entry.insert("source".to_owned(), Value::Object(source));
        }
    }
}

impl<'de> Deserialize<'de> for Pod134 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(deserializer)?;
        nest_claim_sources(&mut value);
        serde_json::from_value(value)
            .map(Pod134)
            .map_err(D::Error::custom)
    }
}

impl kube::Resource for Pod134 {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn api_version((): &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_1_34_claim_fields_end_up_in_source() {
        let pod: Pod134 = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c"}],
                "resourceClaims": [
                    {"name": "a", "resourceClaimName": "direct"},
                    {"name": "b", "resourceClaimTemplateName": "tmpl"},
                    {"name": "c", "source": {"resourceClaimName": "old-shape"}},
                    {"name": "d"}
                ]
            },
            "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x"}]}
        }))
        .unwrap();
        let claims = pod.0.spec.unwrap().resource_claims.unwrap();
        let source = |i: usize| claims[i].source.clone().unwrap_or_default();
        assert_eq!(source(0).resource_claim_name.as_deref(), Some("direct"));
        assert_eq!(source(0).resource_claim_template_name, None);
        assert_eq!(
            source(1).resource_claim_template_name.as_deref(),
            Some("tmpl")
        );
        assert_eq!(source(2).resource_claim_name.as_deref(), Some("old-shape"));
        assert!(claims[3].source.is_none());
        let statuses = pod.0.status.unwrap().resource_claim_statuses.unwrap();
        assert_eq!(statuses[0].resource_claim_name.as_deref(), Some("p-b-x"));
    }

    #[test]
    fn a_pod_without_claims_decodes_as_it_is() {
        let pod: Pod134 = serde_json::from_value(
            json!({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}),
        )
        .unwrap();
        assert_eq!(pod.0.metadata.uid.as_deref(), Some("u"));
        assert!(serde_json::from_value::<Pod134>(json!({"metadata": 3})).is_err());
    }
}
