//! The exact backtracking search over a node's candidate devices for all requests of a pod:
//! requests most constrained first, per request the combinations of devices within one group,
//! skipping a device interchangeable with one that already failed at the same step. Pure; works
//! on the plans the per-node search (`search.rs`) prepared.

use super::compact::Usage;
use super::search::{Claim, Plan};

/// Search steps per node before the search gives up and reports the node unsuitable.
const STEP_BUDGET: u32 = 50_000;

/// Devices that already failed at one step of the search: a few inline, more on the heap.
struct Failed {
    inline: [usize; 8],
    len: usize,
    spill: Vec<usize>,
}

impl Failed {
    fn new() -> Self {
        Failed {
            inline: [0; 8],
            len: 0,
            spill: Vec::new(),
        }
    }

    fn push(&mut self, d: usize) {
        if self.len < self.inline.len() {
            self.inline[self.len] = d;
            self.len += 1;
        } else {
            self.spill.push(d);
        }
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.inline[..self.len].iter().chain(&self.spill).copied()
    }
}

/// Backtracking over requests (most constrained first) and, per request, over combinations of
/// devices within one group.
pub(super) struct Search<'s> {
    claims: &'s [Claim],
    plans: &'s [Plan],
    /// `plans.len()` entries per device: its group in each plan plus one, or 0.
    membership: &'s [u32],
    order: &'s [usize],
    usage: &'s mut [Usage],
    /// The devices chosen so far, by search position.
    pub(super) chosen: Vec<Vec<usize>>,
    steps: u32,
    /// The deepest search position reached (the request that could not be placed).
    pub(super) deepest: usize,
    /// Whether the step budget ran out.
    pub(super) exhausted: bool,
}

impl<'s> Search<'s> {
    pub(super) fn new(
        claims: &'s [Claim],
        plans: &'s [Plan],
        membership: &'s [u32],
        order: &'s [usize],
        usage: &'s mut [Usage],
        chosen: Vec<Vec<usize>>,
    ) -> Self {
        Search {
            claims,
            plans,
            membership,
            order,
            usage,
            chosen,
            steps: 0,
            deepest: 0,
            exhausted: false,
        }
    }

    /// Places the requests from search position `pos` on; `true` when all found devices.
    pub(super) fn place(&mut self, pos: usize) -> bool {
        if pos == self.order.len() {
            return true;
        }
        self.deepest = self.deepest.max(pos);
        let input = self.order[pos];
        for group in 0..self.plans[input].bounds.len() {
            if self.pick(pos, group, 0, self.claims[input].count) {
                return true;
            }
            if self.exhausted {
                return false;
            }
        }
        false
    }

    /// Two devices are interchangeable for the rest of the search when they have the same
    /// occupancy and the same place (eligibility and group) in every request's plan.
    fn interchangeable(&self, a: usize, b: usize) -> bool {
        let n = self.plans.len();
        self.usage[a] == self.usage[b]
            && self.membership[a * n..(a + 1) * n] == self.membership[b * n..(b + 1) * n]
    }

    fn pick(&mut self, pos: usize, group: usize, start: usize, need: usize) -> bool {
        if need == 0 {
            return self.place(pos + 1);
        }
        let input = self.order[pos];
        let sharing = self.claims[input].sharing;
        let plans = self.plans;
        let (begin, end) = plans[input].bounds[group];
        let devices = &plans[input].devices[begin..end];
        // Devices that already failed at this step; an interchangeable one would fail too.
        let mut failed = Failed::new();
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
            if !before.usable(sharing) || failed.iter().any(|f| self.interchangeable(f, d)) {
                continue;
            }
            self.usage[d].take(sharing);
            self.chosen[pos].push(d);
            if self.pick(pos, group, i + 1, need - 1) {
                return true;
            }
            self.usage[d] = before;
            self.chosen[pos].pop();
            if self.exhausted {
                return false;
            }
            failed.push(d);
        }
        false
    }
}
