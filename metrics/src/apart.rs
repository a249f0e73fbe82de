//! The ledger's gauges and counters of what no device state counts: admin-access claims, which
//! look at devices and hold none, and device health, reported beside the state. Kept apart so
//! that the states of `dra_ledger_devices` keep summing to the device total.

use prometheus::{IntCounterVec, IntGauge, Opts};

use crate::{Result, PREFIX};

/// The values of the `health` label of `dra_ledger_device_health_changes_total`.
pub const HEALTH_VALUES: [&str; 2] = ["unhealthy", "healthy"];

/// See the module doc.
#[derive(Clone)]
pub(crate) struct Apart {
    pub(crate) admin_access_claims: IntGauge,
    pub(crate) unhealthy_devices: IntGauge,
    pub(crate) health_changes: IntCounterVec,
}

impl Apart {
    pub(crate) fn new() -> Result<Self> {
        let health_changes = IntCounterVec::new(
            Opts::new(
                format!("{PREFIX}device_health_changes_total"),
                "Device health changes recorded in the ledger, by the health a device changed to",
            ),
            &["health"],
        )?;
        for health in HEALTH_VALUES {
            health_changes.with_label_values(&[health]);
        }
        Ok(Apart {
            admin_access_claims: IntGauge::new(
                format!("{PREFIX}admin_access_claims"),
                "Admin-access claims in the ledger (they look at devices and hold none, so dra_ledger_devices does not count them)",
            )?,
            unhealthy_devices: IntGauge::new(
                format!("{PREFIX}unhealthy_devices"),
                "Devices in the ledger that their node agent reports unhealthy (each also counted in dra_ledger_devices by its state)",
            )?,
            health_changes,
        })
    }
}
