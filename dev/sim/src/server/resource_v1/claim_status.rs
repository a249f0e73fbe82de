//! What a write of a claim's `status` subresource stores besides what the client sent, as the
//! status strategy's `PrepareForUpdate` in `pkg/registry/resource/resourceclaim/strategy.go`
//! does it: the `status.devices` entries of devices that the old allocation held and the new one
//! does not are dropped (`dropDeallocatedStatusDevices`), so that a deallocation by a client that
//! does not know of device status (the resourceclaim controller, the scheduler) is not refused
//! for the drivers' entries it leaves behind.
//!
//! Pure: a function over the stored and the incoming object.

use std::collections::BTreeSet;

use serde_json::Value;

/// A device as `status.devices` and the allocation results name it.
type DeviceId<'a> = (&'a str, &'a str, &'a str);

fn id(entry: &Value) -> DeviceId<'_> {
    let text = |field: &str| entry[field].as_str().unwrap_or_default();
    (text("driver"), text("pool"), text("device"))
}

/// The devices the allocation of `claim` holds.
fn allocated(claim: &Value) -> BTreeSet<DeviceId<'_>> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .map(|results| results.iter().map(id).collect())
        .unwrap_or_default()
}

/// Drops from `new`'s `status.devices` the entries of devices that `old` had allocated and `new`
/// has not (the field is left out once empty).
pub fn drop_deallocated_devices(old: &Value, new: &mut Value) {
    let kept = allocated(new);
    let deallocated: BTreeSet<(String, String, String)> = allocated(old)
        .into_iter()
        .filter(|device| !kept.contains(device))
        .map(|(driver, pool, device)| (driver.to_owned(), pool.to_owned(), device.to_owned()))
        .collect();
    if deallocated.is_empty() {
        return;
    }
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(devices) = status.get_mut("devices").and_then(Value::as_array_mut) else {
        return;
    };
    devices.retain(|entry| {
        let (driver, pool, device) = id(entry);
        !deallocated
            .iter()
            .any(|(d, p, v)| d == driver && p == pool && v == device)
    });
    if devices.is_empty() {
        status.remove("devices");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(driver: &str, device: &str) -> Value {
        json!({"driver": driver, "pool": "node-0", "device": device,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    }

    fn claim(results: &[(&str, &str)], devices: &[Value]) -> Value {
        let results: Vec<Value> = results
            .iter()
            .map(|(driver, device)| {
                json!({"request": "r", "driver": driver, "pool": "node-0", "device": device})
            })
            .collect();
        let mut status = json!({"devices": devices});
        if !results.is_empty() {
            status["allocation"] = json!({"devices": {"results": results}});
        }
        json!({"metadata": {"name": "c"}, "status": status})
    }

    #[test]
    fn a_deallocation_drops_the_entries_of_the_devices_it_released() {
        let entries = [entry("a.example.com", "d0"), entry("b.example.com", "d1")];
        let old = claim(
            &[("a.example.com", "d0"), ("b.example.com", "d1")],
            &entries,
        );
        let mut new = claim(&[], &entries);
        drop_deallocated_devices(&old, &mut new);
        assert_eq!(new, json!({"metadata": {"name": "c"}, "status": {}}));
    }

    #[test]
    fn entries_of_devices_still_allocated_or_never_allocated_stay() {
        let stray = entry("c.example.com", "d9");
        let entries = [entry("a.example.com", "d0"), stray.clone()];
        let old = claim(&[("a.example.com", "d0")], &entries);
        let mut unchanged = old.clone();
        drop_deallocated_devices(&old, &mut unchanged);
        assert_eq!(unchanged, old);

        // the entry the deallocation released goes; the stray one stays, for validation to refuse
        let mut deallocated = claim(&[], &entries);
        drop_deallocated_devices(&old, &mut deallocated);
        assert_eq!(deallocated["status"]["devices"], json!([stray]));
    }
}
