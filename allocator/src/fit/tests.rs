//! Unit tests of the fitting logic: data-driven tables for usability, sharing, `sameAttribute`,
//! Pack versus Spread, the gang check with its reasons and the inventory's bookkeeping.

use super::*;
use crate::model::{AttributeValue, Device, Operator, Policy, Requirement};

fn gpu(name: &str, model: &str, numa: i64) -> DeviceView {
    DeviceView::free(
        Device::new(name)
            .with("model", AttributeValue::String(model.into()))
            .with("numa", AttributeValue::Int(numa)),
    )
}

fn used(mut d: DeviceView, consumers: Consumers) -> DeviceView {
    d.consumers = consumers;
    d
}

fn exclusive(uid: &str) -> Consumers {
    Consumers::Exclusive {
        claim_uid: uid.into(),
    }
}

fn shared(maxes: &[u32]) -> Consumers {
    Consumers::Shared(
        maxes
            .iter()
            .enumerate()
            .map(|(i, m)| SharedConsumer {
                claim_uid: format!("s{i}"),
                max_consumers: *m,
            })
            .collect(),
    )
}

/// A request builder: `req(2).model("H200").shared(4).spread().same("numa")`.
#[derive(Clone)]
struct Req(EffectiveRequest);

fn req(count: u8) -> Req {
    Req(EffectiveRequest {
        count,
        selector: Vec::new(),
        sharing: Sharing::Exclusive,
        policy: Policy::Pack,
        same_attribute: None,
    })
}

impl Req {
    fn model(mut self, model: &str) -> Self {
        self.0
            .selector
            .push(Requirement::new("model", Operator::In, &[model]));
        self
    }
    fn shared(mut self, max_consumers: u32) -> Self {
        self.0.sharing = Sharing::Shared { max_consumers };
        self
    }
    fn spread(mut self) -> Self {
        self.0.policy = Policy::Spread;
        self
    }
    fn same(mut self, attribute: &str) -> Self {
        self.0.same_attribute = Some(attribute.into());
        self
    }
}

fn inventory(nodes: Vec<NodeView>) -> Inventory {
    Inventory::from_nodes(nodes).unwrap()
}

fn one_node(devices: Vec<DeviceView>) -> Inventory {
    inventory(vec![NodeView::new("n1", devices)])
}

fn pick(inv: &Inventory, r: &Req) -> Result<Vec<String>> {
    let claim = NamedRequest {
        name: "c",
        request: &r.0,
    };
    choose_on_node(inv, "n1", claim, &Reservations::new()).map(|p| p.devices)
}

#[test]
fn usability_follows_consumers_cordon_and_missing() {
    let mut cordoned = gpu("a", "H200", 0);
    cordoned.cordoned = true;
    let mut missing = gpu("a", "H200", 0);
    missing.missing = true;
    // (device, request, usable)
    let table: Vec<(DeviceView, Req, bool)> = vec![
        (gpu("a", "H200", 0), req(1), true),
        (used(gpu("a", "H200", 0), exclusive("x")), req(1), false),
        (used(gpu("a", "H200", 0), shared(&[4])), req(1), false),
        (cordoned.clone(), req(1), false),
        (missing.clone(), req(1), false),
        (cordoned, req(1).shared(4), false),
        (missing, req(1).shared(4), false),
        (gpu("a", "H200", 0), req(1).shared(1), true),
        (
            used(gpu("a", "H200", 0), exclusive("x")),
            req(1).shared(4),
            false,
        ),
        (
            used(gpu("a", "H200", 0), shared(&[4, 4])),
            req(1).shared(4),
            true,
        ),
        (
            used(gpu("a", "H200", 0), shared(&[4, 4, 4, 4])),
            req(1).shared(8),
            false,
        ),
        (
            used(gpu("a", "H200", 0), shared(&[2, 8])),
            req(1).shared(8),
            false,
        ),
        (
            used(gpu("a", "H200", 0), shared(&[8])),
            req(1).shared(2),
            true,
        ),
        (
            used(gpu("a", "H200", 0), shared(&[8, 8])),
            req(1).shared(2),
            false,
        ),
        (gpu("a", "H100", 0), req(1).model("H200"), false),
    ];
    for (i, (device, request, usable)) in table.into_iter().enumerate() {
        let inv = one_node(vec![device]);
        assert_eq!(pick(&inv, &request).is_ok(), usable, "row {i}");
    }
}

#[test]
fn devices_are_chosen_in_name_order() {
    let inv = one_node(vec![
        gpu("gpu-2", "H200", 0),
        gpu("gpu-0", "H100", 0),
        gpu("gpu-1", "H200", 0),
        gpu("gpu-3", "H200", 0),
    ]);
    assert_eq!(
        pick(&inv, &req(2).model("H200")).unwrap(),
        ["gpu-1", "gpu-2"]
    );
    assert_eq!(pick(&inv, &req(2)).unwrap(), ["gpu-0", "gpu-1"]);
}

#[test]
fn too_few_devices_names_the_claim_and_selector() {
    let inv = one_node(vec![
        gpu("a", "H200", 0),
        used(gpu("b", "H200", 0), exclusive("x")),
        gpu("c", "H200", 0),
        gpu("d", "H100", 0),
    ]);
    let err = pick(&inv, &req(4).model("H200")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node n1: claim c: 2 of 4 devices free matching model In [H200]"
    );
    let err = pick(&inv, &req(4)).unwrap_err();
    assert_eq!(err.to_string(), "node n1: claim c: 3 of 4 devices free");
}

#[test]
fn same_attribute_pack_takes_the_tightest_group_and_spread_the_largest() {
    let inv = one_node(vec![
        gpu("a0", "H200", 0),
        gpu("a1", "H200", 0),
        gpu("a2", "H200", 0),
        gpu("b0", "H200", 1),
        gpu("b1", "H200", 1),
        gpu("c0", "H200", 2),
        DeviceView::free(Device::new("z").with("model", AttributeValue::String("H200".into()))),
    ]);
    let table = [
        (req(2).same("numa"), vec!["b0", "b1"]),
        (req(2).same("numa").spread(), vec!["a0", "a1"]),
        (req(1).same("numa"), vec!["c0"]),
        (req(3).same("numa"), vec!["a0", "a1", "a2"]),
        (req(4), vec!["a0", "a1", "a2", "b0"]),
    ];
    for (request, expected) in table {
        assert_eq!(pick(&inv, &request).unwrap(), expected);
    }
    let err = pick(&inv, &req(4).same("numa")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node n1: claim c: 3 of 4 devices free with one value of numa"
    );
}

#[test]
fn shared_pack_fills_shared_devices_and_spread_prefers_idle_ones() {
    let inv = one_node(vec![
        gpu("a", "H200", 0),
        used(gpu("b", "H200", 0), shared(&[4])),
        used(gpu("c", "H200", 0), shared(&[4, 4])),
    ]);
    assert_eq!(pick(&inv, &req(1).shared(4)).unwrap(), ["c"]);
    assert_eq!(pick(&inv, &req(1).shared(4).spread()).unwrap(), ["a"]);
    assert_eq!(pick(&inv, &req(1).shared(2)).unwrap(), ["b"]);
}

fn cluster() -> Inventory {
    // n-busy: 3 of 4 in use, n-half: 2 of 4, n-idle-a and n-idle-b: none.
    let node = |name: &str, in_use: usize| {
        let devices = (0..4)
            .map(|i| {
                let d = gpu(&format!("gpu-{i}"), "H200", 0);
                if i < in_use {
                    used(d, exclusive(&format!("{name}-{i}")))
                } else {
                    d
                }
            })
            .collect();
        NodeView::new(name, devices)
    };
    inventory(vec![
        node("n-idle-b", 0),
        node("n-busy", 3),
        node("n-half", 2),
        node("n-idle-a", 0),
    ])
}

#[test]
fn pack_takes_the_busiest_node_that_fits_and_spread_the_emptiest() {
    let inv = cluster();
    let none = Reservations::new();
    let table = [
        (req(1), "n-busy"),
        (req(2), "n-half"),
        (req(3), "n-idle-a"),
        (req(1).spread(), "n-idle-a"),
        (req(4).spread(), "n-idle-a"),
    ];
    for (request, node) in table {
        let claim = NamedRequest {
            name: "c",
            request: &request.0,
        };
        assert_eq!(choose_node(&inv, claim, &none).unwrap().node, node);
    }
    let claim = NamedRequest {
        name: "c",
        request: &req(2).0,
    };
    let among = choose_node_among(&inv, claim, &["n-idle-b", "n-busy", "nope"], &none);
    assert_eq!(among.unwrap().node, "n-idle-b");
    let big = req(5);
    let claim = NamedRequest {
        name: "big",
        request: &big.0,
    };
    let err = choose_node(&inv, claim, &none).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no node fits: none of 4 nodes fits; n-busy: claim big: 1 of 5 devices free"
    );
}

#[test]
fn gang_check_reports_nodes_that_cannot_hold_all_claims() {
    let inv = cluster();
    let a = req(1).model("H200");
    let b = req(1);
    let claims = [
        NamedRequest {
            name: "a",
            request: &a.0,
        },
        NamedRequest {
            name: "b",
            request: &b.0,
        },
    ];
    let none = Reservations::new();
    let candidates = ["n-busy", "n-half", "unknown", "n-busy"];
    let unsuitable = unsuitable_nodes(&inv, &claims, &candidates, &none);
    let text: Vec<String> = unsuitable.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "n-busy: claims a, b: 1 devices free for 2 exclusive devices",
            "unknown: no devices of this driver on the node",
        ]
    );
    assert_eq!(unsuitable[0].claim.as_deref(), Some("a"));
    let placed = choose_for_pod(&inv, "n-half", &claims, &none).unwrap();
    assert_eq!(placed[0].devices, ["gpu-2"]);
    assert_eq!(placed[1].devices, ["gpu-3"]);
    assert!(choose_for_pod(&inv, "n-busy", &claims, &none).is_err());
}

#[test]
fn reservations_of_other_pods_count_as_taken() {
    let inv = cluster();
    let one = req(1);
    let claims = [NamedRequest {
        name: "a",
        request: &one.0,
    }];
    let mut reserved = Reservations::new();
    reserved.reserve("n-busy", "gpu-3", Sharing::Exclusive);
    let unsuitable = unsuitable_nodes(&inv, &claims, &["n-busy", "n-half"], &reserved);
    assert_eq!(unsuitable.len(), 1);
    assert_eq!(unsuitable[0].reason, "claim a: 0 of 1 devices free");
    let mut shared_reserved = Reservations::new();
    shared_reserved.reserve("n-busy", "gpu-3", Sharing::Shared { max_consumers: 2 });
    let s = req(1).shared(2);
    let claims = [NamedRequest {
        name: "s",
        request: &s.0,
    }];
    assert!(unsuitable_nodes(&inv, &claims, &["n-busy"], &shared_reserved).is_empty());
    shared_reserved.reserve("n-busy", "gpu-3", Sharing::Shared { max_consumers: 2 });
    assert_eq!(
        unsuitable_nodes(&inv, &claims, &["n-busy"], &shared_reserved).len(),
        1
    );
}

#[test]
fn claims_of_one_pod_may_share_a_device_up_to_max_consumers() {
    let inv = one_node(vec![gpu("a", "H200", 0)]);
    let s2 = req(1).shared(2);
    let two = [
        NamedRequest {
            name: "x",
            request: &s2.0,
        },
        NamedRequest {
            name: "y",
            request: &s2.0,
        },
    ];
    let placed = choose_for_pod(&inv, "n1", &two, &Reservations::new()).unwrap();
    assert_eq!(placed[0].devices, ["a"]);
    assert_eq!(placed[1].devices, ["a"]);
    let three = [two[0], two[1], two[0]];
    let err = choose_for_pod(&inv, "n1", &three, &Reservations::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not fit alongside the pod's other claims"),
        "{err}"
    );
}

#[test]
fn search_backtracks_when_a_broad_claim_would_take_a_scarce_device() {
    // `any` could take gpu-0, the only H200, leaving nothing for `h200`.
    let inv = one_node(vec![gpu("gpu-0", "H200", 0), gpu("gpu-1", "H100", 1)]);
    let any = req(1);
    let h200 = req(1).model("H200");
    let claims = [
        NamedRequest {
            name: "any",
            request: &any.0,
        },
        NamedRequest {
            name: "h200",
            request: &h200.0,
        },
    ];
    let placed = choose_for_pod(&inv, "n1", &claims, &Reservations::new()).unwrap();
    assert_eq!(placed[0].devices, ["gpu-1"]);
    assert_eq!(placed[1].devices, ["gpu-0"]);
}

#[test]
fn inventory_tracks_consumers_and_rejects_conflicts() {
    let mut inv = one_node(vec![gpu("a", "H200", 0), gpu("b", "H200", 0)]);
    inv.add_consumer("n1", "a", "u1", Sharing::Exclusive)
        .unwrap();
    inv.add_consumer("n1", "a", "u1", Sharing::Exclusive)
        .unwrap();
    assert_eq!(
        inv.add_consumer("n1", "a", "u2", Sharing::Shared { max_consumers: 2 }),
        Err(FitError::DeviceInUse {
            node: "n1".into(),
            device: "a".into()
        })
    );
    inv.add_consumer("n1", "b", "u2", Sharing::Shared { max_consumers: 2 })
        .unwrap();
    inv.add_consumer("n1", "b", "u3", Sharing::Shared { max_consumers: 3 })
        .unwrap();
    assert_eq!(inv.node("n1").unwrap().in_use(), 2);
    assert_eq!(
        inv.node("n1")
            .unwrap()
            .device("b")
            .unwrap()
            .consumers
            .count(),
        2
    );
    assert!(pick(&inv, &req(1)).is_err());
    inv.remove_consumer("n1", "a", "u1").unwrap();
    assert_eq!(pick(&inv, &req(1)).unwrap(), ["a"]);
    inv.set_cordoned("n1", "a", true).unwrap();
    assert!(pick(&inv, &req(1)).is_err());
    inv.set_cordoned("n1", "a", false).unwrap();
    inv.set_missing("n1", "a", true).unwrap();
    assert!(pick(&inv, &req(1)).is_err());
    assert_eq!(
        inv.set_missing("n9", "a", true),
        Err(FitError::UnknownNode("n9".into()))
    );
    assert!(matches!(
        inv.set_cordoned("n1", "zz", true),
        Err(FitError::UnknownDevice { .. })
    ));
    let dup = Inventory::from_nodes([NodeView::new("n", vec![gpu("a", "x", 0), gpu("a", "y", 0)])]);
    assert!(matches!(dup, Err(FitError::DuplicateDevice { .. })));
}

#[test]
fn pack_prefers_busier_nodes_as_consumers_are_added() {
    let mut inv = cluster();
    let one = req(1);
    let claim = NamedRequest {
        name: "c",
        request: &one.0,
    };
    let none = Reservations::new();
    // Fill n-busy, then n-half becomes the busiest with room.
    let first = choose_node(&inv, claim, &none).unwrap();
    assert_eq!(first.node, "n-busy");
    inv.add_consumer("n-busy", &first.devices[0], "new", Sharing::Exclusive)
        .unwrap();
    assert_eq!(choose_node(&inv, claim, &none).unwrap().node, "n-half");
}

#[test]
fn removed_nodes_disappear_and_can_be_added_again() {
    let mut inv = cluster();
    assert_eq!(inv.len(), 4);
    let removed = inv.remove_node("n-busy").unwrap();
    assert_eq!(removed.in_use(), 3);
    assert!(inv.node("n-busy").is_none());
    assert!(inv.remove_node("n-busy").is_none());
    let names: Vec<String> = inv.nodes().map(|n| n.name).collect();
    assert_eq!(names, ["n-half", "n-idle-a", "n-idle-b"]);
    let one = req(1);
    let claims = [NamedRequest {
        name: "a",
        request: &one.0,
    }];
    let none = Reservations::new();
    let unsuitable = unsuitable_nodes(&inv, &claims, &["n-busy"], &none);
    assert_eq!(
        unsuitable[0].reason,
        "no devices of this driver on the node"
    );
    inv.upsert_node(NodeView::new("n-new", vec![gpu("x", "H200", 0)]))
        .unwrap();
    inv.upsert_node(removed).unwrap();
    assert_eq!(inv.len(), 5);
    assert_eq!(inv.node("n-busy").unwrap().in_use(), 3);
    assert_eq!(
        choose_for_pod(&inv, "n-busy", &claims, &none).unwrap()[0].devices,
        ["gpu-3"]
    );
    assert_eq!(
        choose_for_pod(&inv, "n-new", &claims, &none).unwrap()[0].devices,
        ["x"]
    );
}

#[test]
fn devices_with_different_attributes_are_not_treated_as_interchangeable() {
    // `pair` goes first (equal slack, earlier claim) and may take a, b; then `a-only` has nothing
    // left. Only the choice {a, c} (or {b, c}) works, which needs trying c after b failed.
    let inv = one_node(vec![gpu("a", "A", 0), gpu("b", "A", 0), gpu("c", "B", 0)]);
    let pair = req(2);
    let a_only = req(1).model("A");
    let claims = [
        NamedRequest {
            name: "pair",
            request: &pair.0,
        },
        NamedRequest {
            name: "a-only",
            request: &a_only.0,
        },
    ];
    let placed = choose_for_pod(&inv, "n1", &claims, &Reservations::new()).unwrap();
    assert_eq!(placed[0].devices, ["a", "c"]);
    assert_eq!(placed[1].devices, ["b"]);
}

#[test]
fn a_pod_without_pending_claims_fits_anywhere() {
    let inv = cluster();
    let none = Reservations::new();
    assert_eq!(choose_for_pod(&inv, "n-busy", &[], &none), Ok(vec![]));
    assert!(unsuitable_nodes(&inv, &[], &["n-busy", "unknown"], &none).is_empty());
}

#[test]
fn selectors_match_values_of_attributes_with_more_ids_than_a_search_cell_holds() {
    // 70,000 distinct serial numbers: the ids of the later ones do not fit in a 16-bit cell of
    // the search block and are looked up through the node's view instead.
    let nodes = (0..70).map(|n| {
        let devices = (0..1000)
            .map(|d| {
                let serial = n * 1000 + d;
                DeviceView::free(
                    Device::new(format!("gpu-{d:04}"))
                        .with("serial", AttributeValue::Int(serial))
                        .with("numa", AttributeValue::Int(serial % 2)),
                )
            })
            .collect();
        NodeView::new(format!("n{n:02}"), devices)
    });
    let inv = Inventory::from_nodes(nodes).unwrap();
    let late = EffectiveRequest {
        selector: vec![Requirement::new(
            "serial",
            Operator::In,
            &["69998", "69999"],
        )],
        ..req(2).same("numa").0
    };
    let claims = [NamedRequest {
        name: "late",
        request: &late,
    }];
    let none = Reservations::new();
    let placement = choose_node(&inv, claims[0], &none).unwrap_err();
    // The two devices hold different numa values, so sameAttribute rules them out together.
    assert!(placement.to_string().contains("with one value of numa"));
    let pair = EffectiveRequest {
        same_attribute: None,
        ..late.clone()
    };
    let placed = choose_node(
        &inv,
        NamedRequest {
            name: "pair",
            request: &pair,
        },
        &none,
    )
    .unwrap();
    assert_eq!(placed.node, "n69");
    assert_eq!(placed.devices, ["gpu-0998", "gpu-0999"]);
    let candidates: Vec<String> = (0..70).map(|n| format!("n{n:02}")).collect();
    let claims = [NamedRequest {
        name: "pair",
        request: &pair,
    }];
    let unsuitable = unsuitable_nodes(&inv, &claims, &candidates, &none);
    assert_eq!(unsuitable.len(), 69);
    assert!(unsuitable.iter().all(|u| u.node != "n69"));
    assert_eq!(
        unsuitable[0].reason,
        "claim pair: 0 of 2 devices free matching serial In [69998, 69999]"
    );
}

#[test]
fn released_holds_count_as_free_exactly_as_if_the_consumers_were_removed() {
    // (consumers of device a, holds released on a)
    let table: Vec<(Consumers, Vec<&str>)> = vec![
        (exclusive("u1"), vec!["u1"]),
        (exclusive("u1"), vec!["u2"]),
        (shared(&[1, 4]), vec!["s0"]),
        (shared(&[1, 4]), vec!["s1"]),
        (shared(&[2, 2]), vec!["s0", "s1"]),
        (Consumers::None, vec!["u1"]),
    ];
    let two = req(2);
    let one_shared = req(1).shared(2);
    for (consumers, released) in table {
        let held = one_node(vec![
            used(gpu("a", "H200", 0), consumers.clone()),
            gpu("b", "H200", 0),
        ]);
        let mut freed = held.clone();
        let mut reservations = Reservations::new();
        for uid in &released {
            freed.remove_consumer("n1", "a", uid).unwrap();
            reservations.release("n1", "a", uid);
        }
        // A released hold on a device or node the inventory lacks changes nothing.
        reservations.release("n1", "zz", "u1");
        reservations.release("n9", "a", "u1");
        for request in [&two, &one_shared] {
            let claims = [NamedRequest {
                name: "c",
                request: &request.0,
            }];
            let candidates = ["n1"];
            assert_eq!(
                unsuitable_nodes(&held, &claims, &candidates, &reservations),
                unsuitable_nodes(&freed, &claims, &candidates, &Reservations::new()),
                "{consumers:?} released {released:?}"
            );
            assert_eq!(
                choose_for_pod(&held, "n1", &claims, &reservations),
                choose_for_pod(&freed, "n1", &claims, &Reservations::new()),
            );
        }
        assert_eq!(
            held.node("n1")
                .unwrap()
                .device("a")
                .unwrap()
                .consumers
                .clone(),
            consumers
        );
    }
}

#[test]
fn nodes_read_back_with_their_attributes_and_compare_with_published_devices() {
    let n1 = NodeView::new(
        "n1",
        vec![
            used(gpu("b", "H200", 1), exclusive("u1")),
            gpu("a", "H100", 0),
        ],
    );
    let mut inv = Inventory::from_nodes([n1.clone()]).unwrap();
    let mut sorted = n1.clone();
    sorted
        .devices
        .sort_by(|x, y| x.device.name.cmp(&y.device.name));
    assert_eq!(inv.node("n1"), Some(sorted.clone()));
    assert_eq!(inv.nodes().collect::<Vec<_>>(), [sorted.clone()]);

    let published: Vec<Device> = sorted.devices.iter().map(|d| d.device.clone()).collect();
    assert!(inv.publishes_exactly("n1", &published));
    assert!(
        !inv.publishes_exactly("n1", &published[..1]),
        "a device less"
    );
    let mut other = published.clone();
    other[0]
        .attributes
        .insert("numa".into(), AttributeValue::Int(7));
    assert!(!inv.publishes_exactly("n1", &other), "another value");
    other[0] = published[0]
        .clone()
        .with("extra", AttributeValue::Bool(true));
    assert!(!inv.publishes_exactly("n1", &other), "another attribute");
    assert!(inv.publishes_exactly("n-none", &[]));
    assert!(!inv.publishes_exactly("n-none", &published));
    // A missing device may be left out, and only then.
    inv.set_missing("n1", "a", true).unwrap();
    assert!(inv.publishes_exactly("n1", &published[1..]));
    assert!(
        !inv.publishes_exactly("n1", &published),
        "a missing device is not published"
    );

    let removed = inv.remove_node("n1").unwrap();
    assert_eq!(removed.devices[1], sorted.devices[1]);
    assert_eq!(removed.devices[0].device, sorted.devices[0].device);
}
