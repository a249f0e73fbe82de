//! A claim's constraints during the search: `matchAttribute` (every device of the named
//! requests has the attribute, all with one value) and `distinctAttribute` (every device has it,
//! each with a value no other of them has), added to as devices are picked and undone in the
//! reverse order as the search backtracks, as upstream's 1.36 allocator keeps them.
//!
//! Pure: no I/O.

use super::lookup_attribute;
use dra_types::resource_v1::{Device, DeviceAttribute, DeviceConstraint};

/// One constraint of a claim.
pub(super) struct AttributeConstraint<'a> {
    requests: &'a [String],
    attribute: &'a str,
    /// `distinctAttribute` rather than `matchAttribute`.
    distinct: bool,
    /// The values of the devices picked so far that the constraint applies to.
    values: Vec<DeviceAttribute>,
}

impl<'a> AttributeConstraint<'a> {
    /// The constraint `constraint` sets out; `None` when it names no attribute.
    pub(super) fn new(constraint: &'a DeviceConstraint) -> Option<Self> {
        let (attribute, distinct) = match (
            constraint.match_attribute.as_deref(),
            constraint.distinct_attribute.as_deref(),
        ) {
            (Some(attribute), _) => (attribute, false),
            (None, Some(attribute)) => (attribute, true),
            (None, None) => return None,
        };
        Some(Self {
            requests: &constraint.requests,
            attribute,
            distinct,
            values: Vec::new(),
        })
    }

    fn applies(&self, base: &str, sub: Option<&str>) -> bool {
        self.requests.is_empty()
            || self
                .requests
                .iter()
                .any(|r| r == base || sub.is_some_and(|sub| *r == format!("{base}/{sub}")))
    }

    /// Adds `device`, picked for request `base` (subrequest `sub`); `false` when the
    /// constraint refuses it (and nothing was added).
    pub(super) fn add(
        &mut self,
        base: &str,
        sub: Option<&str>,
        driver: &str,
        device: &Device,
    ) -> bool {
        if !self.applies(base, sub) {
            return true;
        }
        let Some(value) = lookup_attribute(device, driver, self.attribute) else {
            return false;
        };
        let fits = if self.distinct {
            !self.values.contains(value)
        } else {
            self.values.first().is_none_or(|first| first == value)
        };
        if fits {
            self.values.push(value.clone());
        }
        fits
    }

    /// Undoes the last [`AttributeConstraint::add`] for request `base` (subrequest `sub`).
    pub(super) fn remove(&mut self, base: &str, sub: Option<&str>) {
        if self.applies(base, sub) {
            self.values.pop();
        }
    }
}
