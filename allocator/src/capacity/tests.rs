use super::*;

fn q(text: &str) -> Quantity {
    Quantity::parse(text).expect("test quantity parses")
}

fn amounts(pairs: &[(&str, &str)]) -> Amounts {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), q(value)))
        .collect()
}

/// Asserts `actual` is `expected` up to floating-point rounding.
fn assert_near(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-9,
        "expected {expected}, got {actual}"
    );
}

/// One H100-like GPU as a counter set of 80Gi and 7 compute slices, its seven `1g`
/// partitions (10Gi and one slice each) and its whole-GPU `7g` partition.
fn partitioned_gpu() -> NodeParts {
    let mut parts = NodeParts::default();
    parts.units.insert(
        "gpu-0".to_owned(),
        Unit {
            model: Some("H100".to_owned()),
            totals: amounts(&[("memory", "80Gi"), ("compute", "7")]),
        },
    );
    for slice in 0..7 {
        parts.devices.insert(
            format!("gpu-0-1g-{slice}"),
            DevicePart {
                unit: "gpu-0".to_owned(),
                takes: amounts(&[("memory", "10Gi"), ("compute", "1")]),
                capacity: amounts(&[("memory", "10Gi")]),
                multi_allocation: false,
            },
        );
    }
    parts.devices.insert(
        "gpu-0-7g".to_owned(),
        DevicePart {
            unit: "gpu-0".to_owned(),
            takes: amounts(&[("memory", "80Gi"), ("compute", "7")]),
            capacity: amounts(&[("memory", "80Gi")]),
            multi_allocation: false,
        },
    );
    parts
}

/// One 80Gi GPU given to many claims, and a plain 80Gi GPU beside it.
fn shared_gpu() -> NodeParts {
    let mut parts = NodeParts::default();
    for name in ["gpu-0", "gpu-1"] {
        let capacity = amounts(&[("memory", "80Gi"), ("compute", "100")]);
        let mut part = DevicePart::whole(name, capacity.clone());
        part.multi_allocation = name == "gpu-0";
        parts.units.insert(
            name.to_owned(),
            Unit {
                model: Some("H100".to_owned()),
                totals: capacity,
            },
        );
        parts.devices.insert(name.to_owned(), part);
    }
    parts
}

#[test]
fn seven_one_slice_partitions_of_a_seven_slice_gpu_are_one_gpu_equivalent() {
    let parts = partitioned_gpu();
    let holds: Vec<Hold> = (0..7)
        .map(|slice| Hold::whole(&format!("claim-{slice}"), &format!("gpu-0-1g-{slice}")))
        .collect();
    let utilisation = parts.utilisation(&holds);
    assert_eq!(utilisation.total.units, 1);
    assert_near(utilisation.total.equivalents, 1.0);
    assert_eq!(utilisation.total.capacity["memory"].allocated, q("70Gi"));
    assert_eq!(utilisation.total.capacity["memory"].total, q("80Gi"));
    assert_eq!(utilisation.total.capacity["compute"].allocated, q("7"));
}

#[test]
fn a_partition_counts_its_tightest_counter_not_its_memory_alone() {
    let parts = partitioned_gpu();
    let fraction = parts
        .fraction(&Hold::whole("claim", "gpu-0-1g-0"))
        .expect("the node has the partition");
    assert_near(fraction, 1.0 / 7.0);
    let utilisation = parts.utilisation(&[Hold::whole("claim", "gpu-0-1g-0")]);
    assert_near(utilisation.total.equivalents, 1.0 / 7.0);
    assert_eq!(utilisation.total.capacity["memory"].allocated, q("10Gi"));
}

#[test]
fn two_forty_gib_shares_of_an_eighty_gib_gpu_are_one_gpu_and_all_its_memory() {
    let parts = shared_gpu();
    let holds = [
        Hold::share(
            "claim-a",
            "gpu-0",
            "share-a",
            amounts(&[("memory", "40Gi")]),
        ),
        Hold::share(
            "claim-b",
            "gpu-0",
            "share-b",
            amounts(&[("memory", "40Gi")]),
        ),
    ];
    let utilisation = parts.utilisation(&holds);
    assert_eq!(utilisation.total.units, 2);
    assert_near(utilisation.total.equivalents, 1.0);
    let memory = utilisation.total.capacity["memory"];
    assert_eq!(memory.allocated, q("80Gi"));
    assert_eq!(memory.total, q("160Gi"));
    assert_eq!(memory.allocated.to_string(), "80Gi");
}

#[test]
fn a_share_counts_its_largest_consumed_capacity() {
    let parts = shared_gpu();
    let hold = Hold::share(
        "claim",
        "gpu-0",
        "share",
        amounts(&[("memory", "20Gi"), ("compute", "50")]),
    );
    assert_near(parts.fraction(&hold).expect("known device"), 0.5);
}

#[test]
fn a_gpu_held_whole_by_several_claims_counts_once() {
    let parts = shared_gpu();
    let holds = [Hold::whole("a", "gpu-1"), Hold::whole("b", "gpu-1")];
    let utilisation = parts.utilisation(&holds);
    assert_near(utilisation.total.equivalents, 1.0);
    assert_eq!(utilisation.total.capacity["memory"].allocated, q("80Gi"));
}

#[test]
fn partitions_whose_tightest_counters_differ_never_count_more_than_their_gpu() {
    let mut parts = partitioned_gpu();
    parts.devices.insert(
        "gpu-0-wide".to_owned(),
        DevicePart {
            unit: "gpu-0".to_owned(),
            takes: amounts(&[("memory", "10Gi"), ("compute", "6")]),
            ..DevicePart::default()
        },
    );
    parts.devices.insert(
        "gpu-0-deep".to_owned(),
        DevicePart {
            unit: "gpu-0".to_owned(),
            takes: amounts(&[("memory", "70Gi"), ("compute", "1")]),
            ..DevicePart::default()
        },
    );
    let holds = [
        Hold::whole("a", "gpu-0-wide"),
        Hold::whole("b", "gpu-0-deep"),
    ];
    let utilisation = parts.utilisation(&holds);
    assert_near(utilisation.total.equivalents, 1.0);
    assert_eq!(utilisation.total.capacity["memory"].allocated, q("80Gi"));
}

#[test]
fn utilisation_is_split_by_model_and_nodes_add_up() {
    let mut parts = partitioned_gpu();
    parts.units.insert(
        "gpu-1".to_owned(),
        Unit {
            model: Some("A100".to_owned()),
            totals: amounts(&[("memory", "40Gi")]),
        },
    );
    parts.devices.insert(
        "gpu-1".to_owned(),
        DevicePart::whole("gpu-1", amounts(&[("memory", "40Gi")])),
    );
    let holds = [Hold::whole("a", "gpu-1"), Hold::whole("b", "gpu-0-1g-3")];
    let node = parts.utilisation(&holds);
    assert_near(node.by_model["A100"].equivalents, 1.0);
    assert_near(node.by_model["H100"].equivalents, 1.0 / 7.0);
    assert_eq!(node.by_model["A100"].capacity["memory"].total, q("40Gi"));

    let mut cluster = NodeUtilisation::default();
    cluster.add(&node);
    cluster.add(&shared_gpu().utilisation(&[Hold::whole("c", "gpu-1")]));
    assert_eq!(cluster.total.units, 4);
    assert_near(cluster.by_model["H100"].equivalents, 1.0 + 1.0 / 7.0);
    assert_eq!(cluster.total.capacity["memory"].total, q("280Gi"));
    assert_eq!(cluster.total.capacity["memory"].allocated, q("130Gi"));
}

#[test]
fn holds_of_devices_the_node_lacks_count_for_nothing() {
    let parts = shared_gpu();
    let utilisation = parts.utilisation(&[Hold::whole("a", "gpu-9")]);
    assert_near(utilisation.total.equivalents, 0.0);
    assert_eq!(parts.fraction(&Hold::whole("a", "gpu-9")), None);
    assert_eq!(
        utilisation.total.capacity["memory"].allocated,
        Quantity::from_units(0)
    );
}

#[test]
fn a_device_without_amounts_is_a_whole_unit() {
    let mut parts = NodeParts::default();
    parts.units.insert("nic-0".to_owned(), Unit::default());
    parts.devices.insert(
        "nic-0".to_owned(),
        DevicePart::whole("nic-0", Amounts::new()),
    );
    let utilisation = parts.utilisation(&[Hold::whole("a", "nic-0")]);
    assert_eq!(utilisation.total.units, 1);
    assert_near(utilisation.total.equivalents, 1.0);
    assert!(utilisation.total.capacity.is_empty());
}

#[test]
fn placement_counters_of_one_unit_each_count_together_not_as_a_whole_gpu() {
    // As NVIDIA's driver models an H100: memory, compute slices and one counter per memory
    // slice; a `1g` sits on one memory slice, the whole GPU on all eight.
    let mut totals = amounts(&[("memory", "80Gi"), ("compute-slices", "7")]);
    for slice in 0..8 {
        totals.insert(format!("memory-slice-{slice}"), q("1"));
    }
    let mut parts = NodeParts::default();
    parts.units.insert(
        "gpu-0-counter-set".to_owned(),
        Unit {
            model: None,
            totals: totals.clone(),
        },
    );
    for slice in 0..7 {
        let mut takes = amounts(&[("memory", "10Gi"), ("compute-slices", "1")]);
        takes.insert(format!("memory-slice-{slice}"), q("1"));
        let part = DevicePart {
            unit: "gpu-0-counter-set".to_owned(),
            takes,
            ..DevicePart::default()
        };
        parts.devices.insert(format!("gpu-0-mig-1g-{slice}"), part);
    }
    let whole = DevicePart {
        unit: "gpu-0-counter-set".to_owned(),
        takes: totals,
        ..DevicePart::default()
    };
    parts.devices.insert("gpu-0".to_owned(), whole);

    let one = Hold::whole("a", "gpu-0-mig-1g-3");
    assert_near(parts.fraction(&one).expect("known device"), 1.0 / 7.0);
    assert_near(
        parts.fraction(&Hold::whole("b", "gpu-0")).expect("known"),
        1.0,
    );
    let seven: Vec<Hold> = (0..7)
        .map(|slice| Hold::whole(&format!("c{slice}"), &format!("gpu-0-mig-1g-{slice}")))
        .collect();
    assert_near(parts.utilisation(&seven).total.equivalents, 1.0);
    // Slots alone: a partition on three of seven slots takes three sevenths.
    let slots: Amounts = (0..7).map(|i| (format!("slot-{i}"), q("1"))).collect();
    let taken: Amounts = (0..3).map(|i| (format!("slot-{i}"), q("1"))).collect();
    assert_near(
        largest_fraction(&taken, &slots).expect("common names"),
        3.0 / 7.0,
    );
}

#[test]
#[allow(clippy::float_cmp)] // what is shown must be exactly the rounded number
fn equivalents_are_shown_rounded_to_thousandths() {
    let mut seven_sevenths = Utilisation::default();
    for _ in 0..7 {
        seven_sevenths.equivalents += 1.0 / 7.0;
    }
    assert_ne!(seven_sevenths.equivalents, 1.0, "the sum is a hair off");
    assert_eq!(seven_sevenths.equivalents_shown(), 1.0);
    seven_sevenths.equivalents = 1.0 / 7.0;
    assert_eq!(seven_sevenths.equivalents_shown(), 0.143);
}
