//! The child role: the agent's prepare path under a kubelet's load, until it is killed. It opens
//! the directory and recovers as the agent does at start, takes the claims the journal holds as
//! its own, then loops, preparing through the path its run takes ([`crate::paths`]): batches of new exclusive and shared claims (sometimes with a held claim
//! repeated in them), repeats of held claims alone, and unprepares of held claims. Every
//! completed call is reported on stdout ([`crate::acks`]); any answer other than success or a
//! device in use is a panic, which the parent sees as the child ending before its kill.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use dra_allocator::handle::HandleSharing;
use dra_node::prepare::ClaimRequest;

use crate::acks;
use crate::paths::{Api, Path as PreparePath, Refusal};
use crate::setup::{self, Random, DEVICES};

/// How many claims the child holds at most before it only unprepares and repeats.
const MAX_HELD: usize = 8;

/// A held claim: its request and the answer of its first prepare.
struct Claim {
    request: ClaimRequest,
    devices: Vec<String>,
    cdi_ids: Vec<String>,
}

struct Child {
    preparer: PreparePath,
    held: BTreeMap<String, Claim>,
    rng: Random,
    out: std::io::StdoutLock<'static>,
}

/// Runs child number `generation` over `root`, preparing through `api`, until it is killed.
pub fn run(root: &Path, generation: u64, seed: u64, api: Api) -> ! {
    let preparer = setup::open(root);
    preparer.recover().unwrap();
    let held: BTreeMap<String, Claim> = preparer
        .entries()
        .unwrap()
        .into_iter()
        .map(|(uid, entry)| {
            let claim = Claim {
                request: setup::request_of_entry(&uid, &entry),
                devices: entry.devices,
                cdi_ids: entry.cdi_ids,
            };
            (uid, claim)
        })
        .collect();
    let mut child = Child {
        preparer: PreparePath::new(api, preparer),
        held,
        rng: Random::new(seed),
        out: std::io::stdout().lock(),
    };
    child.report(acks::READY);
    for step in 0u64.. {
        let choice = child.rng.between(0, 9);
        if child.held.is_empty() || (child.held.len() < MAX_HELD && choice < 5) {
            child.prepare_new(&format!("g{generation}-{step}"));
        } else if choice < 7 {
            child.repeat();
        } else {
            child.unprepare();
        }
    }
    unreachable!("the workload loops until the child is killed")
}

impl Child {
    fn report(&mut self, line: &str) {
        writeln!(self.out, "{line}").unwrap();
        self.out.flush().unwrap();
    }

    fn new_request(&mut self, uid: &str) -> ClaimRequest {
        let count = self.rng.between(1, 2) as usize;
        let mut devices: Vec<String> = Vec::new();
        while devices.len() < count {
            let device = setup::device_name(self.rng.index(DEVICES));
            if !devices.contains(&device) {
                devices.push(device);
            }
        }
        let sharing = if self.rng.percent(40) {
            HandleSharing::Shared {
                max_consumers: self.rng.between(2, 3) as u32,
            }
        } else {
            HandleSharing::Exclusive
        };
        setup::request(uid, devices, sharing)
    }

    fn held_uids(&mut self, most: u64) -> Vec<String> {
        let count = (self.rng.between(1, most) as usize).min(self.held.len());
        let mut uids: Vec<String> = self.held.keys().cloned().collect();
        let mut chosen = Vec::new();
        while chosen.len() < count {
            chosen.push(uids.swap_remove(self.rng.index(uids.len())));
        }
        chosen
    }

    /// A batch of 1 to 4 new claims, with a held claim repeated in it one time in three.
    fn prepare_new(&mut self, prefix: &str) {
        let mut batch: Vec<ClaimRequest> = (0..self.rng.between(1, 4))
            .map(|i| self.new_request(&format!("{prefix}-{i}")))
            .collect();
        if !self.held.is_empty() && self.rng.percent(33) {
            let uid = self.held_uids(1).remove(0);
            let at = self.rng.index(batch.len() + 1);
            batch.insert(at, self.held[&uid].request.clone());
        }
        let answers = self.preparer.prepare(&batch);
        assert_eq!(answers.len(), batch.len(), "one answer per claim");
        for ((uid, answer), request) in answers.into_iter().zip(batch) {
            match answer {
                Ok(cdi_ids) => self.prepared(&uid, request, cdi_ids),
                Err(Refusal::InUse) if !self.held.contains_key(&uid) => {}
                Err(error) => panic!("prepare of {uid} failed: {error}"),
            }
        }
    }

    /// A prepare of `uid` answered `cdi_ids`: the same as before for a held claim.
    fn prepared(&mut self, uid: &str, request: ClaimRequest, cdi_ids: Vec<String>) {
        if let Some(claim) = self.held.get(uid) {
            assert_eq!(claim.cdi_ids, cdi_ids, "repeat prepare of {uid}");
        } else {
            let data = dra_allocator::handle::HandleData::parse(&request.resource_handle).unwrap();
            let claim = Claim {
                request,
                devices: data.devices,
                cdi_ids,
            };
            self.held.insert(uid.to_owned(), claim);
        }
        let claim = &self.held[uid];
        let line = acks::prepared(uid, &claim.devices, &claim.cdi_ids);
        self.report(&line);
    }

    /// The kubelet repeats the prepare of 1 or 2 held claims.
    fn repeat(&mut self) {
        let batch: Vec<ClaimRequest> = self
            .held_uids(2)
            .iter()
            .map(|uid| self.held[uid].request.clone())
            .collect();
        for ((uid, answer), request) in self.preparer.prepare(&batch).into_iter().zip(batch) {
            let cdi_ids = answer.unwrap_or_else(|e| panic!("repeat prepare of {uid}: {e}"));
            self.prepared(&uid, request, cdi_ids);
        }
    }

    /// Unprepares 1 to 3 held claims, and a claim never prepared now and then.
    fn unprepare(&mut self) {
        let mut batch = Vec::new();
        for uid in self.held_uids(3) {
            self.report(&acks::unpreparing(&uid));
            batch.push(self.held.remove(&uid).unwrap().request);
        }
        if self.rng.percent(20) {
            batch.push(setup::request(
                "never-prepared",
                Vec::new(),
                HandleSharing::Exclusive,
            ));
        }
        for (uid, answer) in self.preparer.unprepare(&batch) {
            answer.unwrap_or_else(|e| panic!("unprepare of {uid}: {e}"));
            if uid != "never-prepared" {
                self.report(&acks::unprepared(&uid));
            }
        }
    }
}
