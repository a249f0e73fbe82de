//! The search's bookkeeping of shared devices: what is left of each counter of each pool (its
//! counter sets less what the devices allocated or in flight consume, each device once however
//! many shares it has), what the shares picked in the search consume of each device, and the
//! checks that a pick fits both.
//!
//! Pure: no I/O; the arithmetic is [`super::super::sharing`]'s.

use super::{Candidate, DeviceId, Picked, Search};
use crate::actors::scheduler_v1::quantity::Quantity;
use crate::actors::scheduler_v1::sharing::{
    consumption, counter_value, counters_of, fits_capacity, fits_whole, multiple, Amounts, Consumed,
};

impl Search<'_, '_> {
    /// Whether the device at `candidate` is allocated more than once.
    pub(super) fn multiple(&self, candidate: Candidate) -> bool {
        multiple(self.device(candidate), self.inventory.sharing)
    }

    /// Whether a device's counters are taken already: allocated whole or shared elsewhere, or
    /// picked earlier in this search.
    fn counted(&self, id: &DeviceId) -> bool {
        (self.inventory.allocated)(id)
            || (self.inventory.shares)(id).is_some()
            || self.allocating.contains_key(id)
    }

    /// What is left of every counter of every pool, from the devices allocated or in flight.
    pub(super) fn count_counters(&mut self) {
        if !self.inventory.sharing.partitionable {
            return;
        }
        for (p, pool) in self.pools.iter().enumerate() {
            for slice in &pool.slices {
                for set in &slice.spec.shared_counters {
                    for (name, counter) in &set.counters {
                        // A value that does not parse leaves nothing to consume.
                        let total = counter_value(&counter.value).map_or(0, Quantity::nanos);
                        self.counters.insert((p, &set.name, name), total);
                    }
                }
            }
        }
        if self.counters.is_empty() {
            return;
        }
        for p in 0..self.pools.len() {
            for slice in 0..self.pools[p].slices.len() {
                for device in 0..self.pools[p].slices[slice].spec.devices.len() {
                    let candidate = Candidate {
                        pool: p,
                        slice,
                        device,
                    };
                    let id = self.id(candidate);
                    let outside =
                        (self.inventory.allocated)(&id) || (self.inventory.shares)(&id).is_some();
                    if !outside {
                        continue;
                    }
                    let device = self.device(candidate);
                    for (set, counter, amount) in counters_of(device).unwrap_or_default() {
                        if let Some(left) = self.counters.get_mut(&(p, set, counter)) {
                            *left -= amount.nanos();
                        }
                    }
                }
            }
        }
    }

    /// Whether the pick of `candidate` for the request at `at` fits its counters and, for a
    /// share, the device's capacity: the share's consumption and whether the pick takes the
    /// counters, or `None` when it does not fit.
    pub(super) fn shares_fit(
        &self,
        at: super::At,
        candidate: Candidate,
        id: &DeviceId,
    ) -> Option<(Option<Vec<Consumed>>, bool)> {
        let data = &self.requests[at.claim][at.request][at.sub];
        let device = self.device(candidate);
        let sharing = self.inventory.sharing;
        let share = if data.admin || !sharing.consumable {
            None
        } else if multiple(device, sharing) {
            let consumed = consumption(data.capacity, device)?;
            let mut held = (self.inventory.shares)(id).unwrap_or_default();
            for (name, amount) in self.capacity.get(id).into_iter().flatten() {
                add(&mut held, name, amount.nanos());
            }
            if !fits_capacity(&consumed, device, &held) {
                return None;
            }
            Some(consumed)
        } else if fits_whole(data.capacity, device) {
            None
        } else {
            return None;
        };
        let counted = sharing.partitionable
            && !data.admin
            && !device.consumes_counters.is_empty()
            && !self.counted(id);
        if counted {
            for (set, counter, amount) in counters_of(device)? {
                let left = self.counters.get(&(candidate.pool, set, counter))?;
                if amount.nanos() > *left {
                    return None;
                }
            }
        }
        Some((share, counted))
    }

    /// Records what a pick that [`Search::shares_fit`] allowed takes.
    pub(super) fn take_shares(
        &mut self,
        candidate: Candidate,
        id: &DeviceId,
        share: Option<&[Consumed]>,
        counted: bool,
    ) {
        self.move_shares(candidate, id, share, counted, -1);
    }

    /// Undoes [`Search::take_shares`] for `picked`.
    pub(super) fn give_back_shares(&mut self, picked: &Picked) {
        let share = picked.share.clone();
        self.move_shares(
            picked.candidate,
            &picked.id,
            share.as_deref(),
            picked.counted,
            1,
        );
    }

    /// Moves a pick's counters and capacity: `sign` -1 takes, 1 gives back.
    fn move_shares(
        &mut self,
        candidate: Candidate,
        id: &DeviceId,
        share: Option<&[Consumed]>,
        counted: bool,
        sign: i128,
    ) {
        if counted {
            let device = self.device(candidate);
            for (set, counter, amount) in counters_of(device).unwrap_or_default() {
                if let Some(left) = self.counters.get_mut(&(candidate.pool, set, counter)) {
                    *left += sign * amount.nanos();
                }
            }
        }
        if let Some(share) = share {
            let held = self.capacity.entry(id.clone()).or_default();
            for consumed in share {
                add(held, &consumed.name, -sign * consumed.value.nanos());
            }
        }
    }
}

fn add(amounts: &mut Amounts, name: &str, nanos: i128) {
    let total = amounts
        .entry(name.to_owned())
        .or_insert(Quantity::from_int(0));
    *total = Quantity::from_nanos(total.nanos() + nanos);
}
