//! The allocator of `k8s.io/dynamic-resource-allocation/structured` (1.34): for one node, finds
//! devices for all requests of all the pod's unallocated claims at once, by an exhaustive
//! depth-first search that takes the first solution. A device matches a request when every
//! selector of its `DeviceClass` and of the request is true; `ExactCount` takes `count` devices,
//! `All` every matching device of the node (at least one; all pools must be complete);
//! `firstAvailable` tries its subrequests in order, each with everything after it; a
//! `matchAttribute` constraint makes the devices of its requests share one value of the
//! attribute, a `distinctAttribute` one gives each a value of its own. A device allocated in
//! any claim, in flight, or picked earlier in the same search is not taken again (admin-access
//! requests excepted), unless it allows multiple allocations: then it is taken while what the
//! request consumes of its capacities fits besides its other shares, and the result records a
//! `shareID` and the `consumedCapacity` ([`shares`]). A device that consumes counters is taken
//! only while they fit in its pool's counter sets. Pools are used at their newest generation;
//! incomplete and invalid pools give no devices.
//!
//! `Ok(None)` means the claims cannot be allocated on the node; `Err` is a claim or class that
//! cannot be evaluated (a CEL error), fatal for the whole scheduling attempt as upstream.
//! Pure: no I/O, no async.

mod constraints;
pub mod pools;
mod results;
mod shares;

// The search's maps are looked up for every device of every node in every cycle: a fast
// hasher, not SipHash.
use foldhash::{HashMap, HashMapExt, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::cel_env::{device_key, CelEnv, DeviceValue};
pub use super::error::AllocatorError;
use super::error::{DeviceValueError, EvaluationError};
use super::sharing::{Amounts, Consumed, Sharing};
use crate::actors::device_taints::{prevents_allocation, TaintView};
use constraints::AttributeConstraint;
use dra_types::resource_v1::{allocation_mode, exact_count, ALL, EXACT_COUNT};
use dra_types::resource_v1::{
    AllocationResult, CapacityRequirements, Device, DeviceAttribute, DeviceClaim, DeviceClass,
    DeviceSelector, DeviceToleration, ResourceSlice,
};
pub use pools::DeviceId;
use pools::Pool;

/// The most results one claim's allocation may have (API `AllocationResultsMaxSize`).
pub const MAX_RESULTS: usize = 32;

/// A claim to allocate: `namespace/name` (for messages) and its `spec.devices`.
#[derive(Debug, Clone, Copy)]
pub struct ClaimToAllocate<'a> {
    /// `namespace/name`.
    pub key: &'a str,
    /// The requests, constraints and config.
    pub spec: &'a DeviceClaim,
}

/// What an allocation may use.
pub struct Inventory<'a> {
    /// Every `ResourceSlice`.
    pub slices: &'a [Arc<ResourceSlice>],
    /// `DeviceClass` lookup by name.
    pub class: &'a dyn Fn(&str) -> Option<Arc<DeviceClass>>,
    /// Devices allocated whole in any claim or in flight.
    pub allocated: &'a dyn Fn(&DeviceId) -> bool,
    /// What the shares of a device in any claim or in flight consume together.
    pub shares: &'a dyn Fn(&DeviceId) -> Option<Amounts>,
    /// The sharing mechanisms in force.
    pub sharing: Sharing,
    /// The selector environment.
    pub cel: &'a CelEnv,
    /// The device taints in force, while `DRADeviceTaints` is on.
    pub taints: Option<TaintView<'a>>,
}

/// One request or subrequest, ready for the search.
struct RequestData<'a> {
    /// The request's name, or the parent's for a subrequest.
    base: &'a str,
    /// The subrequest's name.
    sub: Option<&'a str>,
    class: Arc<DeviceClass>,
    selectors: &'a [DeviceSelector],
    tolerations: &'a [DeviceToleration],
    /// What the request asks of each capacity.
    capacity: Option<&'a CapacityRequirements>,
    all: bool,
    admin: bool,
    count: usize,
    /// `All`: the matching devices of the node.
    all_devices: Vec<Candidate>,
}

impl RequestData<'_> {
    fn name(&self) -> String {
        match self.sub {
            Some(sub) => format!("{}/{sub}", self.base),
            None => self.base.to_owned(),
        }
    }
}

/// A device by its position: pool, slice, device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Candidate {
    pool: usize,
    slice: usize,
    device: usize,
}

/// Which device of which (sub)request the search is at.
#[derive(Debug, Clone, Copy, Default)]
struct At {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

/// One picked device.
#[derive(Debug, Clone)]
struct Picked {
    request: String,
    id: DeviceId,
    admin: bool,
    candidate: Candidate,
    /// A share of a multi-allocation device: what it consumes.
    share: Option<Vec<Consumed>>,
    /// Whether the pick took the device's counters.
    counted: bool,
}

/// The attribute `domain/id` of a device: the exact key, or the bare id when the domain is the
/// device's driver.
pub fn lookup_attribute<'d>(
    device: &'d Device,
    driver: &str,
    name: &str,
) -> Option<&'d DeviceAttribute> {
    if let Some(value) = device.attributes.get(name) {
        return Some(value);
    }
    let (domain, id) = name.split_once('/')?;
    (domain == driver)
        .then(|| device.attributes.get(id))
        .flatten()
}

/// How the search ended early.
enum Fail {
    /// A claim would exceed [`MAX_RESULTS`]; a smaller subrequest may still fit.
    MaxSize,
    /// Cannot be evaluated.
    Fatal(AllocatorError),
}

type Step = Result<bool, Fail>;

/// Tries to allocate `claims` (the pod's unallocated claims, in pod order) on `node`.
pub fn allocate(
    inventory: &Inventory<'_>,
    node: &Node,
    claims: &[ClaimToAllocate<'_>],
) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
    let pools = pools::gather(inventory.slices, node);
    let mut search = Search {
        inventory,
        claims,
        pools,
        requests: Vec::new(),
        constraints: Vec::new(),
        allocating: HashMap::new(),
        picked: vec![Vec::new(); claims.len()],
        chosen_sub: HashMap::new(),
        matches: HashMap::new(),
        values: HashMap::new(),
        keys: HashMap::new(),
        counters: HashMap::new(),
        capacity: HashMap::new(),
    };
    search.count_counters();
    search.prepare()?;
    match search.allocate_one(At::default(), false) {
        Ok(true) => {}
        Ok(false) | Err(Fail::MaxSize) => return Ok(None),
        Err(Fail::Fatal(error)) => return Err(error),
    }
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    Ok(Some(
        (0..claims.len())
            .map(|index| search.result(index, node_name))
            .collect(),
    ))
}

struct Search<'a, 'i> {
    inventory: &'i Inventory<'a>,
    claims: &'i [ClaimToAllocate<'a>],
    pools: Vec<Pool<'a>>,
    /// `[claim][request][subrequest]`; a request without subrequests has one entry.
    requests: Vec<Vec<Vec<RequestData<'a>>>>,
    constraints: Vec<Vec<AttributeConstraint<'a>>>,
    /// Devices picked in this search, with the claims they were picked for.
    allocating: HashMap<DeviceId, HashSet<usize>>,
    picked: Vec<Vec<Picked>>,
    /// `(claim, request)` -> the subrequest that succeeded.
    chosen_sub: HashMap<(usize, usize), usize>,
    matches: HashMap<(Candidate, usize, usize, usize), bool>,
    values: HashMap<Candidate, Result<Arc<DeviceValue>, Arc<DeviceValueError>>>,
    /// The [`device_key`] of each device looked at.
    keys: HashMap<Candidate, Arc<str>>,
    /// What is left of each counter, by pool, counter set and counter, in nano units.
    counters: HashMap<(usize, &'a str, &'a str), i128>,
    /// What the shares picked in this search consume of each device.
    capacity: HashMap<DeviceId, Amounts>,
}

impl<'a> Search<'a, '_> {
    fn slice(&self, c: Candidate) -> &'a ResourceSlice {
        self.pools[c.pool].slices[c.slice]
    }

    fn device(&self, c: Candidate) -> &'a Device {
        &self.slice(c).spec.devices[c.device]
    }

    fn id(&self, c: Candidate) -> DeviceId {
        let pool = &self.pools[c.pool];
        DeviceId::new(pool.driver, pool.name, &self.device(c).name)
    }

    /// Checks every request and constraint, looks up the classes and counts the devices.
    fn prepare(&mut self) -> Result<(), AllocatorError> {
        for (index, claim) in self.claims.iter().enumerate() {
            let mut requests = Vec::new();
            let mut minimum = 0;
            for request in &claim.spec.requests {
                let mut entries = Vec::new();
                if request.first_available.is_empty() {
                    let Some(exact) = &request.exactly else {
                        return Err(AllocatorError::NoDeviceClass {
                            claim: claim.key.to_owned(),
                            request: request.name.clone(),
                        });
                    };
                    let mut data = self.request_data(
                        index,
                        &request.name,
                        None,
                        &exact.device_class_name,
                        &exact.selectors,
                        (exact.allocation_mode.as_deref(), exact.count),
                        exact.admin_access == Some(true),
                    )?;
                    data.tolerations = &exact.tolerations;
                    data.capacity = exact.capacity.as_ref();
                    entries.push(data);
                } else {
                    for sub in &request.first_available {
                        let mut data = self.request_data(
                            index,
                            &request.name,
                            Some(&sub.name),
                            &sub.device_class_name,
                            &sub.selectors,
                            (sub.allocation_mode.as_deref(), sub.count),
                            false,
                        )?;
                        data.tolerations = &sub.tolerations;
                        data.capacity = sub.capacity.as_ref();
                        entries.push(data);
                    }
                }
                minimum += entries.iter().map(|e| e.count).min().unwrap_or(0);
                requests.push(entries);
            }
            if minimum > MAX_RESULTS {
                return Err(AllocatorError::TooManyDevices {
                    claim: claim.key.to_owned(),
                    count: minimum,
                    max: MAX_RESULTS,
                });
            }
            self.requests.push(requests);
            let mut constraints = Vec::new();
            for (i, constraint) in claim.spec.constraints.iter().enumerate() {
                let Some(constraint) = AttributeConstraint::new(constraint) else {
                    return Err(AllocatorError::EmptyConstraint {
                        claim: claim.key.to_owned(),
                        index: i,
                    });
                };
                constraints.push(constraint);
            }
            self.constraints.push(constraints);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)] // one call per request kind, each field named there
    fn request_data(
        &mut self,
        claim: usize,
        base: &'a str,
        sub: Option<&'a str>,
        class_name: &str,
        selectors: &'a [DeviceSelector],
        (mode, count): (Option<&str>, Option<i64>),
        admin: bool,
    ) -> Result<RequestData<'a>, AllocatorError> {
        let key = self.claims[claim].key;
        let name = sub.map_or_else(|| base.to_owned(), |sub| format!("{base}/{sub}"));
        if let Some(index) = selectors.iter().position(|s| s.cel.is_none()) {
            return Err(AllocatorError::EmptySelector {
                claim: key.to_owned(),
                request: name,
                index,
            });
        }
        let class =
            (self.inventory.class)(class_name).ok_or_else(|| AllocatorError::ClassNotFound {
                claim: key.to_owned(),
                request: name.clone(),
                class: class_name.to_owned(),
            })?;
        let mut data = RequestData {
            base,
            sub,
            class,
            selectors,
            tolerations: &[],
            capacity: None,
            all: false,
            admin,
            count: 0,
            all_devices: Vec::new(),
        };
        match allocation_mode(mode) {
            EXACT_COUNT => {
                data.count = usize::try_from(exact_count(count)).map_err(|_| {
                    AllocatorError::InvalidCount {
                        claim: key.to_owned(),
                        request: name.clone(),
                        count,
                    }
                })?;
            }
            ALL => {
                data.all = true;
                for p in 0..self.pools.len() {
                    let pool = &self.pools[p];
                    let state = if pool.incomplete {
                        Some("being updated")
                    } else if pool.invalid {
                        Some("invalid")
                    } else {
                        None
                    };
                    if let Some(state) = state {
                        return Err(AllocatorError::PoolNotReady {
                            claim: key.to_owned(),
                            request: name,
                            pool: pool.id(),
                            state,
                        });
                    }
                    let sizes: Vec<usize> =
                        pool.slices.iter().map(|s| s.spec.devices.len()).collect();
                    for (s, size) in sizes.into_iter().enumerate() {
                        for d in 0..size {
                            let candidate = Candidate {
                                pool: p,
                                slice: s,
                                device: d,
                            };
                            if self.selectable_for(claim, &data, candidate)? {
                                data.all_devices.push(candidate);
                            }
                        }
                    }
                }
                data.count = data.all_devices.len();
            }
            other => {
                return Err(AllocatorError::UnsupportedMode {
                    claim: key.to_owned(),
                    request: name,
                    mode: other.to_owned(),
                })
            }
        }
        Ok(data)
    }

    /// Whether the device matches the class's and the request's selectors (not cached: used
    /// before the request has its place in `requests`).
    fn selectable_for(
        &mut self,
        claim: usize,
        data: &RequestData<'a>,
        candidate: Candidate,
    ) -> Result<bool, AllocatorError> {
        let class = Arc::clone(&data.class);
        Ok(
            self.selectors_match(claim, Some(&class), &class.spec.selectors, candidate)?
                && self.selectors_match(claim, None, data.selectors, candidate)?,
        )
    }

    /// The device's [`device_key`], built once per search.
    fn device_key(&mut self, candidate: Candidate) -> Arc<str> {
        if let Some(key) = self.keys.get(&candidate) {
            return Arc::clone(key);
        }
        let driver = self.pools[candidate.pool].driver;
        let key: Arc<str> = device_key(driver, self.device(candidate)).into();
        self.keys.insert(candidate, Arc::clone(&key));
        key
    }

    fn device_value(
        &mut self,
        candidate: Candidate,
    ) -> Result<Arc<DeviceValue>, Arc<DeviceValueError>> {
        if let Some(value) = self.values.get(&candidate) {
            return value.clone();
        }
        let driver = self.pools[candidate.pool].driver;
        let value = DeviceValue::new(driver, self.device(candidate))
            .map(Arc::new)
            .map_err(Arc::new);
        self.values.insert(candidate, value.clone());
        value
    }

    fn selectors_match(
        &mut self,
        claim: usize,
        class: Option<&DeviceClass>,
        selectors: &[DeviceSelector],
        candidate: Candidate,
    ) -> Result<bool, AllocatorError> {
        let origin = || match class {
            Some(class) => format!(
                "class {}",
                class.metadata.name.as_deref().unwrap_or_default()
            ),
            None => format!("claim {}", self.claims[claim].key),
        };
        for (index, selector) in selectors.iter().enumerate() {
            let expression = selector
                .cel
                .as_ref()
                .map(|c| c.expression.as_str())
                .unwrap_or_default();
            let program = self.inventory.cel.compile(expression).map_err(|source| {
                AllocatorError::Compile {
                    origin: origin(),
                    index,
                    source,
                }
            })?;
            let key = self.device_key(candidate);
            let matched = self
                .inventory
                .cel
                .verdict(&key, expression, || {
                    let value = self
                        .device_value(candidate)
                        .map_err(EvaluationError::Device)?;
                    self.inventory.cel.matches(&program, &value)
                })
                .map_err(|source| AllocatorError::Evaluation {
                    origin: origin(),
                    index,
                    source,
                })?;
            if !matched {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether the device matches the (sub)request at `at`, cached per device and request.
    fn selectable(&mut self, at: At, candidate: Candidate) -> Result<bool, Fail> {
        let key = (candidate, at.claim, at.request, at.sub);
        if let Some(matches) = self.matches.get(&key) {
            return Ok(*matches);
        }
        let class = Arc::clone(&self.requests[at.claim][at.request][at.sub].class);
        let selectors = self.requests[at.claim][at.request][at.sub].selectors;
        let matches = self
            .selectors_match(at.claim, Some(&class), &class.spec.selectors, candidate)
            .and_then(|ok| {
                if ok {
                    self.selectors_match(at.claim, None, selectors, candidate)
                } else {
                    Ok(false)
                }
            })
            .map_err(Fail::Fatal)?;
        self.matches.insert(key, matches);
        Ok(matches)
    }

    fn in_use(&self, candidate: Candidate, id: &DeviceId, at: At, admin: bool) -> bool {
        if admin {
            self.allocating
                .get(id)
                .is_some_and(|claims| claims.contains(&at.claim))
        } else if self.multiple(candidate) {
            false
        } else {
            (self.inventory.allocated)(id) || self.allocating.contains_key(id)
        }
    }

    /// `allocateOne`: allocates the device at `at` and, recursively, everything after it.
    fn allocate_one(&mut self, at: At, in_sub: bool) -> Step {
        if at.claim >= self.claims.len() {
            return Ok(true);
        }
        if at.request >= self.requests[at.claim].len() {
            let next = At {
                claim: at.claim + 1,
                ..At::default()
            };
            return match self.allocate_one(next, false) {
                Err(Fail::MaxSize) => Ok(false),
                other => other,
            };
        }
        let has_subs = self.requests[at.claim][at.request][0].sub.is_some();
        if !in_sub && has_subs {
            let mut all_exceeded = true;
            for sub in 0..self.requests[at.claim][at.request].len() {
                match self.allocate_one(At { sub, ..at }, true) {
                    Err(Fail::MaxSize) => {}
                    Err(fatal) => return Err(fatal),
                    Ok(true) => {
                        self.chosen_sub.insert((at.claim, at.request), sub);
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded {
                Err(Fail::MaxSize)
            } else {
                Ok(false)
            };
        }
        let data = &self.requests[at.claim][at.request][at.sub];
        let (all, count, admin) = (data.all, data.count, data.admin);
        if all && data.all_devices.is_empty() {
            return Ok(false);
        }
        if at.device >= count {
            let next = At {
                claim: at.claim,
                request: at.request + 1,
                ..At::default()
            };
            return self.allocate_one(next, false);
        }
        if self.picked[at.claim].len() + count - at.device > MAX_RESULTS {
            return Err(Fail::MaxSize);
        }
        let next = At {
            device: at.device + 1,
            ..at
        };
        if all {
            let candidate = self.requests[at.claim][at.request][at.sub].all_devices[at.device];
            if !self.allocate_device(at, candidate, true)? {
                return Ok(false);
            }
            let done = self.allocate_one(next, in_sub);
            if !matches!(done, Ok(true)) {
                self.deallocate(at);
            }
            return done;
        }
        for pool in 0..self.pools.len() {
            if self.pools[pool].incomplete || self.pools[pool].invalid {
                continue;
            }
            for slice in 0..self.pools[pool].slices.len() {
                for device in 0..self.pools[pool].slices[slice].spec.devices.len() {
                    let candidate = Candidate {
                        pool,
                        slice,
                        device,
                    };
                    if self.in_use(candidate, &self.id(candidate), at, admin)
                        || !self.selectable(at, candidate)?
                        || !self.allocate_device(at, candidate, false)?
                    {
                        continue;
                    }
                    match self.allocate_one(next, in_sub) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.deallocate(at),
                        Err(fail) => {
                            self.deallocate(at);
                            return Err(fail);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// `allocateDevice`: records the device for the (sub)request at `at` when it is free and the
    /// claim's constraints allow it. For `All` (`must`) a constraint that refuses is an error.
    fn allocate_device(&mut self, at: At, candidate: Candidate, must: bool) -> Result<bool, Fail> {
        let data = &self.requests[at.claim][at.request][at.sub];
        let (base, sub, admin, request) = (data.base, data.sub, data.admin, data.name());
        let id = self.id(candidate);
        if self.in_use(candidate, &id, at, admin) {
            return Ok(false);
        }
        let driver = self.pools[candidate.pool].driver;
        let device = self.device(candidate);
        if let Some(view) = self.inventory.taints {
            let taints = view.taints_of((driver, &id.pool, &device.name), &device.taints);
            if prevents_allocation(
                taints,
                self.requests[at.claim][at.request][at.sub].tolerations,
            ) {
                return Ok(false);
            }
        }
        let Some((share, counted)) = self.shares_fit(at, candidate, &id) else {
            return Ok(false);
        };
        let constraints = &mut self.constraints[at.claim];
        for i in 0..constraints.len() {
            if !constraints[i].add(base, sub, driver, device) {
                if must {
                    return Err(Fail::Fatal(AllocatorError::ConstraintUnsatisfied {
                        claim: self.claims[at.claim].key.to_owned(),
                        request,
                        device: id.to_string(),
                    }));
                }
                for earlier in &mut constraints[..i] {
                    earlier.remove(base, sub);
                }
                return Ok(false);
            }
        }
        self.take_shares(candidate, &id, share.as_deref(), counted);
        self.allocating
            .entry(id.clone())
            .or_default()
            .insert(at.claim);
        self.picked[at.claim].push(Picked {
            request,
            id,
            admin,
            candidate,
            share,
            counted,
        });
        Ok(true)
    }

    /// Undoes the last [`Search::allocate_device`] of the claim at `at`.
    fn deallocate(&mut self, at: At) {
        let Some(picked) = self.picked[at.claim].pop() else {
            return;
        };
        let data = &self.requests[at.claim][at.request][at.sub];
        let (base, sub) = (data.base, data.sub);
        for constraint in &mut self.constraints[at.claim] {
            constraint.remove(base, sub);
        }
        self.give_back_shares(&picked);
        if let Some(claims) = self.allocating.get_mut(&picked.id) {
            claims.remove(&at.claim);
            if claims.is_empty() {
                self.allocating.remove(&picked.id);
            }
        }
    }
}

#[cfg(test)]
mod tests;
