//! Label and field selectors as accepted in `labelSelector` and `fieldSelector` query parameters.
//!
//! Pure parsing and matching over `serde_json::Value`; no store or HTTP dependencies.

use serde_json::Value;

use super::error::{Result, StatusError};

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_label_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(rest: &str, raw: &str) -> Result<Vec<String>> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            StatusError::BadRequest(format!(
                "unable to parse requirement: found '{rest}', expected: '(' in {raw:?}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` syntax (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`).
    pub fn parse(raw: &str) -> Result<Self> {
        let mut reqs = Vec::new();
        for part in split_top_level(raw) {
            let bad = |why: &str| {
                StatusError::BadRequest(format!("unable to parse requirement: {why}: {part:?}"))
            };
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some(idx) = part.find(" notin ") {
                LabelReq::NotIn(
                    part[..idx].trim().into(),
                    parse_set(&part[idx + 7..], &part)?,
                )
            } else if let Some(idx) = part.find(" in ") {
                LabelReq::In(
                    part[..idx].trim().into(),
                    parse_set(&part[idx + 4..], &part)?,
                )
            } else if part.contains(['(', ')', ' ', '<', '>']) {
                return Err(bad("unsupported operator"));
            } else {
                LabelReq::Exists(part.clone())
            };
            let key = match &req {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => k,
            };
            if !valid_label_key(key) {
                return Err(bad("invalid label key"));
            }
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether the selector has no requirements (it selects everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether `object`'s labels satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        if self.reqs.is_empty() {
            return true;
        }
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (`field=value`, `field==value`, `field!=value`, comma separated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

/// Fields a kind supports in field selectors beyond `metadata.name` and `metadata.namespace`.
fn extra_fields(kind: &str, version: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
        ],
        "Namespace" => &["status.phase"],
        "Node" => &["spec.unschedulable"],
        "ResourceSlice" if version == "v1" => &["spec.nodeName", "spec.driver"],
        "ResourceSlice" => &["nodeName", "driverName"],
        _ => &[],
    }
}

impl FieldSelector {
    /// Parses a field selector and checks that `kind` in API `version` supports every field
    /// (the v1 `ResourceSlice` selects on `spec.nodeName` and `spec.driver`, the v1alpha2 one on
    /// `nodeName` and `driverName`).
    pub fn parse(raw: &str, kind: &str, version: &str) -> Result<Self> {
        let mut reqs = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, neg, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(StatusError::BadRequest(format!(
                    "invalid selector: '{raw}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            // Events are stored in core form; events.k8s.io names map onto it.
            let core_field = field
                .strip_prefix("regarding.")
                .map(|rest| format!("involvedObject.{rest}"));
            let field = if kind == "Event" {
                core_field.as_deref().unwrap_or(field)
            } else {
                field
            };
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !extra_fields(kind, version).contains(&field)
            {
                return Err(StatusError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push((field.to_string(), neg, value.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    /// Whether the selector has no requirements (it selects everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether `object`'s fields satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        self.reqs.iter().all(|(field, neg, want)| {
            let got = field_value(object, field);
            (got == *want) != *neg
        })
    }
}

fn field_value(object: &Value, field: &str) -> String {
    let mut cur = object;
    for seg in field.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) if field == "source" => o
            .get("component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: &Value) -> Value {
        json!({"metadata": {"name": "a", "labels": labels}, "spec": {"nodeName": "n1"}})
    }

    #[test]
    fn label_selector_operators_match_like_kubernetes() {
        let o = obj(&json!({"app": "web", "tier": "front"}));
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("tier", true),
            ("!tier", false),
            ("missing!=x", true),
            ("app in (db),tier", false),
            ("app,tier=front", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn malformed_label_selector_is_bad_request() {
        assert!(matches!(
            LabelSelector::parse("app in web"),
            Err(StatusError::BadRequest(_))
        ));
        assert!(matches!(
            LabelSelector::parse("a b"),
            Err(StatusError::BadRequest(_))
        ));
    }

    #[test]
    fn field_selector_supports_pod_node_name_and_rejects_unknown_fields() {
        let o = obj(&json!({}));
        assert!(FieldSelector::parse("spec.nodeName=n1", "Pod", "v1")
            .unwrap()
            .matches(&o));
        assert!(!FieldSelector::parse("spec.nodeName!=n1", "Pod", "v1")
            .unwrap()
            .matches(&o));
        assert!(FieldSelector::parse("spec.nodeName=", "Pod", "v1")
            .unwrap()
            .matches(&json!({"spec": {}})));
        assert!(matches!(
            FieldSelector::parse("spec.nodeName=n1", "ConfigMap", "v1"),
            Err(StatusError::BadRequest(_))
        ));
    }
}
