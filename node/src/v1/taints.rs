//! The device taints of unhealthy devices in the node's `ResourceSlice`: key
//! `<driver>/unhealthy`, value the reason (`XidCritical`, `PcieAerFatal`, `Marked`, ...; see
//! [`crate::health::Reason`]), effect from `--unhealthy-taint-effect`, `timeAdded` when the
//! device became unhealthy. A device that is healthy again (or Unknown) has no such taint. Pure.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::SubsecRound;

use crate::health::HealthMap;
use dra_types::resource_v1::{
    Device, DeviceTaint, ResourceSlice, EFFECT_NONE, NO_EXECUTE, NO_SCHEDULE,
};

/// The effect of the taint an unhealthy device gets (`--unhealthy-taint-effect`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaintEffect {
    /// New claims do not get the device; pods using it keep running (the default, as in
    /// NVIDIA's driver: evicting running work is the operator's choice).
    #[default]
    NoSchedule,
    /// New claims do not get the device and the pods using it are evicted.
    NoExecute,
    /// Informational: the taint is shown, nothing is kept off.
    None,
}

impl TaintEffect {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => NO_SCHEDULE,
            TaintEffect::NoExecute => NO_EXECUTE,
            TaintEffect::None => EFFECT_NONE,
        }
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--unhealthy-taint-effect` value that is none of the three.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown taint effect {0:?}: expected NoSchedule, NoExecute or None")]
pub struct TaintEffectParse(pub String);

impl FromStr for TaintEffect {
    type Err = TaintEffectParse;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            NO_SCHEDULE => Ok(TaintEffect::NoSchedule),
            NO_EXECUTE => Ok(TaintEffect::NoExecute),
            EFFECT_NONE => Ok(TaintEffect::None),
            other => Err(TaintEffectParse(other.to_owned())),
        }
    }
}

/// The key of the health taint of `driver`'s devices.
pub fn unhealthy_key(driver: &str) -> String {
    format!("{driver}/unhealthy")
}

/// Puts the health taint on each device of `slice` that `health` calls unhealthy (after the
/// taints it has), and takes it off the others.
pub fn apply_health_taints(
    slice: &mut ResourceSlice,
    health: &HealthMap,
    driver: &str,
    effect: TaintEffect,
) {
    for device in &mut slice.spec.devices {
        taint_device(device, health, driver, effect);
    }
}

/// Puts the health taint on `device` if `health` calls it unhealthy (after the taints it has),
/// and takes it off otherwise.
pub fn taint_device(device: &mut Device, health: &HealthMap, driver: &str, effect: TaintEffect) {
    let key = unhealthy_key(driver);
    device.taints.retain(|taint| taint.key != key);
    let Some(unhealthy) = health.get(&device.name).filter(|h| h.is_unhealthy()) else {
        return;
    };
    device.taints.push(DeviceTaint {
        key,
        value: unhealthy.reason.map(|r| r.as_str().to_owned()),
        effect: effect.as_str().to_owned(),
        // the API server keeps whole seconds: the slice read back compares equal
        time_added: Some(Time(unhealthy.since.trunc_subsecs(0))),
    });
}

/// Takes the health taints off every device of `slice` (where the API server drops taints).
pub fn strip_health_taints(slice: &mut ResourceSlice, driver: &str) {
    let key = unhealthy_key(driver);
    for device in &mut slice.spec.devices {
        device.taints.retain(|taint| taint.key != key);
    }
}

/// Whether `slice` carries a health taint of `driver`.
pub fn has_health_taints(slice: &ResourceSlice, driver: &str) -> bool {
    let key = unhealthy_key(driver);
    slice
        .spec
        .devices
        .iter()
        .any(|device| device.taints.iter().any(|taint| taint.key == key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{DeviceHealth, HealthState, Reason};
    use k8s_openapi::chrono::{DateTime, TimeDelta, Utc};

    fn slice(names: &[&str]) -> ResourceSlice {
        let mut slice = ResourceSlice::default();
        slice.spec.devices = names
            .iter()
            .map(|name| Device {
                name: (*name).to_owned(),
                ..Device::default()
            })
            .collect();
        slice
    }

    #[test]
    fn an_unhealthy_device_gets_one_taint_with_its_reason_and_since_and_loses_it_when_healthy() {
        let since = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap()
            + TimeDelta::milliseconds(750);
        let unhealthy = DeviceHealth {
            state: HealthState::Unhealthy,
            reason: Some(Reason::XidCritical),
            message: Some("critical Xid 79".to_owned()),
            since,
        };
        let mut health = HealthMap::from([
            ("gpu-0".to_owned(), unhealthy),
            (
                "gpu-1".to_owned(),
                DeviceHealth {
                    state: HealthState::Unknown,
                    ..DeviceHealth::healthy(since)
                },
            ),
        ]);
        let mut s = slice(&["gpu-0", "gpu-1"]);
        s.spec.devices[0].taints.push(DeviceTaint {
            key: "example.com/maintenance".to_owned(),
            value: None,
            effect: NO_SCHEDULE.to_owned(),
            time_added: None,
        });
        apply_health_taints(&mut s, &health, "gpu.example.com", TaintEffect::NoExecute);
        apply_health_taints(&mut s, &health, "gpu.example.com", TaintEffect::NoExecute);
        let taints = &s.spec.devices[0].taints;
        assert_eq!(
            taints.len(),
            2,
            "the device's other taints stay: {taints:?}"
        );
        assert_eq!(taints[1].key, "gpu.example.com/unhealthy");
        assert_eq!(taints[1].value.as_deref(), Some("XidCritical"));
        assert_eq!(taints[1].effect, "NoExecute");
        assert_eq!(
            taints[1].time_added,
            Some(Time(DateTime::from_timestamp(1_800_000_000, 0).unwrap()))
        );
        assert!(
            s.spec.devices[1].taints.is_empty(),
            "Unknown is not tainted"
        );
        assert!(has_health_taints(&s, "gpu.example.com"));

        health.insert("gpu-0".to_owned(), DeviceHealth::healthy(since));
        apply_health_taints(&mut s, &health, "gpu.example.com", TaintEffect::NoExecute);
        assert_eq!(s.spec.devices[0].taints.len(), 1);
        assert!(!has_health_taints(&s, "gpu.example.com"));
    }

    #[test]
    fn the_effect_flag_reads_the_three_api_effects_only() {
        for effect in [
            TaintEffect::NoSchedule,
            TaintEffect::NoExecute,
            TaintEffect::None,
        ] {
            assert_eq!(effect.as_str().parse::<TaintEffect>(), Ok(effect));
        }
        assert_eq!(
            "noschedule".parse::<TaintEffect>().unwrap_err().to_string(),
            "unknown taint effect \"noschedule\": expected NoSchedule, NoExecute or None"
        );
    }
}
