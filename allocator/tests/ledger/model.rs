//! Model test: random sequences of ledger operations against a plain in-memory model, with
//! `verify()` and a full state comparison after every step (including across reopening).
//!
//! `PROPTEST_CASES` sets the number of sequences (default 24).

use crate::support::assert_error;
use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::ledger::{AllocationQuery, AllocationState, Ledger, LedgerError};
use dra_allocator::model::Sharing;
use proptest::prelude::*;
use testkit::ledger::*;

const NODES: [&str; 2] = ["node-0", "node-1"];
const DEVICES_PER_NODE: usize = 4;
const UIDS: u8 = 6;

#[derive(Debug, Clone)]
enum Op {
    Allocate {
        uid: u8,
        count: u8,
        shared: Option<u32>,
        node: Option<usize>,
    },
    Confirm(u8),
    Release(u8),
    Abort(u8),
    Inventory {
        node: usize,
        mask: u8,
    },
    Cordon {
        node: usize,
        device: usize,
        on: bool,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..UIDS, 1..=3u8, prop::option::of(1..=3u32), prop::option::of(0..NODES.len()))
            .prop_map(|(uid, count, shared, node)| Op::Allocate { uid, count, shared, node }),
        2 => (0..UIDS).prop_map(Op::Confirm),
        2 => (0..UIDS).prop_map(Op::Release),
        1 => (0..UIDS).prop_map(Op::Abort),
        1 => (0..NODES.len(), 0..16u8).prop_map(|(node, mask)| Op::Inventory { node, mask }),
        1 => (0..NODES.len(), 0..DEVICES_PER_NODE, any::<bool>())
            .prop_map(|(node, device, on)| Op::Cordon { node, device, on }),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone, Default, PartialEq)]
struct ModelDevice {
    missing: bool,
    cordoned: bool,
    consumers: Vec<(String, Sharing)>,
}

#[derive(Debug, Clone, PartialEq)]
struct ModelAllocation {
    node: String,
    devices: Vec<String>,
    confirmed: bool,
    count: u8,
    sharing: Sharing,
}

#[derive(Debug, Default)]
struct Model {
    devices: BTreeMap<(String, String), ModelDevice>,
    allocations: BTreeMap<String, ModelAllocation>,
}

fn usable(device: &ModelDevice, sharing: Sharing) -> bool {
    if device.missing || device.cordoned {
        return false;
    }
    match sharing {
        Sharing::Exclusive => device.consumers.is_empty(),
        Sharing::Shared { max_consumers } => {
            let mut bound = max_consumers;
            for (_, held) in &device.consumers {
                match held {
                    Sharing::Exclusive => return false,
                    Sharing::Shared { max_consumers } => bound = bound.min(*max_consumers),
                }
            }
            (device.consumers.len() as u32) < bound
        }
    }
}

impl Model {
    fn usable_on(&self, node: &str, sharing: Sharing) -> usize {
        self.devices
            .iter()
            .filter(|((n, _), d)| n == node && usable(d, sharing))
            .count()
    }

    fn free(&mut self, uid: &str) -> Option<ModelAllocation> {
        let allocation = self.allocations.remove(uid)?;
        for name in &allocation.devices {
            let key = (allocation.node.clone(), name.clone());
            let device = self.devices.get_mut(&key).expect("held device exists");
            device.consumers.retain(|(c, _)| c != uid);
            if device.missing && device.consumers.is_empty() {
                self.devices.remove(&key);
            }
        }
        Some(allocation)
    }
}

fn sharing_of(shared: Option<u32>) -> Sharing {
    shared.map_or(Sharing::Exclusive, |max_consumers| Sharing::Shared {
        max_consumers,
    })
}

fn step_allocate(
    ledger: &Ledger,
    model: &mut Model,
    uid: u8,
    count: u8,
    shared: Option<u32>,
    node: Option<usize>,
) {
    let uid = format!("u{uid}");
    let sharing = sharing_of(shared);
    let node = node.map(|n| NODES[n]);
    let result = ledger.allocate(allocate(&uid, node, request(count, sharing)));
    if let Some(existing) = model.allocations.get(&uid) {
        let same = existing.count == count
            && existing.sharing == sharing
            && node.is_none_or(|n| n == existing.node);
        if same {
            let got = result.expect("repeat allocate succeeds");
            assert_eq!(got.devices, existing.devices);
            assert_eq!(got.node, existing.node);
        } else {
            let error = result.expect_err("repeat with other parameters");
            assert_error!(error, LedgerError::ClaimConflict { .. });
        }
        return;
    }
    let candidates: Vec<&str> = node.map_or(NODES.to_vec(), |n| vec![n]);
    let feasible = candidates
        .iter()
        .any(|n| model.usable_on(n, sharing) >= usize::from(count));
    match result {
        Ok(got) => {
            assert!(
                feasible,
                "allocated although the model sees no room: {got:?}"
            );
            assert!(candidates.contains(&got.node.as_str()));
            assert_eq!(got.devices.len(), usize::from(count));
            assert_eq!(got.state, AllocationState::Pending);
            for name in &got.devices {
                let device = model
                    .devices
                    .get_mut(&(got.node.clone(), name.clone()))
                    .expect("allocated device exists in the model");
                assert!(usable(device, sharing), "device {name} was not usable");
                device.consumers.push((uid.clone(), sharing));
            }
            model.allocations.insert(
                uid,
                ModelAllocation {
                    node: got.node,
                    devices: got.devices,
                    confirmed: false,
                    count,
                    sharing,
                },
            );
        }
        Err(error) => {
            assert!(!feasible, "refused although the model sees room: {error}");
            assert_error!(error, LedgerError::Unsatisfiable { .. });
        }
    }
}

fn step_inventory(ledger: &Ledger, model: &mut Model, node: usize, mask: u8) {
    let node = NODES[node];
    let published: Vec<usize> = (0..DEVICES_PER_NODE)
        .filter(|i| mask & (1 << i) != 0)
        .collect();
    let devices = published
        .iter()
        .map(|i| gpu(&format!("gpu-{i}"), "H100", 0))
        .collect();
    let change = ledger.set_inventory(node, devices).unwrap();
    let mut expected_missing = Vec::new();
    for i in 0..DEVICES_PER_NODE {
        let key = (node.to_owned(), format!("gpu-{i}"));
        if published.contains(&i) {
            model.devices.entry(key).or_default().missing = false;
        } else if let Some(device) = model.devices.get_mut(&key) {
            if device.consumers.is_empty() {
                model.devices.remove(&key);
            } else if !device.missing {
                device.missing = true;
                expected_missing.push(key.1);
            }
        }
    }
    assert_eq!(change.marked_missing, expected_missing);
}

fn step(ledger: &Ledger, model: &mut Model, op: &Op) {
    match op {
        Op::Allocate {
            uid,
            count,
            shared,
            node,
        } => step_allocate(ledger, model, *uid, *count, *shared, *node),
        Op::Confirm(uid) => {
            let uid = format!("u{uid}");
            let result = ledger.confirm(&uid);
            match model.allocations.get_mut(&uid) {
                Some(allocation) => {
                    allocation.confirmed = true;
                    assert_eq!(result.unwrap().state, AllocationState::Confirmed);
                }
                None => assert!(matches!(result, Err(LedgerError::ClaimNotFound { .. }))),
            }
        }
        Op::Release(uid) => {
            let uid = format!("u{uid}");
            let released = ledger.release(&uid).unwrap();
            let expected = model.free(&uid);
            assert_eq!(released.map(|a| a.devices), expected.map(|a| a.devices));
        }
        Op::Abort(uid) => {
            let uid = format!("u{uid}");
            let result = ledger.abort(&uid);
            match model.allocations.get(&uid) {
                None => assert!(result.unwrap().is_none()),
                Some(a) if a.confirmed => {
                    assert!(matches!(result, Err(LedgerError::AbortConfirmed { .. })));
                }
                Some(_) => {
                    assert!(result.unwrap().is_some());
                    model.free(&uid);
                }
            }
        }
        Op::Inventory { node, mask } => step_inventory(ledger, model, *node, *mask),
        Op::Cordon { node, device, on } => {
            let key = (NODES[*node].to_owned(), format!("gpu-{device}"));
            let result = if *on {
                ledger.cordon(&key.0, &key.1)
            } else {
                ledger.uncordon(&key.0, &key.1)
            };
            match model.devices.get_mut(&key) {
                Some(device) => {
                    assert_eq!(result.unwrap(), device.cordoned != *on);
                    device.cordoned = *on;
                }
                None => assert!(matches!(result, Err(LedgerError::DeviceNotFound { .. }))),
            }
        }
        Op::Reopen => unreachable!("reopening is done by the test loop"),
    }
}

fn compare(ledger: &Ledger, model: &Model) {
    assert_consistent(ledger);
    let page = ledger
        .allocations(&AllocationQuery {
            limit: 1000,
            ..AllocationQuery::default()
        })
        .unwrap();
    let actual: BTreeMap<String, (String, Vec<String>, bool)> = page
        .items
        .into_iter()
        .map(|a| {
            (
                a.claim.uid,
                (a.node, a.devices, a.state == AllocationState::Confirmed),
            )
        })
        .collect();
    let expected: BTreeMap<String, (String, Vec<String>, bool)> = model
        .allocations
        .iter()
        .map(|(uid, a)| {
            (
                uid.clone(),
                (a.node.clone(), a.devices.clone(), a.confirmed),
            )
        })
        .collect();
    assert_eq!(actual, expected);
    let pending: BTreeSet<String> = ledger
        .pending_intents()
        .unwrap()
        .into_iter()
        .map(|p| p.claim.uid)
        .collect();
    let expected_pending: BTreeSet<String> = model
        .allocations
        .iter()
        .filter(|(_, a)| !a.confirmed)
        .map(|(uid, _)| uid.clone())
        .collect();
    assert_eq!(pending, expected_pending);
    let mut devices = BTreeMap::new();
    for node in NODES {
        for device in ledger.node_devices(node).unwrap().unwrap_or_default() {
            devices.insert(
                (node.to_owned(), device.name),
                ModelDevice {
                    missing: device.missing,
                    cordoned: device.cordoned,
                    consumers: device
                        .consumers
                        .into_iter()
                        .map(|c| (c.claim_uid, c.sharing))
                        .collect(),
                },
            );
        }
    }
    assert_eq!(devices, model.devices);
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn ledger_agrees_with_the_model_after_every_step(ops in prop::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = open(dir.path());
        let mut model = Model::default();
        for node in NODES {
            ledger.set_inventory(node, gpus(DEVICES_PER_NODE, "H100")).unwrap();
            for i in 0..DEVICES_PER_NODE {
                model.devices.insert((node.to_owned(), format!("gpu-{i}")), ModelDevice::default());
            }
        }
        for op in &ops {
            if matches!(op, Op::Reopen) {
                drop(ledger);
                ledger = open(dir.path());
            } else {
                step(&ledger, &mut model, op);
            }
            compare(&ledger, &model);
        }
    }
}
