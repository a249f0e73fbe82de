//! The per-node placement search shared by every public entry point: usable devices per
//! request, quick necessary checks with readable reasons, then an exact backtracking search
//! (with symmetry breaking between interchangeable devices) for all requests at once.
//! Pure; works on borrowed inventory data and reuses its buffers from node to node.

use std::fmt::Write as _;

use super::backtrack::Search;
use super::compact::{Interner, Usage};
use super::inventory::NodeRef;
use super::{NamedRequest, NodeReservations};
use crate::model::{CompiledRequirement, Policy, Requirement, Sharing};

/// Reason texts after "<free> of <count>".
const DEVICES_FREE: &str = " devices free";
const SAME_VALUE: &str = " devices free with one value of ";

/// Appends a decimal number without going through the formatting machinery.
fn push_number(out: &mut String, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[i..].iter().map(|&d| char::from(d)));
}

/// A reason of the form `claim <name>: <free> of <count> devices free[...] matching <selector>`,
/// built by appending: the gang check writes one per rejected node.
fn shortfall_failure(name: &str, claim: &Claim, input: usize, free: usize, what: &str) -> Failure {
    let mut reason = String::with_capacity(
        name.len() + what.len() + claim.matching.len() + claim.same_name.len() + 40,
    );
    reason.push_str("claim ");
    reason.push_str(name);
    reason.push_str(": ");
    push_number(&mut reason, free);
    reason.push_str(" of ");
    push_number(&mut reason, claim.count);
    reason.push_str(what);
    if what == SAME_VALUE {
        reason.push_str(&claim.same_name);
    }
    reason.push_str(&claim.matching);
    Failure {
        claim: Some(input),
        reason,
    }
}

/// One requirement with its answers memoised per interned value of its attribute.
struct Check {
    attribute: Option<u32>,
    requirement: CompiledRequirement,
    /// Index = value id; 0 = not evaluated, 1 = matches, 2 = does not.
    memo: Vec<u8>,
    /// The answer for devices without the attribute.
    when_missing: bool,
}

impl Check {
    fn new(requirement: &Requirement, interner: &Interner) -> Self {
        let compiled = CompiledRequirement::new(requirement);
        let attribute = interner.attribute(&requirement.attribute);
        Check {
            attribute,
            when_missing: compiled.matches_value(None),
            requirement: compiled,
            // The inventory does not change during a check, so neither does the value count.
            memo: vec![0; attribute.map_or(0, |a| interner.values(a).len())],
        }
    }

    fn matches(&mut self, interner: &Interner, entry: &NodeRef<'_>, d: usize) -> bool {
        let Some(attribute) = self.attribute else {
            return self.when_missing;
        };
        let Some(value) = entry.value_id(d, attribute) else {
            return self.when_missing;
        };
        match self.memo[value as usize] {
            1 => true,
            2 => false,
            _ => {
                let value_text = interner.values(attribute).get(value);
                let hit = self.requirement.matches_value(Some(value_text));
                self.memo[value as usize] = if hit { 1 } else { 2 };
                hit
            }
        }
    }
}

/// `" matching <selector>"` as [`crate::model::EffectiveRequest::selector_text`] writes the
/// selector, or empty for an empty selector; built in one string.
fn matching_text(selector: &[Requirement]) -> String {
    let mut text = String::new();
    for (i, requirement) in selector.iter().enumerate() {
        text.push_str(if i == 0 { " matching " } else { ", " });
        let _ = write!(text, "{requirement}");
    }
    text
}

/// Too few devices for one request: how many there were, and the reason text after the count.
#[derive(Clone, Copy)]
struct Shortfall {
    free: usize,
    what: &'static str,
}

/// Why a node was rejected, before it is tied to a node name.
pub(crate) struct Failure {
    pub(crate) claim: Option<usize>,
    pub(crate) reason: String,
}

/// One request's candidate devices on the current node: `devices` split into groups (one per
/// `sameAttribute` value, or a single group) by `bounds`.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) devices: Vec<usize>,
    pub(super) bounds: Vec<(usize, usize)>,
}

/// A request's `sameAttribute`, resolved against the interned attribute names.
#[derive(Clone, Copy)]
enum Same {
    /// No `sameAttribute`.
    Unset,
    /// An attribute some device carries.
    Attribute(u32),
    /// An attribute no device carries: nothing is eligible.
    Unknown,
}

/// What a request needs, resolved against the inventory once per check.
pub(super) struct Claim {
    pub(super) sharing: Sharing,
    pub(super) count: usize,
    policy: Policy,
    selector: usize,
    same: Same,
    /// The `sameAttribute` name, for reasons.
    same_name: String,
    /// `" matching <selector>"` or empty, for reasons.
    matching: String,
}

/// Requests compiled once and reused for every node of a check.
pub(crate) struct Prepared<'a> {
    names: Vec<&'a str>,
    claims: Vec<Claim>,
    selectors: Vec<Vec<Check>>,
    usage: Vec<Usage>,
    plans: Vec<Plan>,
    order: Vec<usize>,
    grouping: Vec<(u32, usize)>,
    groups: Vec<(usize, usize, usize)>,
    chosen: Vec<Vec<usize>>,
    /// Per device and plan: the device's group in the plan plus one, or 0 (see `Search`).
    membership: Vec<u32>,
    /// Reasons written so far in this check, by request and shortfall: nodes that fail alike
    /// get copies of one text instead of each writing it anew.
    reasons: Vec<(usize, usize, &'static str, String)>,
}

impl<'a> Prepared<'a> {
    pub(crate) fn new(claims: &[NamedRequest<'a>], interner: &Interner) -> Self {
        let mut selectors: Vec<Vec<Check>> = Vec::new();
        let mut compiled: Vec<Claim> = Vec::with_capacity(claims.len());
        for (i, claim) in claims.iter().enumerate() {
            let request = claim.request;
            let earlier = claims[..i]
                .iter()
                .position(|c| c.request.selector == request.selector);
            let selector = if let Some(j) = earlier {
                compiled[j].selector
            } else {
                selectors.push(
                    request
                        .selector
                        .iter()
                        .map(|r| Check::new(r, interner))
                        .collect(),
                );
                selectors.len() - 1
            };
            compiled.push(Claim {
                sharing: request.sharing,
                count: usize::from(request.count),
                policy: request.policy,
                selector,
                same: match &request.same_attribute {
                    None => Same::Unset,
                    Some(a) => interner.attribute(a).map_or(Same::Unknown, Same::Attribute),
                },
                same_name: request.same_attribute.clone().unwrap_or_default(),
                matching: matching_text(&request.selector),
            });
        }
        Prepared {
            names: claims.iter().map(|c| c.name).collect(),
            plans: (0..claims.len()).map(|_| Plan::default()).collect(),
            claims: compiled,
            selectors,
            usage: Vec::new(),
            order: Vec::new(),
            grouping: Vec::new(),
            groups: Vec::new(),
            chosen: Vec::new(),
            membership: Vec::new(),
            reasons: Vec::new(),
        }
    }

    /// Chooses devices (indices into the node's devices) for every request, in input order.
    pub(crate) fn place(
        &mut self,
        interner: &Interner,
        entry: &NodeRef<'_>,
        reservations: NodeReservations<'_>,
    ) -> Result<Vec<Vec<usize>>, Failure> {
        self.fits(interner, entry, reservations)?;
        let mut result = vec![Vec::new(); self.claims.len()];
        for (&input, devices) in self.order.iter().zip(&self.chosen) {
            result[input].clone_from(devices);
        }
        Ok(result)
    }

    /// Whether all requests fit on the node; on success the choice is left in `chosen` (by
    /// search position, see `order`). Allocates nothing once its buffers have grown.
    pub(crate) fn fits(
        &mut self,
        interner: &Interner,
        entry: &NodeRef<'_>,
        reservations: NodeReservations<'_>,
    ) -> Result<(), Failure> {
        self.base_usage(entry, reservations);
        for input in 0..self.claims.len() {
            if let Err(shortfall) = self.plan(input, interner, entry) {
                return Err(self.too_few(input, shortfall));
            }
        }
        self.check_exclusive_totals()?;
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(0..self.claims.len());
        order.sort_by_key(|&i| (self.plans[i].devices.len() - self.claims[i].count, i));
        let mut chosen = std::mem::take(&mut self.chosen);
        chosen.resize_with(order.len(), Vec::new);
        chosen.iter_mut().for_each(Vec::clear);
        self.fill_membership();
        let mut search = Search::new(
            &self.claims,
            &self.plans,
            &self.membership,
            &order,
            &mut self.usage,
            chosen,
        );
        let found = search.place(0);
        let (deepest, exhausted) = (search.deepest, search.exhausted);
        self.chosen = search.chosen;
        let claim = order.get(deepest).copied();
        self.order = order;
        let Some(claim) = claim.filter(|_| !found) else {
            return Ok(());
        };
        let name = self.names[claim];
        let what = if exhausted {
            ": too many combinations to check alongside the pod's other claims"
        } else {
            ": does not fit alongside the pod's other claims"
        };
        let mut reason = String::with_capacity(6 + name.len() + what.len());
        reason.push_str("claim ");
        reason.push_str(name);
        reason.push_str(what);
        Err(Failure {
            claim: Some(claim),
            reason,
        })
    }

    /// The failure of request `input` for `shortfall`, its text copied from an earlier node that
    /// fell short alike when there was one.
    fn too_few(&mut self, input: usize, shortfall: Shortfall) -> Failure {
        let Shortfall { free, what } = shortfall;
        let known = self
            .reasons
            .iter()
            .find(|(i, f, w, _)| *i == input && *f == free && *w == what);
        let reason = if let Some((_, _, _, text)) = known {
            text.clone()
        } else {
            let failure =
                shortfall_failure(self.names[input], &self.claims[input], input, free, what);
            self.reasons
                .push((input, free, what, failure.reason.clone()));
            failure.reason
        };
        Failure {
            claim: Some(input),
            reason,
        }
    }

    /// Records each device's group in every plan, so that the search compares two devices'
    /// places in all plans in one short slice comparison.
    fn fill_membership(&mut self) {
        let plans = self.plans.len();
        self.membership.clear();
        self.membership.resize(self.usage.len() * plans, 0);
        for (p, plan) in self.plans.iter().enumerate() {
            for (g, &(begin, end)) in plan.bounds.iter().enumerate() {
                let group = u32::try_from(g + 1).unwrap_or(u32::MAX);
                for &d in &plan.devices[begin..end] {
                    self.membership[d * plans + p] = group;
                }
            }
        }
    }

    fn base_usage(&mut self, entry: &NodeRef<'_>, reservations: NodeReservations<'_>) {
        self.usage.clear();
        self.usage.extend(entry.block.usages());
        for (device, _) in reservations.released {
            let view = entry.view();
            if let Some(i) = view.position(device) {
                let device = &view.devices[i];
                self.usage[i] = Usage::of_holders(device, |holder| {
                    !reservations
                        .released
                        .iter()
                        .any(|(d, uid)| *d == device.device.name && uid == holder)
                });
            }
        }
        for (device, sharing) in reservations.taken {
            if let Some(i) = entry.view().position(device) {
                self.usage[i].take(*sharing);
            }
        }
    }

    /// Fills the plan of request `input` with its usable matching devices, or says why there
    /// are too few.
    fn plan(
        &mut self,
        input: usize,
        interner: &Interner,
        entry: &NodeRef<'_>,
    ) -> Result<(), Shortfall> {
        let claim = &self.claims[input];
        let checks = &mut self.selectors[claim.selector];
        let plan = &mut self.plans[input];
        plan.devices.clear();
        plan.bounds.clear();
        for (d, usage) in self.usage.iter().enumerate() {
            if usage.usable(claim.sharing)
                && checks.iter_mut().all(|c| c.matches(interner, entry, d))
            {
                plan.devices.push(d);
            }
        }
        if let Sharing::Shared { .. } = claim.sharing {
            // Pack fills devices that are already shared; Spread prefers the least shared.
            let usage = &self.usage;
            plan.devices.sort_by_key(|&d| {
                let n = usage[d].shared();
                (
                    if claim.policy == Policy::Pack {
                        u32::MAX - n
                    } else {
                        n
                    },
                    d,
                )
            });
        }
        let count = claim.count;
        let failure = |free: usize, what: &'static str| Shortfall { free, what };
        if let Same::Unset = claim.same {
            if plan.devices.len() < count {
                return Err(failure(plan.devices.len(), DEVICES_FREE));
            }
            plan.bounds.push((0, plan.devices.len()));
            return Ok(());
        }
        // Group by the value of the attribute; devices without it are not eligible.
        let grouping = &mut self.grouping;
        grouping.clear();
        if let Same::Attribute(attribute) = claim.same {
            grouping.extend(
                plan.devices
                    .iter()
                    .filter_map(|&d| entry.value_id(d, attribute).map(|v| (v, d))),
            );
        }
        // Stable: devices keep their preference order within a value.
        grouping.sort_by_key(|&(v, _)| v);
        plan.devices.clear();
        let groups = &mut self.groups; // (start, end, first device)
        groups.clear();
        let mut largest = 0;
        let mut start = 0;
        while start < grouping.len() {
            let value = grouping[start].0;
            let end = start
                + grouping[start..]
                    .iter()
                    .take_while(|(v, _)| *v == value)
                    .count();
            largest = largest.max(end - start);
            if end - start >= count {
                let first = grouping[start..end]
                    .iter()
                    .map(|&(_, d)| d)
                    .min()
                    .unwrap_or(0);
                groups.push((start, end, first));
            }
            start = end;
        }
        if largest < count {
            return Err(failure(largest, SAME_VALUE));
        }
        // Pack takes the tightest group that fits, leaving larger groups whole; Spread the
        // largest. Ties go to the group holding the first device by name.
        groups.sort_by_key(|&(s, e, first)| match claim.policy {
            Policy::Pack => (e - s, first),
            Policy::Spread => (usize::MAX - (e - s), first),
        });
        for &(s, e, _) in groups.iter() {
            let begin = plan.devices.len();
            plan.devices.extend(grouping[s..e].iter().map(|&(_, d)| d));
            plan.bounds.push((begin, plan.devices.len()));
        }
        Ok(())
    }
}

impl Prepared<'_> {
    /// Exclusive requests need distinct devices: every subset of them must find at least as
    /// many candidate devices as it asks for in total (a necessary condition).
    fn check_exclusive_totals(&self) -> Result<(), Failure> {
        let mut found = [0usize; 8];
        let mut n = 0;
        for i in (0..self.claims.len()).filter(|&i| self.claims[i].sharing == Sharing::Exclusive) {
            if n == found.len() {
                // Too many subsets to enumerate cheaply; the search is exact anyway.
                return Ok(());
            }
            found[n] = i;
            n += 1;
        }
        if n < 2 {
            return Ok(());
        }
        let exclusive = &found[..n];
        let mut masks = [0u128; 8];
        for (k, &i) in exclusive.iter().enumerate() {
            for &d in &self.plans[i].devices {
                if d >= 128 {
                    return Ok(());
                }
                masks[k] |= 1u128 << d;
            }
        }
        for subset in 1u32..(1 << exclusive.len()) {
            if subset.count_ones() < 2 {
                continue;
            }
            let members = || (0..exclusive.len()).filter(move |k| subset & (1 << k) != 0);
            let union = members().fold(0u128, |u, k| u | masks[k]);
            let wanted: usize = members().map(|k| self.claims[exclusive[k]].count).sum();
            let free = union.count_ones() as usize;
            if free < wanted {
                let names: Vec<&str> = members().map(|k| self.names[exclusive[k]]).collect();
                return Err(Failure {
                    claim: members().map(|k| exclusive[k]).next(),
                    reason: format!(
                        "claims {}: {free} devices free for {wanted} exclusive devices",
                        names.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }
}
