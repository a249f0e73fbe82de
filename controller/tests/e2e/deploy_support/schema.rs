//! A checker of documents against the structural OpenAPI v3 schema of a CRD version, for the
//! custom resources under `deploy/` that `kubernetes-validate` has no schema for. Covers what the
//! parameter CRDs use: `type`, `nullable`, `properties`, `required`, `items`,
//! `additionalProperties`, `x-kubernetes-preserve-unknown-fields`, `enum`, `minimum` and
//! `maximum`. Unknown fields are errors (the API server would drop them silently).

use serde_json::Value;

/// Every way `value` breaks `schema`, as `path: reason`; empty when it conforms. At the root,
/// `apiVersion`, `kind` and `metadata` are the API server's and not in the CRD schema.
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, value, "", &mut errors);
    errors
}

fn check(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let shown = if path.is_empty() { "." } else { path };
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) {
            errors.push(format!("{shown}: null is not allowed"));
        }
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        if !has_type(value, expected) {
            errors.push(format!("{shown}: expected {expected}, got {value}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            errors.push(format!("{shown}: {value} is not one of {allowed:?}"));
        }
    }
    if let Some(number) = value.as_f64() {
        let below = schema
            .get("minimum")
            .and_then(Value::as_f64)
            .filter(|m| number < *m);
        let above = schema
            .get("maximum")
            .and_then(Value::as_f64)
            .filter(|m| number > *m);
        if let Some(minimum) = below {
            errors.push(format!("{shown}: {number} is below the minimum {minimum}"));
        }
        if let Some(maximum) = above {
            errors.push(format!("{shown}: {number} is above the maximum {maximum}"));
        }
    }
    match value {
        Value::Object(fields) => {
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !fields.contains_key(name) {
                    errors.push(format!("{path}.{name}: required field is missing"));
                }
            }
            for (name, field) in fields {
                let field_path = format!("{path}.{name}");
                if path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&name.as_str()) {
                    continue;
                }
                if let Some(property) = schema.get("properties").and_then(|p| p.get(name)) {
                    check(property, field, &field_path, errors);
                } else if let Some(extra) =
                    schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    check(extra, field, &field_path, errors);
                } else if schema.get("x-kubernetes-preserve-unknown-fields")
                    != Some(&Value::Bool(true))
                {
                    errors.push(format!("{field_path}: unknown field"));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{index}]"), errors);
                }
            }
        }
        _ => {}
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => false,
    }
}
