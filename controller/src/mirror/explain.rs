//! The text of the event that explains, from the ledger's view, why a claim of our driver's
//! device classes stays unallocated on `resource.k8s.io/v1`: which claims get one
//! ([`waiting_claim`]), which classes are ours ([`our_classes`]), how many devices a claim asks
//! for ([`asked`]) and the sentence ([`explanation`]). Pure: the claims, classes and counts are
//! read by the caller.
//!
//! The ledger does not evaluate CEL, so the text says what it sees (devices of the driver, how
//! many are allocated, cordoned, missing, which free ones are unhealthy and so tainted) and,
//! where devices are free, that the selectors or the pod's node may rule them out; the kube-scheduler's `FailedScheduling` event on the pod has
//! the final word.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dra_allocator::ledger::DeviceCounts;
use dra_types::resource_v1::{DeviceClass, ResourceClaim, ResourceClaimSpec};

/// The reason of the explaining event.
pub const REASON: &str = "NotAllocated";

/// Longest event note (the API server takes at most 1 KiB).
const MAX_NOTE: usize = 1000;

/// Whether `claim` is one that waits: not allocated, not being deleted, and created at least
/// `after` before `now`.
pub fn waiting_claim(claim: &ResourceClaim, now: DateTime<Utc>, after: Duration) -> bool {
    let allocated = claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some());
    let created = claim.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let old_enough = created.is_some_and(|created| {
        now.signed_duration_since(created)
            .to_std()
            .is_ok_and(|age| age >= after)
    });
    !allocated && claim.metadata.deletion_timestamp.is_none() && old_enough
}

/// The names of the classes whose selectors mention `driver` (as `device.driver == '<driver>'`
/// or an attribute of its domain does).
pub fn our_classes(classes: &[DeviceClass], driver: &str) -> BTreeSet<String> {
    classes
        .iter()
        .filter(|class| {
            class
                .spec
                .selectors
                .iter()
                .filter_map(|s| s.cel.as_ref())
                .any(|cel| cel.expression.contains(driver))
        })
        .filter_map(|class| class.metadata.name.clone())
        .collect()
}

/// How many of our devices a claim asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// Our classes its requests name, sorted.
    pub classes: Vec<String>,
    /// Devices asked for in all (for a `firstAvailable` request the smallest of its
    /// alternatives); `None` when a request asks for all devices of a class.
    pub count: Option<u64>,
}

/// What the claim's `spec` asks of `classes`; `None` when no request names one of them.
pub fn asked(spec: &ResourceClaimSpec, classes: &BTreeSet<String>) -> Option<Asked> {
    let mut named = BTreeSet::new();
    let mut count = Some(0u64);
    for request in &spec.devices.requests {
        // Each alternative as (class, mode, count).
        let alternatives: Vec<(&str, Option<&str>, Option<i64>)> =
            if request.first_available.is_empty() {
                request
                    .exactly
                    .iter()
                    .map(|e| {
                        let mode = e.allocation_mode.as_deref();
                        (e.device_class_name.as_str(), mode, e.count)
                    })
                    .collect()
            } else {
                request
                    .first_available
                    .iter()
                    .map(|s| {
                        let mode = s.allocation_mode.as_deref();
                        (s.device_class_name.as_str(), mode, s.count)
                    })
                    .collect()
            };
        let ours: Vec<_> = alternatives
            .into_iter()
            .filter(|(class, _, _)| classes.contains(*class))
            .collect();
        if ours.is_empty() {
            continue;
        }
        named.extend(ours.iter().map(|(class, _, _)| *class));
        let needed = ours
            .iter()
            .map(|(_, mode, count)| match mode {
                Some("All") => None,
                _ => Some(
                    count
                        .and_then(|c| u64::try_from(c).ok())
                        .unwrap_or(1)
                        .max(1),
                ),
            })
            .min_by_key(|n| n.unwrap_or(u64::MAX));
        count = match (count, needed.flatten()) {
            (Some(sum), Some(n)) => Some(sum + n),
            _ => None,
        };
    }
    (!named.is_empty()).then(|| Asked {
        classes: named.into_iter().map(str::to_owned).collect(),
        count,
    })
}

/// The note of the event: what the ledger sees of `driver`'s devices (`counts`, over all nodes)
/// against what the claim asks for. `unhealthy_free` names the free devices that are unhealthy
/// (`node/device (reason)`): their `<driver>/unhealthy` taint keeps the claim off them, so they
/// do not count as free, and where they are the only free ones the note names them as the reason.
pub fn explanation(
    driver: &str,
    asked: &Asked,
    counts: &DeviceCounts,
    unhealthy_free: &[String],
) -> String {
    let seen = format!(
        "{} devices, {} allocated, {} cordoned, {} missing",
        counts.total, counts.allocated, counts.cordoned, counts.missing
    );
    let classes = asked.classes.join(", ");
    let free = counts.free.saturating_sub(unhealthy_free.len() as u64);
    let cordon = if counts.cordoned > 0 {
        format!("; cordoned devices carry the taint {driver}/cordoned")
    } else {
        String::new()
    };
    let tainted = format!("tainted {driver}/unhealthy: {}", unhealthy_free.join(", "));
    let note = match asked.count {
        _ if free == 0 && !unhealthy_free.is_empty() => format!(
            "every free device of {driver} (class {classes}) is unhealthy in the ledger, \
             {tainted}{cordon}: {seen}"
        ),
        _ if free == 0 => {
            format!("no free device of {driver} (class {classes}) in the ledger{cordon}: {seen}")
        }
        Some(n) if n > free => format!(
            "the claim asks for {n} devices of {driver} (class {classes}), the ledger has {free} \
             free{}: {seen}",
            if unhealthy_free.is_empty() {
                String::new()
            } else {
                format!(" and {} unhealthy, {tainted}", unhealthy_free.len())
            }
        ),
        None if free < counts.total => format!(
            "the claim asks for all devices of {driver} (class {classes}), the ledger has {free} \
             of {} free: {seen}",
            counts.total
        ),
        _ => format!(
            "{free} of {} devices of {driver} are free in the ledger ({seen}), yet the claim is \
             not allocated: the selectors of class {classes} or of the claim, or its pod's node, \
             may rule them out (see the pod's FailedScheduling event)",
            counts.total
        ),
    };
    bounded(note)
}

fn bounded(mut note: String) -> String {
    if note.len() > MAX_NOTE {
        let mut end = MAX_NOTE - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use dra_types::resource_v1::{DeviceAllocationResult, DeviceRequestAllocationResult};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::{json, Value};

    use super::*;

    const DRIVER: &str = "gpu.dra-ledger.io";

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + seconds, 0).unwrap()
    }

    fn claim(created: i64) -> ResourceClaim {
        let mut claim = ResourceClaim::new("ns", "c", "u1");
        claim.metadata.creation_timestamp = Some(Time(at(created)));
        claim
    }

    fn counts(total: u64, free: u64, allocated: u64) -> DeviceCounts {
        DeviceCounts {
            total,
            free,
            allocated,
            ..DeviceCounts::default()
        }
    }

    fn classes(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn only_unallocated_claims_older_than_the_delay_and_not_deleted_wait() {
        let after = Duration::from_secs(30);
        assert!(waiting_claim(&claim(0), at(30), after));
        assert!(!waiting_claim(&claim(0), at(29), after));
        let allocated = claim(0).allocated(DeviceAllocationResult {
            results: vec![DeviceRequestAllocationResult::new(
                "gpu", DRIVER, "node-0", "gpu-0",
            )],
            config: Vec::new(),
        });
        assert!(!waiting_claim(&allocated, at(60), after));
        let mut deleting = claim(0);
        deleting.metadata.deletion_timestamp = Some(Time(at(10)));
        assert!(!waiting_claim(&deleting, at(60), after));
        let mut undated = claim(0);
        undated.metadata.creation_timestamp = None;
        assert!(!waiting_claim(&undated, at(60), after));
    }

    #[test]
    fn classes_whose_selectors_name_the_driver_are_ours() {
        let list = [
            DeviceClass::with_cel("gpu", &["device.driver == 'gpu.dra-ledger.io'"]),
            DeviceClass::with_cel(
                "h100",
                &["device.attributes['gpu.dra-ledger.io'].model == 'H100'"],
            ),
            DeviceClass::with_cel("nic", &["device.driver == 'nic.example.com'"]),
        ];
        assert_eq!(our_classes(&list, DRIVER), classes(&["gpu", "h100"]));
    }

    #[test]
    fn counts_add_up_over_our_requests_and_all_or_first_available_are_read() {
        let ours = classes(&["gpu", "h100"]);
        let typed = |json: Value| -> ResourceClaimSpec { serde_json::from_value(json).unwrap() };
        let spec = typed(json!({"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu", "count": 2}},
            {"name": "b", "exactly": {"deviceClassName": "gpu"}},
            {"name": "n", "exactly": {"deviceClassName": "nic", "count": 5}},
            {"name": "c", "firstAvailable": [
                {"name": "big", "deviceClassName": "h100", "count": 4},
                {"name": "small", "deviceClassName": "h100", "count": 1},
            ]},
        ]}}));
        assert_eq!(
            asked(&spec, &ours),
            Some(Asked {
                classes: vec!["gpu".into(), "h100".into()],
                count: Some(4)
            })
        );
        let all = typed(json!({"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
        ]}}));
        assert_eq!(asked(&all, &ours).unwrap().count, None);
        let foreign = typed(json!({"devices": {"requests": [
            {"name": "n", "exactly": {"deviceClassName": "nic"}},
        ]}}));
        assert_eq!(asked(&foreign, &ours), None);
        assert_eq!(asked(&ResourceClaimSpec::default(), &ours), None);
    }

    #[test]
    fn the_note_says_what_the_ledger_sees() {
        let one = Asked {
            classes: vec!["gpu".into()],
            count: Some(1),
        };
        assert_eq!(
            explanation(DRIVER, &one, &counts(4, 0, 4), &[]),
            "no free device of gpu.dra-ledger.io (class gpu) in the ledger: 4 devices, 4 \
             allocated, 0 cordoned, 0 missing"
        );
        let three = Asked {
            count: Some(3),
            ..one.clone()
        };
        assert!(explanation(DRIVER, &three, &counts(4, 2, 2), &[]).starts_with(
            "the claim asks for 3 devices of gpu.dra-ledger.io (class gpu), the ledger has 2 free"
        ));
        let all = Asked {
            count: None,
            ..one.clone()
        };
        assert!(explanation(DRIVER, &all, &counts(4, 3, 1), &[]).contains("all devices"));
        let free = explanation(DRIVER, &one, &counts(4, 3, 1), &[]);
        assert!(
            free.starts_with("3 of 4 devices of gpu.dra-ledger.io are free")
                && free.contains("selectors of class gpu"),
            "{free}"
        );
        let long = Asked {
            classes: vec!["x".repeat(2000)],
            count: Some(1),
        };
        assert!(explanation(DRIVER, &long, &counts(1, 0, 1), &[]).len() <= 1000);
    }

    #[test]
    fn unhealthy_or_cordoned_devices_are_named_where_they_are_all_that_is_free() {
        let one = Asked {
            classes: vec!["gpu".into()],
            count: Some(1),
        };
        let sick = ["node-0/gpu-1 (XidCritical)".to_owned()];
        let mut cordoned = counts(2, 1, 1);
        cordoned.free = 0;
        cordoned.cordoned = 1;

        let only_sick = explanation(DRIVER, &one, &counts(2, 1, 1), &sick);
        let only_cordoned = explanation(DRIVER, &one, &cordoned, &[]);
        let two = Asked {
            count: Some(2),
            ..one.clone()
        };
        let short = explanation(DRIVER, &two, &counts(3, 2, 1), &sick);

        assert_eq!(
            only_sick,
            "every free device of gpu.dra-ledger.io (class gpu) is unhealthy in the ledger, \
             tainted gpu.dra-ledger.io/unhealthy: node-0/gpu-1 (XidCritical): 2 devices, 1 \
             allocated, 0 cordoned, 0 missing"
        );
        assert!(
            only_cordoned.contains("carry the taint gpu.dra-ledger.io/cordoned"),
            "{only_cordoned}"
        );
        assert!(
            short.starts_with(
                "the claim asks for 2 devices of gpu.dra-ledger.io (class gpu), the ledger has 1 \
                 free and 1 unhealthy, tainted gpu.dra-ledger.io/unhealthy: node-0/gpu-1"
            ),
            "{short}"
        );
    }
}
