//! The per-node placement search shared by every public entry point: usable devices per
//! request, quick necessary checks with readable reasons, then an exact backtracking search
//! (with symmetry breaking between interchangeable devices) for all requests at once.
//! Pure; works on borrowed inventory data only.

use super::inventory::{NodeEntry, Profiles};
use super::{Consumers, NamedRequest};
use crate::model::{AttributeValue, CompiledRequirement, Sharing};

/// Search steps per node before the search gives up and reports the node unsuitable.
const STEP_BUDGET: u32 = 50_000;

/// A device's occupancy as seen by one search (ledger consumers plus reservations plus the
/// picks made so far).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Usage {
    blocked: bool,
    exclusive: bool,
    shared: u32,
    cap: u32,
}

impl Usage {
    fn usable(self, sharing: Sharing) -> bool {
        !self.blocked
            && !self.exclusive
            && match sharing {
                Sharing::Exclusive => self.shared == 0,
                Sharing::Shared { max_consumers } => self.shared < max_consumers.min(self.cap),
            }
    }

    fn take(&mut self, sharing: Sharing) {
        match sharing {
            Sharing::Exclusive => self.exclusive = true,
            Sharing::Shared { max_consumers } => {
                self.shared += 1;
                self.cap = self.cap.min(max_consumers);
            }
        }
    }
}

/// A selector with its answers memoised per interned attribute set.
struct Matcher {
    requirements: Vec<CompiledRequirement>,
    /// 0 = not evaluated, 1 = matches, 2 = does not.
    memo: Vec<u8>,
}

impl Matcher {
    fn matches(&mut self, profiles: &Profiles, id: u32) -> bool {
        if self.memo.is_empty() {
            self.memo = vec![0; profiles.len()];
        }
        match self.memo[id as usize] {
            1 => true,
            2 => false,
            _ => {
                let attributes = profiles.get(id);
                let hit = self.requirements.iter().all(|r| r.matches(attributes));
                self.memo[id as usize] = if hit { 1 } else { 2 };
                hit
            }
        }
    }
}

/// Why a node was rejected, before it is tied to a node name.
pub(crate) struct Failure {
    pub(crate) claim: Option<usize>,
    pub(crate) reason: String,
}

/// One request's candidate devices on one node, grouped by `sameAttribute` value.
struct Plan {
    input: usize,
    sharing: Sharing,
    count: usize,
    groups: Vec<Vec<usize>>,
}

/// Requests compiled once and reused for every node of a check.
pub(crate) struct Prepared<'a> {
    claims: &'a [NamedRequest<'a>],
    matcher_of: Vec<usize>,
    matchers: Vec<Matcher>,
}

impl<'a> Prepared<'a> {
    pub(crate) fn new(claims: &'a [NamedRequest<'a>]) -> Self {
        let mut matcher_of = Vec::with_capacity(claims.len());
        let mut matchers: Vec<Matcher> = Vec::new();
        for (i, claim) in claims.iter().enumerate() {
            let same = claims[..i]
                .iter()
                .position(|c| c.request.selector == claim.request.selector);
            let index = if let Some(j) = same {
                matcher_of[j]
            } else {
                matchers.push(Matcher {
                    requirements: claim
                        .request
                        .selector
                        .iter()
                        .map(CompiledRequirement::new)
                        .collect(),
                    memo: Vec::new(),
                });
                matchers.len() - 1
            };
            matcher_of.push(index);
        }
        Prepared {
            claims,
            matcher_of,
            matchers,
        }
    }

    /// Chooses devices (indices into the node's devices) for every request, in input order.
    pub(crate) fn place(
        &mut self,
        profiles: &Profiles,
        entry: &NodeEntry,
        reservations: &[(String, Sharing)],
    ) -> Result<Vec<Vec<usize>>, Failure> {
        let mut usage = base_usage(entry, reservations);
        let mut plans = Vec::with_capacity(self.claims.len());
        for input in 0..self.claims.len() {
            plans.push(self.plan(input, profiles, entry, &usage)?);
        }
        self.check_exclusive_totals(&plans)?;
        plans.sort_by_key(|p| {
            (
                p.groups.iter().map(Vec::len).sum::<usize>() - p.count,
                p.input,
            )
        });
        let mut search = Search {
            plans: &plans,
            profiles: &entry.profiles,
            usage: &mut usage,
            chosen: vec![Vec::new(); plans.len()],
            steps: 0,
            deepest: 0,
            exhausted: false,
        };
        if search.place(0) {
            let mut result = vec![Vec::new(); plans.len()];
            for (plan, chosen) in plans.iter().zip(search.chosen) {
                result[plan.input] = chosen;
            }
            return Ok(result);
        }
        let claim = plans[search.deepest].input;
        let name = self.claims[claim].name;
        let reason = if search.exhausted {
            format!("claim {name}: too many combinations to check alongside the pod's other claims")
        } else {
            format!("claim {name}: does not fit alongside the pod's other claims")
        };
        Err(Failure {
            claim: Some(claim),
            reason,
        })
    }

    /// The usable matching devices of request `input`, or why there are too few.
    fn plan(
        &mut self,
        input: usize,
        profiles: &Profiles,
        entry: &NodeEntry,
        usage: &[Usage],
    ) -> Result<Plan, Failure> {
        let claim = &self.claims[input];
        let request = claim.request;
        let matcher = &mut self.matchers[self.matcher_of[input]];
        let count = usize::from(request.count);
        let shared_pack = match (request.sharing, request.policy) {
            (Sharing::Shared { .. }, crate::model::Policy::Pack) => Some(true),
            (Sharing::Shared { .. }, crate::model::Policy::Spread) => Some(false),
            (Sharing::Exclusive, _) => None,
        };
        let mut eligible: Vec<usize> = (0..usage.len())
            .filter(|&d| {
                usage[d].usable(request.sharing) && matcher.matches(profiles, entry.profiles[d])
            })
            .collect();
        if let Some(pack) = shared_pack {
            // Pack fills devices that are already shared; Spread prefers the least shared.
            eligible.sort_by_key(|&d| {
                let n = usage[d].shared;
                (if pack { u32::MAX - n } else { n }, d)
            });
        }
        let with = |what: &str| {
            let selector = request.selector_text();
            let matching = if selector.is_empty() {
                String::new()
            } else {
                format!(" matching {selector}")
            };
            Failure {
                claim: Some(input),
                reason: format!("claim {}: {what}{matching}", claim.name),
            }
        };
        let groups = match &request.same_attribute {
            None => {
                if eligible.len() < count {
                    return Err(with(&format!("{} of {count} devices free", eligible.len())));
                }
                vec![eligible]
            }
            Some(attribute) => {
                let mut groups: Vec<(&AttributeValue, Vec<usize>)> = Vec::new();
                for d in eligible {
                    let Some(value) = profiles.get(entry.profiles[d]).get(attribute) else {
                        continue;
                    };
                    match groups.iter_mut().find(|(v, _)| *v == value) {
                        Some((_, members)) => members.push(d),
                        None => groups.push((value, vec![d])),
                    }
                }
                let largest = groups.iter().map(|(_, m)| m.len()).max().unwrap_or(0);
                if largest < count {
                    return Err(with(&format!(
                        "{largest} of {count} devices free with one value of {attribute}"
                    )));
                }
                groups.retain(|(_, m)| m.len() >= count);
                // Pack takes the tightest group that fits, leaving larger groups whole;
                // Spread takes the largest. Ties keep device-name order.
                match request.policy {
                    crate::model::Policy::Pack => groups.sort_by_key(|(_, m)| m.len()),
                    crate::model::Policy::Spread => {
                        groups.sort_by_key(|(_, m)| std::cmp::Reverse(m.len()));
                    }
                }
                groups.into_iter().map(|(_, m)| m).collect()
            }
        };
        Ok(Plan {
            input,
            sharing: request.sharing,
            count,
            groups,
        })
    }

    /// Exclusive requests need distinct devices: every subset of them must find at least as
    /// many candidate devices as it asks for in total (a necessary condition).
    fn check_exclusive_totals(&self, plans: &[Plan]) -> Result<(), Failure> {
        let exclusive: Vec<&Plan> = plans
            .iter()
            .filter(|p| p.sharing == Sharing::Exclusive)
            .collect();
        if exclusive.len() < 2 || exclusive.len() > 8 {
            return Ok(());
        }
        let masks: Option<Vec<u128>> = exclusive
            .iter()
            .map(|p| {
                p.groups
                    .iter()
                    .flatten()
                    .try_fold(0u128, |mask, &d| (d < 128).then(|| mask | (1u128 << d)))
            })
            .collect();
        let Some(masks) = masks else { return Ok(()) };
        for subset in 1u32..(1 << exclusive.len()) {
            if subset.count_ones() < 2 {
                continue;
            }
            let members = (0..exclusive.len()).filter(|i| subset & (1 << i) != 0);
            let (union, wanted) = members.fold((0u128, 0usize), |(u, w), i| {
                (u | masks[i], w + exclusive[i].count)
            });
            let free = union.count_ones() as usize;
            if free < wanted {
                let names: Vec<&str> = (0..exclusive.len())
                    .filter(|i| subset & (1 << i) != 0)
                    .map(|i| self.claims[exclusive[i].input].name)
                    .collect();
                let first = (0..exclusive.len())
                    .filter(|i| subset & (1 << i) != 0)
                    .map(|i| exclusive[i].input)
                    .min();
                return Err(Failure {
                    claim: first,
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

fn base_usage(entry: &NodeEntry, reservations: &[(String, Sharing)]) -> Vec<Usage> {
    let mut usage: Vec<Usage> = entry
        .view
        .devices
        .iter()
        .map(|d| {
            let mut u = Usage {
                blocked: d.cordoned || d.missing,
                exclusive: false,
                shared: 0,
                cap: u32::MAX,
            };
            match &d.consumers {
                Consumers::None => {}
                Consumers::Exclusive { .. } => u.exclusive = true,
                Consumers::Shared(list) => {
                    for c in list {
                        u.take(Sharing::Shared {
                            max_consumers: c.max_consumers,
                        });
                    }
                }
            }
            u
        })
        .collect();
    for (device, sharing) in reservations {
        if let Some(i) = entry.view.position(device) {
            usage[i].take(*sharing);
        }
    }
    usage
}

/// Backtracking over requests (most constrained first) and, per request, over combinations of
/// devices within one group.
struct Search<'s> {
    plans: &'s [Plan],
    profiles: &'s [u32],
    usage: &'s mut [Usage],
    chosen: Vec<Vec<usize>>,
    steps: u32,
    deepest: usize,
    exhausted: bool,
}

impl Search<'_> {
    fn place(&mut self, pos: usize) -> bool {
        let plans = self.plans;
        if pos == plans.len() {
            return true;
        }
        self.deepest = self.deepest.max(pos);
        for group in 0..plans[pos].groups.len() {
            if self.pick(pos, group, 0, plans[pos].count) || self.exhausted {
                return !self.exhausted;
            }
        }
        false
    }

    fn pick(&mut self, pos: usize, group: usize, start: usize, need: usize) -> bool {
        if need == 0 {
            return self.place(pos + 1);
        }
        let plans = self.plans;
        let plan = &plans[pos];
        let devices = &plan.groups[group];
        // Interchangeable devices (same attributes, same occupancy) that already failed here.
        let mut failed: Vec<(u32, Usage)> = Vec::new();
        for i in start..devices.len() {
            if devices.len() - i < need {
                break;
            }
            self.steps += 1;
            if self.steps > STEP_BUDGET {
                self.exhausted = true;
                return false;
            }
            let d = devices[i];
            let before = self.usage[d];
            if !before.usable(plan.sharing) || failed.contains(&(self.profiles[d], before)) {
                continue;
            }
            self.usage[d].take(plan.sharing);
            self.chosen[pos].push(d);
            if self.pick(pos, group, i + 1, need - 1) {
                return true;
            }
            self.usage[d] = before;
            self.chosen[pos].pop();
            if self.exhausted {
                return false;
            }
            failed.push((self.profiles[d], before));
        }
        false
    }
}
