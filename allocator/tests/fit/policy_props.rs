//! Property tests of node choice by policy: `choose_node` returns a node that can hold the
//! request, every node the policy prefers over it cannot, and the answer does not depend on the
//! order nodes were inserted in.

use std::cmp::Ordering;

use dra_allocator::fit::{
    choose_node, choose_on_node, Consumers, DeviceView, FitError, Inventory, NamedRequest,
    NodeView, Reservations,
};
use dra_allocator::model::{
    AttributeValue, Device, EffectiveRequest, Operator, Policy, Requirement, Sharing,
};
use proptest::prelude::*;

fn node(index: usize) -> impl Strategy<Value = NodeView> {
    prop::collection::vec((prop::bool::ANY, prop::bool::weighted(0.4)), 1..6).prop_map(
        move |devices| {
            let devices = devices
                .into_iter()
                .enumerate()
                .map(|(d, (h200, used))| {
                    let model = if h200 { "H200" } else { "H100" };
                    let mut view = DeviceView::free(
                        Device::new(format!("gpu-{d}"))
                            .with("model", AttributeValue::String(model.into())),
                    );
                    if used {
                        view.consumers = Consumers::Exclusive {
                            claim_uid: format!("u-{index}-{d}"),
                        };
                    }
                    view
                })
                .collect();
            NodeView::new(format!("node-{index}"), devices)
        },
    )
}

fn fraction(view: &NodeView) -> (usize, usize) {
    (view.in_use(), view.devices.len())
}

/// Whether the policy ranks `a` before `b`.
fn preferred(policy: Policy, a: &NodeView, b: &NodeView) -> bool {
    let ((ua, ta), (ub, tb)) = (fraction(a), fraction(b));
    let by_fraction = (ua * tb).cmp(&(ub * ta));
    let by_fraction = match policy {
        Policy::Pack => by_fraction.reverse(),
        Policy::Spread => by_fraction,
    };
    by_fraction.then_with(|| a.name.cmp(&b.name)) == Ordering::Less
}

proptest! {
    #[test]
    fn chosen_node_fits_and_every_preferred_node_does_not(
        nodes in (1usize..7).prop_flat_map(|n| (0..n).map(node).collect::<Vec<_>>()),
        count in 1u8..4,
        h200_only in prop::bool::ANY,
        spread in prop::bool::ANY,
    ) {
        let request = EffectiveRequest {
            count,
            selector: if h200_only {
                vec![Requirement::new("model", Operator::In, &["H200"])]
            } else {
                vec![]
            },
            sharing: Sharing::Exclusive,
            policy: if spread { Policy::Spread } else { Policy::Pack },
            same_attribute: None,
        };
        let claim = NamedRequest { name: "c", request: &request };
        let none = Reservations::new();
        let inventory = Inventory::from_nodes(nodes.clone()).unwrap();
        let reversed = Inventory::from_nodes(nodes.iter().rev().cloned()).unwrap();
        let chosen = choose_node(&inventory, claim, &none);
        prop_assert_eq!(&chosen, &choose_node(&reversed, claim, &none));
        let fits = |name: &str| choose_on_node(&inventory, name, claim, &none).is_ok();
        match chosen {
            Ok(placement) => {
                prop_assert!(fits(&placement.node));
                let winner = nodes.iter().find(|n| n.name == placement.node).unwrap();
                for other in nodes.iter().filter(|n| preferred(request.policy, n, winner)) {
                    prop_assert!(!fits(&other.name), "{} preferred over {}", other.name, winner.name);
                }
            }
            Err(FitError::NoNodeFits { .. }) => {
                prop_assert!(nodes.iter().all(|n| !fits(&n.name)));
            }
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }
}
