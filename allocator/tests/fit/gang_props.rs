//! Property tests of the gang check against a brute-force reference: on small random nodes
//! (consumers, cordons, reservations, selectors, sharing and `sameAttribute`), a node is reported
//! unsuitable exactly when no assignment of devices to all claims exists, and `choose_for_pod`
//! succeeds exactly on the other nodes with an assignment the reference accepts.

use std::collections::BTreeSet;

use dra_allocator::fit::{
    choose_for_pod, unsuitable_nodes, Consumers, DeviceView, FitError, Inventory, NamedRequest,
    NodeView, Reservations, SharedConsumer,
};
use dra_allocator::model::{
    AttributeValue, Device, EffectiveRequest, Operator, Policy, Requirement, Sharing,
};
use proptest::prelude::*;

const NODES: [&str; 3] = ["n0", "n1", "n2"];

fn sharing() -> impl Strategy<Value = Sharing> {
    prop_oneof![
        Just(Sharing::Exclusive),
        (1u32..4).prop_map(|max_consumers| Sharing::Shared { max_consumers }),
    ]
}

fn device(index: usize) -> impl Strategy<Value = DeviceView> {
    let consumers = prop_oneof![
        3 => Just(Consumers::None),
        1 => Just(Consumers::Exclusive { claim_uid: "old".into() }),
        2 => prop::collection::vec(1u32..4, 1..3).prop_map(|maxes| {
            Consumers::Shared(
                maxes
                    .into_iter()
                    .enumerate()
                    .map(|(i, max_consumers)| SharedConsumer {
                        claim_uid: format!("old-{i}"),
                        max_consumers,
                    })
                    .collect(),
            )
        }),
    ];
    (
        prop::sample::select(vec!["A", "B"]),
        prop::option::of(0i64..2),
        consumers,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(move |(model, numa, consumers, cordoned, missing)| {
            let mut device = Device::new(format!("d{index}"))
                .with("model", AttributeValue::String(model.into()));
            if let Some(numa) = numa {
                device = device.with("numa", AttributeValue::Int(numa));
            }
            DeviceView {
                device,
                cordoned,
                missing,
                consumers,
            }
        })
}

fn node(name: &'static str) -> impl Strategy<Value = NodeView> {
    (1usize..6)
        .prop_flat_map(|n| (0..n).map(device).collect::<Vec<_>>())
        .prop_map(move |devices| NodeView::new(name, devices))
}

fn request() -> impl Strategy<Value = EffectiveRequest> {
    let selector = prop_oneof![
        Just(vec![]),
        Just(vec![Requirement::new("model", Operator::In, &["A"])]),
        Just(vec![Requirement::new("numa", Operator::Exists, &[])]),
        Just(vec![Requirement::new("model", Operator::NotIn, &["A"])]),
    ];
    (
        1u8..4,
        selector,
        sharing(),
        prop::bool::ANY,
        prop::option::of(Just("numa".to_owned())),
    )
        .prop_map(
            |(count, selector, sharing, spread, same_attribute)| EffectiveRequest {
                count,
                selector,
                sharing,
                policy: if spread { Policy::Spread } else { Policy::Pack },
                same_attribute,
            },
        )
}

fn reservations() -> impl Strategy<Value = Vec<(usize, usize, Sharing)>> {
    prop::collection::vec((0usize..3, 0usize..5, sharing()), 0..3)
}

/// Whether devices `assigned[c]` (indices) for every claim `c` are a valid gang on `node`.
fn valid(
    node: &NodeView,
    claims: &[EffectiveRequest],
    reserved: &[(String, Sharing)],
    assigned: &[Vec<usize>],
) -> bool {
    for (claim, devices) in claims.iter().zip(assigned) {
        let distinct: BTreeSet<_> = devices.iter().collect();
        if devices.len() != usize::from(claim.count) || distinct.len() != devices.len() {
            return false;
        }
        if !devices
            .iter()
            .all(|&d| node.devices[d].device.matches(&claim.selector))
        {
            return false;
        }
        if let Some(attribute) = &claim.same_attribute {
            let values: Vec<_> = devices
                .iter()
                .map(|&d| node.devices[d].device.attributes.get(attribute))
                .collect();
            if values.iter().any(Option::is_none) || values.windows(2).any(|w| w[0] != w[1]) {
                return false;
            }
        }
    }
    for (d, view) in node.devices.iter().enumerate() {
        let users: Vec<Sharing> = claims
            .iter()
            .zip(assigned)
            .filter(|(_, devices)| devices.contains(&d))
            .map(|(claim, _)| claim.sharing)
            .collect();
        if users.is_empty() {
            continue;
        }
        if view.cordoned || view.missing {
            return false;
        }
        // Existing holders: the ledger's consumers plus reservations of other pods.
        let mut holders: Vec<Sharing> = match &view.consumers {
            Consumers::None => vec![],
            Consumers::Exclusive { .. } => vec![Sharing::Exclusive],
            Consumers::Shared(list) => list
                .iter()
                .map(|c| Sharing::Shared {
                    max_consumers: c.max_consumers,
                })
                .collect(),
        };
        holders.extend(
            reserved
                .iter()
                .filter(|(name, _)| *name == view.device.name)
                .map(|(_, s)| *s),
        );
        let existing = holders.len();
        if holders.contains(&Sharing::Exclusive) {
            return false;
        }
        if users.contains(&Sharing::Exclusive) {
            if users.len() > 1 || existing > 0 {
                return false;
            }
            continue;
        }
        let cap = holders
            .iter()
            .chain(&users)
            .map(|s| match s {
                Sharing::Shared { max_consumers } => *max_consumers as usize,
                Sharing::Exclusive => usize::MAX,
            })
            .min()
            .unwrap_or(usize::MAX);
        if existing + users.len() > cap {
            return false;
        }
    }
    true
}

/// Tries every combination of device subsets for all claims.
fn feasible(node: &NodeView, claims: &[EffectiveRequest], reserved: &[(String, Sharing)]) -> bool {
    let n = node.devices.len();
    let subsets: Vec<Vec<Vec<usize>>> = claims
        .iter()
        .map(|c| {
            (0u32..(1 << n))
                .filter(|m| m.count_ones() == u32::from(c.count))
                .map(|m| (0..n).filter(|d| m & (1 << d) != 0).collect())
                .collect()
        })
        .collect();
    let mut pick = vec![0usize; claims.len()];
    if subsets.iter().any(Vec::is_empty) {
        return false;
    }
    loop {
        let assigned: Vec<Vec<usize>> = pick
            .iter()
            .zip(&subsets)
            .map(|(&i, s)| s[i].clone())
            .collect();
        if valid(node, claims, reserved, &assigned) {
            return true;
        }
        let mut k = 0;
        loop {
            if k == pick.len() {
                return false;
            }
            pick[k] += 1;
            if pick[k] < subsets[k].len() {
                break;
            }
            pick[k] = 0;
            k += 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn gang_check_agrees_with_choose_for_pod_and_brute_force(
        nodes in (node(NODES[0]), node(NODES[1]), node(NODES[2])),
        claims in prop::collection::vec(request(), 1..4),
        reserved in reservations(),
    ) {
        let nodes = [nodes.0, nodes.1, nodes.2];
        let inventory = Inventory::from_nodes(nodes.clone()).unwrap();
        let mut reservations = Reservations::new();
        for &(node, device, sharing) in &reserved {
            reservations.reserve(NODES[node], &format!("d{device}"), sharing);
        }
        let names: Vec<String> = (0..claims.len()).map(|i| format!("c{i}")).collect();
        let named: Vec<NamedRequest<'_>> = names
            .iter()
            .zip(&claims)
            .map(|(name, request)| NamedRequest { name, request })
            .collect();
        let candidates = ["n0", "n1", "n2", "n3"];
        let unsuitable = unsuitable_nodes(&inventory, &named, &candidates, &reservations);
        let rejected: BTreeSet<&str> = unsuitable.iter().map(|u| u.node.as_str()).collect();
        prop_assert!(rejected.contains("n3"));
        for view in &nodes {
            let reserved_here: Vec<(String, Sharing)> = reservations.on_node(&view.name).to_vec();
            let expected = feasible(view, &claims, &reserved_here);
            prop_assert_eq!(!rejected.contains(view.name.as_str()), expected, "node {}", view.name);
            match choose_for_pod(&inventory, &view.name, &named, &reservations) {
                Ok(placements) => {
                    prop_assert!(expected);
                    let assigned: Vec<Vec<usize>> = placements
                        .iter()
                        .map(|p| {
                            p.devices
                                .iter()
                                .map(|name| view.devices.iter().position(|d| &d.device.name == name).unwrap())
                                .collect()
                        })
                        .collect();
                    prop_assert!(valid(view, &claims, &reserved_here, &assigned));
                    prop_assert!(placements.iter().all(|p| p.node == view.name));
                }
                Err(FitError::Unsuitable(u)) => {
                    prop_assert!(!expected);
                    let reported = unsuitable.iter().find(|x| x.node == view.name).unwrap();
                    prop_assert_eq!(&u, reported);
                }
                Err(other) => prop_assert!(false, "unexpected error {other}"),
            }
        }
    }
}
