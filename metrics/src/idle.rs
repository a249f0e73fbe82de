//! The idle gauge: the devices of allocated claims that no consumer has used, by how long at
//! least (`idle_for`, from the fixed set [`IDLE_FOR`]), never per claim or node. Set on each
//! scrape from the claims the admin API's `GET /v1/idle` lists.

use prometheus::{IntGaugeVec, Opts};

use crate::{Result, PREFIX};

/// The values of the `idle_for` label and their thresholds in seconds: a device counts in every
/// bucket its claim has been idle for longer than.
pub const IDLE_FOR: [(&str, u64); 4] = [("0s", 0), ("10m", 600), ("1h", 3600), ("24h", 86_400)];

/// See the module doc.
#[derive(Clone)]
pub(crate) struct Idle {
    pub(crate) devices: IntGaugeVec,
}

impl Idle {
    pub(crate) fn new() -> Result<Self> {
        let devices = IntGaugeVec::new(
            Opts::new(
                format!("{PREFIX}idle_allocated_devices"),
                "Allocated devices whose claim no consumer has used (status.reservedFor empty) for longer than idle_for",
            ),
            &["idle_for"],
        )?;
        for (label, _) in IDLE_FOR {
            devices.with_label_values(&[label]);
        }
        Ok(Idle { devices })
    }

    /// Sets every bucket from `(idle seconds, devices)` of each idle claim.
    pub(crate) fn set(&self, claims: &[(u64, usize)]) {
        for (label, threshold) in IDLE_FOR {
            let devices: usize = claims
                .iter()
                .filter(|(seconds, _)| *seconds > threshold || threshold == 0)
                .map(|(_, devices)| devices)
                .sum();
            self.devices
                .with_label_values(&[label])
                .set(i64::try_from(devices).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(idle: &Idle, label: &str) -> i64 {
        idle.devices.with_label_values(&[label]).get()
    }

    #[test]
    fn each_bucket_counts_the_devices_idle_for_longer_than_it() {
        let idle = Idle::new().unwrap();
        idle.set(&[(5, 1), (601, 2), (7200, 4)]);
        let buckets: Vec<i64> = IDLE_FOR.iter().map(|(l, _)| bucket(&idle, l)).collect();
        assert_eq!(buckets, [7, 6, 4, 0]);
        idle.set(&[]);
        assert_eq!(bucket(&idle, "0s"), 0);
    }
}
