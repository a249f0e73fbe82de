//! The devices that the allocated claims of the claim informer hold, kept up to date on each claim
//! change (instead of decoding every claim's allocation at every cycle), counted per device so
//! that a device two claims hold for a moment stays in use until both let it go.
//!
//! Plain data; the scheduler keeps it under its in-flight lock.

// Looked up for every device of every node in every cycle: a fast hasher, not SipHash.
use foldhash::{HashMap, HashSet};

use super::allocator::DeviceId;

/// Devices held by stored claims.
#[derive(Debug, Default)]
pub struct DevicesInUse {
    by_claim: HashMap<String, Vec<DeviceId>>,
    held: HashMap<DeviceId, u32>,
}

impl DevicesInUse {
    /// Records that the claim with this UID holds `devices` now (none: it holds nothing).
    /// Returns whether a device it held before is free now.
    pub fn set(&mut self, claim_uid: &str, devices: Vec<DeviceId>) -> bool {
        if self.by_claim.get(claim_uid) == Some(&devices) {
            return false;
        }
        let freed = self.clear(claim_uid);
        if devices.is_empty() {
            return freed;
        }
        for device in &devices {
            *self.held.entry(device.clone()).or_insert(0) += 1;
        }
        self.by_claim.insert(claim_uid.to_owned(), devices);
        freed
    }

    /// Forgets the claim with this UID; returns whether one of its devices is free now.
    pub fn clear(&mut self, claim_uid: &str) -> bool {
        let mut freed = false;
        for device in self.by_claim.remove(claim_uid).unwrap_or_default() {
            if let Some(count) = self.held.get_mut(&device) {
                *count -= 1;
                if *count == 0 {
                    self.held.remove(&device);
                    freed = true;
                }
            }
        }
        freed
    }

    /// Replaces everything with the claims of a relist.
    pub fn reset(&mut self, claims: impl IntoIterator<Item = (String, Vec<DeviceId>)>) {
        *self = Self::default();
        for (uid, devices) in claims {
            self.set(&uid, devices);
        }
    }

    /// Whether a stored claim holds `device`.
    pub fn contains(&self, device: &DeviceId) -> bool {
        self.held.contains_key(device)
    }
}

/// The allocations that cycles decided and whose claim writes the informer does not show yet:
/// the claims, and their devices counted as [`DevicesInUse`] does, so that a device is looked up
/// at once however many allocations are in flight.
#[derive(Debug, Default)]
pub struct InFlightAllocations {
    claims: HashSet<String>,
    devices: DevicesInUse,
}

impl InFlightAllocations {
    /// Records the allocation of the claim with this UID, taking `devices`.
    pub fn insert(&mut self, claim_uid: &str, devices: Vec<DeviceId>) {
        self.claims.insert(claim_uid.to_owned());
        self.devices.set(claim_uid, devices);
    }

    /// Forgets the claim with this UID (its allocation is stored, or was not written).
    pub fn remove(&mut self, claim_uid: &str) {
        if self.claims.remove(claim_uid) {
            self.devices.clear(claim_uid);
        }
    }

    /// Whether an allocation of the claim with this UID is in flight.
    pub fn has_claim(&self, claim_uid: &str) -> bool {
        self.claims.contains(claim_uid)
    }

    /// Whether an allocation in flight takes `device`.
    pub fn holds(&self, device: &DeviceId) -> bool {
        self.devices.contains(device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(n: u32) -> DeviceId {
        DeviceId::new("gpu.example.com", "node-0", &format!("gpu-{n}"))
    }

    #[test]
    fn a_device_is_in_use_until_every_claim_holding_it_lets_go() {
        let mut in_use = DevicesInUse::default();
        assert!(!in_use.set("a", vec![gpu(0), gpu(1)]));
        assert!(!in_use.set("b", vec![gpu(1)]));
        assert!(in_use.contains(&gpu(0)) && in_use.contains(&gpu(1)));
        assert!(!in_use.clear("b"), "gpu-1 is still held by a");
        assert!(in_use.contains(&gpu(1)));
        assert!(in_use.set("a", vec![gpu(0)]), "a let gpu-1 go");
        assert!(!in_use.contains(&gpu(1)));
        assert!(in_use.set("a", Vec::new()));
        assert!(!in_use.contains(&gpu(0)));
        in_use.reset([("c".to_owned(), vec![gpu(2)])]);
        assert!(in_use.contains(&gpu(2)) && !in_use.contains(&gpu(0)));
    }

    #[test]
    fn an_allocation_in_flight_holds_its_devices_and_its_claim_until_removed() {
        let mut flying = InFlightAllocations::default();
        flying.insert("a", vec![gpu(0)]);
        flying.insert("admin", Vec::new());
        assert!(flying.has_claim("a") && flying.holds(&gpu(0)));
        assert!(
            flying.has_claim("admin"),
            "a claim without exclusive devices"
        );
        assert!(!flying.holds(&gpu(1)));
        flying.remove("a");
        flying.remove("never");
        assert!(!flying.has_claim("a") && !flying.holds(&gpu(0)));
        assert!(flying.has_claim("admin"));
    }
}
