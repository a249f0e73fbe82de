//! The devices that the allocated claims of the claim informer hold, kept up to date on each claim
//! change (instead of decoding every claim's allocation at every cycle), counted per device so
//! that a device two claims hold for a moment stays in use until both let it go. A share of a
//! device allocated more than once (a result with a `shareID`) does not make the device in use:
//! its consumed capacity is added to what the device's shares hold.
//!
//! Plain data; the scheduler keeps it under its in-flight lock.

// Looked up for every device of every node in every cycle: a fast hasher, not SipHash.
use foldhash::{HashMap, HashSet};

use super::allocator::DeviceId;
use super::quantity::Quantity;
use super::sharing::Amounts;
use dra_types::resource_v1::DeviceRequestAllocationResult;

/// One device a claim holds: whole, or a share consuming these amounts of its capacities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The device.
    pub device: DeviceId,
    /// The share's consumed capacity; `None` for a device held whole.
    pub share: Option<Amounts>,
}

/// What the results of an allocation hold (admin-access results hold nothing); a consumed
/// amount that does not parse counts as nothing.
pub fn holdings(results: &[DeviceRequestAllocationResult]) -> Vec<Holding> {
    results
        .iter()
        .filter(|r| r.admin_access != Some(true))
        .map(|r| Holding {
            device: DeviceId::new(&r.driver, &r.pool, &r.device),
            share: r.share_id.as_ref().map(|_| {
                r.consumed_capacity
                    .iter()
                    .filter_map(|(name, q)| Some((name.clone(), Quantity::parse(&q.0).ok()?)))
                    .collect()
            }),
        })
        .collect()
}

/// Devices held by stored claims.
#[derive(Debug, Default)]
pub struct DevicesInUse {
    by_claim: HashMap<String, Vec<Holding>>,
    held: HashMap<DeviceId, u32>,
    /// Per shared device: how many shares, and what they consume together.
    shared: HashMap<DeviceId, (u32, Amounts)>,
}

impl DevicesInUse {
    /// Records that the claim with this UID holds `devices` now (none: it holds nothing).
    /// Returns whether a device it held before is free now.
    pub fn set(&mut self, claim_uid: &str, devices: Vec<Holding>) -> bool {
        if self.by_claim.get(claim_uid) == Some(&devices) {
            return false;
        }
        let freed = self.clear(claim_uid);
        if devices.is_empty() {
            return freed;
        }
        for holding in &devices {
            match &holding.share {
                None => *self.held.entry(holding.device.clone()).or_insert(0) += 1,
                Some(amounts) => {
                    let (count, sum) = self.shared.entry(holding.device.clone()).or_default();
                    *count += 1;
                    for (name, amount) in amounts {
                        let total = sum.entry(name.clone()).or_insert(Quantity::from_int(0));
                        *total = Quantity::from_nanos(total.nanos() + amount.nanos());
                    }
                }
            }
        }
        self.by_claim.insert(claim_uid.to_owned(), devices);
        freed
    }

    /// Forgets the claim with this UID; returns whether one of its devices is free now.
    pub fn clear(&mut self, claim_uid: &str) -> bool {
        let mut freed = false;
        for holding in self.by_claim.remove(claim_uid).unwrap_or_default() {
            let device = holding.device;
            let Some(amounts) = holding.share else {
                if let Some(count) = self.held.get_mut(&device) {
                    *count -= 1;
                    if *count == 0 {
                        self.held.remove(&device);
                        freed = true;
                    }
                }
                continue;
            };
            if let Some((count, sum)) = self.shared.get_mut(&device) {
                // A share let go frees capacity.
                freed = true;
                *count -= 1;
                if *count == 0 {
                    self.shared.remove(&device);
                    continue;
                }
                for (name, amount) in amounts {
                    if let Some(total) = sum.get_mut(&name) {
                        *total = Quantity::from_nanos(total.nanos() - amount.nanos());
                    }
                }
            }
        }
        freed
    }

    /// Replaces everything with the claims of a relist.
    pub fn reset(&mut self, claims: impl IntoIterator<Item = (String, Vec<Holding>)>) {
        *self = Self::default();
        for (uid, devices) in claims {
            self.set(&uid, devices);
        }
    }

    /// Whether a stored claim holds `device` whole.
    pub fn contains(&self, device: &DeviceId) -> bool {
        self.held.contains_key(device)
    }

    /// What the shares of `device` consume together; `None` when it has none.
    pub fn shares(&self, device: &DeviceId) -> Option<&Amounts> {
        self.shared.get(device).map(|(_, sum)| sum)
    }
}

/// What the shares of `device` in `a` and `b` consume together; `None` when neither has one.
pub fn shares_of(a: &DevicesInUse, b: &InFlightAllocations, device: &DeviceId) -> Option<Amounts> {
    let (a, b) = (a.shares(device), b.devices.shares(device));
    let mut sum = a.or(b)?.clone();
    if let (Some(_), Some(b)) = (a, b) {
        for (name, amount) in b {
            let total = sum.entry(name.clone()).or_insert(Quantity::from_int(0));
            *total = Quantity::from_nanos(total.nanos() + amount.nanos());
        }
    }
    Some(sum)
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
    pub fn insert(&mut self, claim_uid: &str, devices: Vec<Holding>) {
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

    fn whole(n: u32) -> Holding {
        Holding {
            device: gpu(n),
            share: None,
        }
    }

    fn share(n: u32, memory: &str) -> Holding {
        let amount = Quantity::parse(memory).unwrap();
        Holding {
            device: gpu(n),
            share: Some(Amounts::from([("memory".to_owned(), amount)])),
        }
    }

    #[test]
    fn shares_add_up_per_device_and_never_make_it_in_use() {
        let mut stored = DevicesInUse::default();
        let mut flying = InFlightAllocations::default();
        stored.set("a", vec![share(0, "40Gi")]);
        flying.insert("b", vec![share(0, "20Gi")]);
        assert!(!stored.contains(&gpu(0)) && !flying.holds(&gpu(0)));
        let memory = |sum: Option<Amounts>| sum.map(|s| s["memory"]);
        assert_eq!(
            memory(shares_of(&stored, &flying, &gpu(0))),
            Some(Quantity::parse("60Gi").unwrap())
        );
        assert!(stored.clear("a"), "a share let go frees capacity");
        assert_eq!(
            memory(shares_of(&stored, &flying, &gpu(0))),
            Some(Quantity::parse("20Gi").unwrap())
        );
        flying.remove("b");
        assert_eq!(shares_of(&stored, &flying, &gpu(0)), None);
    }

    #[test]
    fn a_device_is_in_use_until_every_claim_holding_it_lets_go() {
        let mut in_use = DevicesInUse::default();
        assert!(!in_use.set("a", vec![whole(0), whole(1)]));
        assert!(!in_use.set("b", vec![whole(1)]));
        assert!(in_use.contains(&gpu(0)) && in_use.contains(&gpu(1)));
        assert!(!in_use.clear("b"), "gpu-1 is still held by a");
        assert!(in_use.contains(&gpu(1)));
        assert!(in_use.set("a", vec![whole(0)]), "a let gpu-1 go");
        assert!(!in_use.contains(&gpu(1)));
        assert!(in_use.set("a", Vec::new()));
        assert!(!in_use.contains(&gpu(0)));
        in_use.reset([("c".to_owned(), vec![whole(2)])]);
        assert!(in_use.contains(&gpu(2)) && !in_use.contains(&gpu(0)));
    }

    #[test]
    fn an_allocation_in_flight_holds_its_devices_and_its_claim_until_removed() {
        let mut flying = InFlightAllocations::default();
        flying.insert("a", vec![whole(0)]);
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
