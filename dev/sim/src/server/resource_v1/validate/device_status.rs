//! The rules of one `status.devices` entry besides its key (which must name an allocated device,
//! once), as `validateDeviceStatus` in `pkg/apis/resource/validation` and `ValidateConditions`
//! in apimachinery's `pkg/apis/meta/v1/validation` apply them: the driver, pool and device
//! names; at most 8 conditions, each with a `type` that is a qualified name and unique in the
//! entry, a `status` of `True`, `False` or `Unknown`, a `reason` in the condition-reason format
//! of at most 1024 bytes, a `message` of at most 32 KiB and an `observedGeneration` not below
//! zero; `data` a JSON object of at most 10 KiB.
//!
//! Not checked here: `networkData`; a condition without `lastTransitionTime` does not decode
//! (400) where kube-apiserver answers 422 `Required value`.

use serde_json::Value;

use super::{driver_name, duplicate, label, list, pool_name, text, too_many};
use crate::server::error::FieldCause;
use crate::server::validation::key_causes;

/// Conditions of one entry (`AllocatedDeviceStatusMaxConditions`).
const MAX_CONDITIONS: usize = 8;
/// `data`, in bytes (`AllocatedDeviceStatusDataMaxLength`).
const MAX_DATA: usize = 10 * 1024;
/// A condition's `reason`, in bytes.
const MAX_REASON: usize = 1024;
/// A condition's `message`, in bytes.
const MAX_MESSAGE: usize = 32 * 1024;
const STATUSES: [&str; 3] = ["False", "True", "Unknown"];
const REASON_MSG: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')";

/// The names of the entry at `at`: a driver name, a pool name and a DNS label.
pub(super) fn names(causes: &mut Vec<FieldCause>, at: &str, entry: &Value) {
    driver_name(causes, &format!("{at}.driver"), text(&entry["driver"]));
    pool_name(causes, &format!("{at}.pool"), text(&entry["pool"]));
    label(causes, &format!("{at}.device"), text(&entry["device"]));
}

/// The conditions and data of the entry at `at`.
pub(super) fn contents(causes: &mut Vec<FieldCause>, at: &str, entry: &Value) {
    let field = format!("{at}.conditions");
    let conditions = list(&entry["conditions"]);
    if conditions.len() > MAX_CONDITIONS {
        causes.push(too_many(&field, conditions.len(), MAX_CONDITIONS));
    }
    let mut types: Vec<&str> = Vec::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let kind = text(&condition["type"]);
        if types.contains(&kind) {
            causes.push(duplicate(format!("{at}.type"), kind));
        } else {
            types.push(kind);
        }
        condition_causes(causes, &at, condition);
    }
    data_causes(causes, &format!("{at}.data"), &entry["data"]);
}

/// `ValidateCondition`.
fn condition_causes(causes: &mut Vec<FieldCause>, at: &str, condition: &Value) {
    causes.extend(key_causes(text(&condition["type"]), &format!("{at}.type")));
    let status = text(&condition["status"]);
    if !STATUSES.contains(&status) {
        causes.push(FieldCause::not_supported(
            format!("{at}.status"),
            &format!("{status:?}"),
            &STATUSES,
        ));
    }
    if let Some(generation) = condition["observedGeneration"].as_i64() {
        if generation < 0 {
            // an integer, so rendered without quotes as Go's `%#v` renders it
            causes.push(FieldCause {
                reason: "FieldValueInvalid",
                field: format!("{at}.observedGeneration"),
                message: format!(
                    "Invalid value: {generation}: must be greater than or equal to zero"
                ),
            });
        }
    }
    let reason = text(&condition["reason"]);
    let reason_at = format!("{at}.reason");
    if reason.is_empty() {
        causes.push(FieldCause::required(reason_at, "must be set"));
    } else {
        if !is_condition_reason(reason) {
            causes.push(FieldCause::invalid(reason_at.clone(), reason, REASON_MSG));
        }
        if reason.len() > MAX_REASON {
            causes.push(FieldCause::too_long(reason_at, MAX_REASON));
        }
    }
    if text(&condition["message"]).len() > MAX_MESSAGE {
        causes.push(FieldCause::too_long(format!("{at}.message"), MAX_MESSAGE));
    }
}

/// `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`.
fn is_condition_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.iter().all(inner)
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// `validateRawExtension` of `data`: left out or a JSON object of at most 10 KiB.
fn data_causes(causes: &mut Vec<FieldCause>, at: &str, data: &Value) {
    match data {
        Value::Null => {}
        Value::Object(_) => {
            if data.to_string().len() > MAX_DATA {
                causes.push(FieldCause::too_long(at, MAX_DATA));
            }
        }
        _ => causes.push(FieldCause::invalid(
            at,
            "<value omitted>",
            "parameters must be a valid JSON object",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn causes_of(entry: &Value) -> Vec<String> {
        let mut causes = Vec::new();
        names(&mut causes, "status.devices[0]", entry);
        contents(&mut causes, "status.devices[0]", entry);
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn ready() -> Value {
        json!({"type": "Ready", "status": "True", "reason": "Prepared",
            "message": "prepared", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 1})
    }

    #[test]
    fn an_entry_as_a_driver_writes_it_passes() {
        let entry = json!({"driver": "gpu.dra-ledger.io", "pool": "node-0", "device": "gpu-0",
            "conditions": [ready()],
            "data": {"uuid": "GPU-1", "pciAddress": "0000:3b:00.0"}});
        assert!(causes_of(&entry).is_empty(), "{:?}", causes_of(&entry));
    }

    #[test]
    fn conditions_follow_the_metav1_condition_rules() {
        let mut bad = ready();
        bad["status"] = json!("Maybe");
        bad["reason"] = json!("not a reason");
        bad["observedGeneration"] = json!(-1);
        bad["type"] = json!("bad type!");
        let mut no_reason = ready();
        no_reason["reason"] = json!("");
        let entry = json!({"driver": "d.example.com", "pool": "p", "device": "d0",
            "conditions": [bad, no_reason, ready(), ready()]});
        let found = causes_of(&entry);
        let at = |field: &str, text: &str| {
            found
                .iter()
                .any(|c| c.starts_with(&format!("status.devices[0].{field}: ")) && c.contains(text))
        };
        assert!(
            at(
                "conditions[0].status",
                "Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\""
            ),
            "{found:?}"
        );
        assert!(
            at("conditions[0].reason", "a condition reason must start"),
            "{found:?}"
        );
        assert!(
            at(
                "conditions[0].observedGeneration",
                "Invalid value: -1: must be greater"
            ),
            "{found:?}"
        );
        assert!(at("conditions[0].type", "Invalid value"), "{found:?}");
        assert!(
            at("conditions[1].reason", "Required value: must be set"),
            "{found:?}"
        );
        // the condition without a reason is a `Ready` too, so both after it are duplicates
        assert!(
            at("conditions[2].type", "Duplicate value: \"Ready\""),
            "{found:?}"
        );
        assert!(
            at("conditions[3].type", "Duplicate value: \"Ready\""),
            "{found:?}"
        );
        assert_eq!(found.len(), 7, "{found:?}");
        for reason in ["A", "Ready_", "ReasonA,ReasonB", "ReasonA:ReasonB", "x9"] {
            assert!(is_condition_reason(reason), "{reason}");
        }
        for reason in ["", "9a", "a-b", "a:", "_a"] {
            assert!(!is_condition_reason(reason), "{reason}");
        }
    }

    #[test]
    fn too_many_conditions_names_and_data_are_refused() {
        let conditions: Vec<Value> = (0..9)
            .map(|i| {
                let mut c = ready();
                c["type"] = json!(format!("C{i}"));
                c
            })
            .collect();
        let entry = json!({"driver": "Bad_Driver!", "pool": "", "device": "GPU_0",
            "conditions": conditions, "data": ["a list"]});
        let found = causes_of(&entry);
        for (field, text) in [
            ("driver", "subdomain"),
            ("pool", "Required value"),
            ("device", "RFC 1123 label"),
            ("conditions", "Too many: 9: must have at most 8 items"),
            ("data", "parameters must be a valid JSON object"),
        ] {
            let prefix = format!("status.devices[0].{field}: ");
            assert!(
                found
                    .iter()
                    .any(|c| c.starts_with(&prefix) && c.contains(text)),
                "{field}: {found:?}"
            );
        }
        let large = json!({"driver": "d.example.com", "pool": "p", "device": "d0",
            "data": {"blob": "x".repeat(MAX_DATA)}});
        assert_eq!(
            causes_of(&large),
            ["status.devices[0].data: Too long: may not be longer than 10240"]
        );
    }
}
