//! The ledger-backed driver against a real ledger in a temporary directory, with hand-built
//! claims and an in-memory cluster: parameters, allocation (immediate and per pod), unsuitable
//! nodes with their event, deallocation and the reconcile.

mod fixture;
mod reconcile;

use std::sync::Arc;
use std::time::Duration;

use dra_allocator::ledger::AllocationState;
use dra_controller::driver::handle::{claim_allocation, ClaimAllocationState};
use dra_controller::driver::{
    AllocationMode, AllocationOutcome, DeallocationOutcome, DriftKind, DriverError, DriverObserver,
    LedgerDriver,
};
use dra_controller::params::{DeviceClaimParametersSpec, DeviceClassParametersSpec, SharingSpec};
use dra_framework::testing::{FakeApi, MemoryCaches};
use dra_framework::{ClaimAllocation, Controller, ControllerConfig, Driver, EventType, QueueKey};
use fixture::{allocated, claim, class, params, pod, req, Fixture, DRIVER};

#[tokio::test]
async fn immediate_claim_gets_one_handle_on_the_chosen_node() {
    let f = Fixture::new(&[("node-0", 2, "H100")]);
    f.put_params(
        "two",
        DeviceClaimParametersSpec {
            count: Some(2),
            shareable: Some(true),
            ..Default::default()
        },
    );
    let items = f
        .allocate_immediate(claim("c1", "uid-1").params("two"))
        .await;
    let result = items.allocation.clone().expect("allocated");
    assert_eq!(result.shareable, Some(true));
    let allocated = allocated(&items.claim, result);
    let ClaimAllocationState::Ours(data) = claim_allocation(&allocated, DRIVER).unwrap() else {
        panic!("our allocation")
    };
    assert_eq!(data.node, "node-0");
    assert_eq!(data.devices.len(), 2);
    assert_eq!(data.claim_uid, "uid-1");
    let ledger = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    assert_eq!(ledger.state, AllocationState::Pending);
    assert_eq!(ledger.devices, data.devices);
}

#[tokio::test]
async fn class_defaults_apply_to_claims_without_parameters_and_yield_to_their_own() {
    let f = Fixture::new(&[("node-0", 4, "H100")]);
    f.put_class_spec(DeviceClassParametersSpec {
        count: Some(2),
        shareable: Some(true),
        ..DeviceClassParametersSpec::default()
    });
    let mut bare = vec![f.item("gpu", claim("c1", "uid-1")).await];
    f.driver.allocate(&mut bare, Some("node-0")).await;
    let result = bare[0].allocation.clone().expect("allocated");
    assert_eq!(
        result.shareable,
        Some(true),
        "the class makes its claims shareable"
    );
    assert_eq!(
        f.driver
            .ledger()
            .allocation("uid-1")
            .unwrap()
            .unwrap()
            .devices
            .len(),
        2
    );

    f.put_params(
        "own",
        DeviceClaimParametersSpec {
            count: Some(1),
            shareable: Some(false),
            ..Default::default()
        },
    );
    let mut own = vec![f.item("gpu", claim("c2", "uid-2").params("own")).await];
    f.driver.allocate(&mut own, Some("node-0")).await;
    let result = own[0].allocation.clone().expect("allocated");
    assert_eq!(result.shareable, Some(false), "the claim's own value wins");
    assert_eq!(
        f.driver
            .ledger()
            .allocation("uid-2")
            .unwrap()
            .unwrap()
            .devices
            .len(),
        1
    );
}

#[tokio::test]
async fn repeat_allocate_returns_same_devices() {
    let f = Fixture::new(&[("node-0", 4, "H100"), ("node-1", 4, "H100")]);
    let mut first = vec![f.item("gpu", claim("c1", "uid-1")).await];
    f.driver.allocate(&mut first, Some("node-1")).await;
    let mut again = vec![f.item("gpu", claim("c1", "uid-1")).await];
    f.driver.allocate(&mut again, Some("node-1")).await;
    assert!(first[0].allocation.is_some());
    assert_eq!(first[0].allocation, again[0].allocation);
    let immediate = f.allocate_immediate(claim("c2", "uid-2")).await;
    let immediate_again = f.allocate_immediate(claim("c2", "uid-2")).await;
    assert_eq!(immediate.allocation, immediate_again.allocation);
    assert_eq!(f.driver.ledger().utilisation().unwrap().claims_allocated, 2);
}

#[tokio::test]
async fn pod_claims_are_committed_together_or_not_at_all() {
    let f = Fixture::new(&[("node-0", 3, "H100"), ("node-1", 4, "H100")]);
    f.put_params(
        "two",
        DeviceClaimParametersSpec {
            count: Some(2),
            ..Default::default()
        },
    );
    let make = || async {
        vec![
            f.item("a", claim("ca", "uid-a").params("two")).await,
            f.item("b", claim("cb", "uid-b").params("two")).await,
        ]
    };
    let mut on_small = make().await;
    f.driver.allocate(&mut on_small, Some("node-0")).await;
    for item in &on_small {
        assert!(item.allocation.is_none());
        let error = item.error.as_ref().expect("error").to_string();
        assert!(error.contains("no devices fit"), "{error}");
    }
    assert_eq!(
        f.driver.ledger().utilisation().unwrap().claims_allocated,
        0,
        "nothing committed"
    );

    let mut on_big = make().await;
    f.driver.allocate(&mut on_big, Some("node-1")).await;
    let mut devices: Vec<String> = Vec::new();
    for item in &on_big {
        let allocated = allocated(&item.claim, item.allocation.clone().expect("allocated"));
        let ClaimAllocationState::Ours(data) = claim_allocation(&allocated, DRIVER).unwrap() else {
            panic!("ours")
        };
        assert_eq!(data.node, "node-1");
        devices.extend(data.devices);
    }
    devices.sort();
    devices.dedup();
    assert_eq!(
        devices.len(),
        4,
        "the two claims hold four distinct devices"
    );
    let a = f.driver.ledger().allocation("uid-a").unwrap().unwrap();
    let b = f.driver.ledger().allocation("uid-b").unwrap().unwrap();
    assert_eq!(
        a.intent.abs_diff(b.intent),
        1,
        "journalled in one transaction"
    );
}

#[tokio::test]
async fn unsuitable_nodes_explain_why_and_post_one_event_per_new_reason() {
    let f = Fixture::new(&[
        ("node-0", 2, "H100"),
        ("node-1", 1, "H200"),
        ("node-2", 2, "H200"),
    ]);
    f.put_params(
        "h200x2",
        DeviceClaimParametersSpec {
            count: Some(2),
            selector: vec![req("model", "In", &["H200"])],
            ..Default::default()
        },
    );
    let nodes = ["node-0", "node-1", "node-2"].map(String::from);
    let mut items = vec![f.item("gpu", claim("c1", "uid-1").params("h200x2")).await];
    let p = pod("p1", "pod-uid-1");
    f.driver
        .unsuitable_nodes(&p, &mut items, &nodes)
        .await
        .unwrap();
    assert_eq!(items[0].unsuitable_nodes, ["node-0", "node-1"]);
    assert!(f.cluster.events().is_empty(), "node-2 fits: no event");

    // Another pod takes node-2; now nothing fits and the pod is told why, node by node.
    let mut other = vec![f.item("gpu", claim("c9", "uid-9").params("h200x2")).await];
    f.driver.allocate(&mut other, Some("node-2")).await;
    assert!(other[0].allocation.is_some());
    for _ in 0..3 {
        let mut items = vec![f.item("gpu", claim("c1", "uid-1").params("h200x2")).await];
        f.driver
            .unsuitable_nodes(&p, &mut items, &nodes)
            .await
            .unwrap();
        assert_eq!(
            items[0].unsuitable_nodes, nodes,
            "the pending allocation counts as taken"
        );
    }
    let events = f.cluster.events();
    assert_eq!(
        events.len(),
        1,
        "the same reason is posted once: {events:?}"
    );
    let event = &events[0];
    assert_eq!(event.type_, EventType::Warning);
    assert_eq!(event.regarding.name.as_deref(), Some("p1"));
    assert!(
        event
            .message
            .contains("node-0: claim gpu: 0 of 2 devices free matching model In [H200]"),
        "{}",
        event.message
    );
    assert!(
        event
            .message
            .contains("node-1: claim gpu: 1 of 2 devices free matching model In [H200]"),
        "{}",
        event.message
    );
    assert!(event.message.contains("node-2:"), "{}", event.message);

    // Freeing node-2 makes it fit again; taking it again posts again.
    f.driver.deallocate(&other[0].claim).await.unwrap();
    let mut items = vec![f.item("gpu", claim("c1", "uid-1").params("h200x2")).await];
    f.driver
        .unsuitable_nodes(&p, &mut items, &nodes)
        .await
        .unwrap();
    assert_eq!(items[0].unsuitable_nodes, ["node-0", "node-1"]);
    f.driver.allocate(&mut other, Some("node-2")).await;
    let mut items = vec![f.item("gpu", claim("c1", "uid-1").params("h200x2")).await];
    f.driver
        .unsuitable_nodes(&p, &mut items, &nodes)
        .await
        .unwrap();
    assert_eq!(f.cluster.events().len(), 2);
}

#[tokio::test]
async fn gang_check_marks_a_node_unsuitable_for_every_claim_when_they_do_not_fit_together() {
    let f = Fixture::new(&[("node-0", 3, "H100"), ("node-1", 4, "H100")]);
    f.put_params(
        "two",
        DeviceClaimParametersSpec {
            count: Some(2),
            ..Default::default()
        },
    );
    let mut items = vec![
        f.item("a", claim("ca", "uid-a").params("two")).await,
        f.item("b", claim("cb", "uid-b").params("two")).await,
    ];
    let nodes = ["node-0", "node-1", "node-9"].map(String::from);
    f.driver
        .unsuitable_nodes(&pod("p", "pu"), &mut items, &nodes)
        .await
        .unwrap();
    for item in &items {
        assert_eq!(item.unsuitable_nodes, ["node-0", "node-9"]);
    }
}

#[tokio::test]
async fn a_stale_pending_allocation_of_the_pod_does_not_block_it_elsewhere() {
    let f = Fixture::new(&[("node-0", 1, "H100"), ("node-1", 1, "H100")]);
    let mut first = vec![f.item("gpu", claim("c1", "uid-1")).await];
    f.driver.allocate(&mut first, Some("node-0")).await;
    // The status write was lost; the scheduler now picks node-1 for the same claim.
    let nodes = ["node-0", "node-1"].map(String::from);
    let mut items = vec![f.item("gpu", claim("c1", "uid-1")).await];
    f.driver
        .unsuitable_nodes(&pod("p", "pu"), &mut items, &nodes)
        .await
        .unwrap();
    assert!(
        items[0].unsuitable_nodes.is_empty(),
        "{:?}",
        items[0].unsuitable_nodes
    );
    f.driver.allocate(&mut items, Some("node-1")).await;
    assert!(
        items[0].allocation.is_some(),
        "{:?}",
        items[0].error.as_ref().map(ToString::to_string)
    );
    let now = f.driver.ledger().allocation("uid-1").unwrap().unwrap();
    assert_eq!(now.node, "node-1");
    let first_node = f.driver.ledger().node_devices("node-0").unwrap().unwrap();
    assert!(
        first_node[0].consumers.is_empty(),
        "the stale reservation was dropped"
    );
}

#[tokio::test]
async fn deallocate_is_idempotent_and_frees_the_devices() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    let c = claim("c1", "uid-1");
    let items = f.allocate_immediate(c.clone()).await;
    assert!(items.allocation.is_some());
    f.driver.deallocate(&c.0).await.unwrap();
    f.driver.deallocate(&c.0).await.unwrap();
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
    let next = f.allocate_immediate(claim("c2", "uid-2")).await;
    assert!(
        next.allocation.is_some(),
        "the freed device is allocatable again"
    );
}

#[tokio::test]
async fn devices_of_a_claim_that_shows_them_are_freed_only_once_its_status_no_longer_does() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    let c = claim("c1", "uid-1");
    let items = f.allocate_immediate(c.clone()).await;
    let shown = allocated(&c.0, items.allocation.clone().expect("allocated"));
    f.driver.deallocate(&shown).await.unwrap();
    assert!(
        f.driver.ledger().allocation("uid-1").unwrap().is_some(),
        "held while the claim still names the device"
    );
    let other = f.allocate_immediate(claim("c2", "uid-2")).await;
    assert!(other.allocation.is_none(), "{:?}", other.error);
    f.driver.deallocation_published(&c.0).await;
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
    let again = f.allocate_immediate(claim("c2", "uid-2")).await;
    assert!(again.allocation.is_some(), "{:?}", again.error);
}

#[tokio::test]
async fn deallocate_aborts_an_allocation_in_progress() {
    let f = Fixture::unready(&[("node-0", 1, "H100")], Duration::from_secs(5));
    let c = claim("c1", "uid-1");
    let mut items = vec![f.item("", c.clone()).await];
    let driver = f.driver.clone();
    let allocating = tokio::spawn(async move {
        driver.allocate(&mut items, None).await;
        items
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    f.driver.deallocate(&c.0).await.unwrap();
    f.make_ready();
    let items = allocating.await.unwrap();
    assert!(items[0].allocation.is_none());
    assert!(
        matches!(items[0].error, Some(DriverError::AllocationAborted { .. })),
        "{:?}",
        items[0].error
    );
    assert!(
        f.driver.ledger().allocation("uid-1").unwrap().is_none(),
        "nothing is held"
    );
}

#[tokio::test]
async fn allocate_fails_when_the_driver_does_not_become_ready() {
    let f = Fixture::unready(&[("node-0", 1, "H100")], Duration::from_millis(20));
    let items = f.allocate_immediate(claim("c1", "uid-1")).await;
    assert!(matches!(items.error, Some(DriverError::NotReady)));
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
}

#[tokio::test]
async fn immediate_claims_follow_the_class_policy() {
    for (policy, same_node) in [("Pack", true), ("Spread", false)] {
        let f = Fixture::new(&[("node-0", 4, "H100"), ("node-1", 4, "H100")]);
        f.put_class_params(policy);
        let mut nodes = Vec::new();
        for i in 0..2 {
            let mut items = vec![
                f.item("", claim(&format!("c{i}"), &format!("uid-{i}")))
                    .await,
            ];
            f.driver.allocate(&mut items, None).await;
            assert!(items[0].allocation.is_some());
            nodes.push(
                f.driver
                    .ledger()
                    .allocation(&format!("uid-{i}"))
                    .unwrap()
                    .unwrap()
                    .node,
            );
        }
        assert_eq!(nodes[0] == nodes[1], same_node, "{policy}: {nodes:?}");
    }
}

#[tokio::test]
async fn shared_claims_share_a_device_up_to_max_consumers() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    let shared = SharingSpec {
        mode: Some("Shared".into()),
        max_consumers: Some(2),
    };
    f.put_params(
        "shared",
        DeviceClaimParametersSpec {
            sharing: Some(shared),
            ..Default::default()
        },
    );
    let mut outcomes = Vec::new();
    for i in 0..3 {
        let mut items = vec![
            f.item(
                "",
                claim(&format!("c{i}"), &format!("uid-{i}")).params("shared"),
            )
            .await,
        ];
        f.driver.allocate(&mut items, None).await;
        outcomes.push(items[0].allocation.is_some());
    }
    assert_eq!(outcomes, [true, true, false]);
}

#[tokio::test]
async fn invalid_parameters_name_the_field() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    f.put_params(
        "zero",
        DeviceClaimParametersSpec {
            count: Some(0),
            ..Default::default()
        },
    );
    let absent = class(Some("absent"));
    let class = class(None);
    let defaults = f.driver.get_class_parameters(&class).await.unwrap();
    let bad = claim("c1", "uid-1").params("zero");
    let error = f
        .driver
        .get_claim_parameters(&bad.0, &class, &defaults)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid DeviceClaimParameters default/zero: spec.count: must be between 1 and 16, got 0"
    );
    let missing = claim("c2", "uid-2").params("nope");
    let error = f
        .driver
        .get_claim_parameters(&missing.0, &class, &defaults)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "DeviceClaimParameters default/nope not found"
    );
    let mut wrong_kind = claim("c3", "uid-3").params("zero");
    wrong_kind.0.spec.parameters_ref.as_mut().unwrap().kind = "ConfigMap".into();
    let error = f
        .driver
        .get_claim_parameters(&wrong_kind.0, &class, &defaults)
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with("parametersRef.kind: "),
        "{error}"
    );
    let error = f.driver.get_class_parameters(&absent).await.unwrap_err();
    assert_eq!(error.to_string(), "DeviceClassParameters absent not found");
}

#[tokio::test]
async fn framework_posts_invalid_claim_parameters_as_an_event_naming_the_field() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    let bad = SharingSpec {
        mode: Some("Shared".into()),
        max_consumers: Some(0),
    };
    f.put_params(
        "bad",
        DeviceClaimParametersSpec {
            sharing: Some(bad),
            ..Default::default()
        },
    );
    let api = Arc::new(FakeApi::new());
    let caches = Arc::new(MemoryCaches::new());
    let c = claim("c1", "uid-1").params("bad").immediate().0;
    api.insert_claim(c.clone());
    caches.put_claim(c);
    caches.put_class(class(None));
    let controller: Controller<LedgerDriver> = Controller::from_parts(
        DRIVER,
        f.driver.clone(),
        api.clone(),
        caches,
        ControllerConfig::default(),
    );
    let result = controller.sync(&QueueKey::claim("default", "c1")).await;
    assert!(result.is_err());
    let events = api.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_, EventType::Warning);
    assert!(
        events[0]
            .message
            .contains("spec.sharing.maxConsumers: must be at least 1"),
        "{}",
        events[0].message
    );
    assert!(f.driver.ledger().allocation("uid-1").unwrap().is_none());
}

#[tokio::test]
async fn claim_items_carry_parameters_from_the_driver() {
    let f = Fixture::new(&[("node-0", 1, "H100")]);
    f.put_params("p", params(3));
    let item: ClaimAllocation<LedgerDriver> = f.item("gpu", claim("c1", "uid-1").params("p")).await;
    assert_eq!(item.claim_parameters.request.count, 3);
}

#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<String>>);

impl DriverObserver for Recorder {
    fn allocation(
        &self,
        mode: AllocationMode,
        outcome: AllocationOutcome,
        claims: usize,
        _: Duration,
    ) {
        self.0.lock().unwrap().push(format!(
            "allocation {} {} {claims}",
            mode.as_str(),
            outcome.as_str()
        ));
    }
    fn deallocation(&self, outcome: DeallocationOutcome) {
        self.0
            .lock()
            .unwrap()
            .push(format!("deallocation {}", outcome.as_str()));
    }
    fn drift(&self, kind: DriftKind, count: u64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("drift {} {count}", kind.as_str()));
    }
}

#[tokio::test]
async fn observer_sees_each_call_with_fixed_labels() {
    let recorder = Arc::new(Recorder::default());
    let f = Fixture::observed(&[("node-0", 2, "H100")], recorder.clone());
    f.put_params("three", params(3));
    let mut fits = vec![
        f.item("a", claim("ca", "uid-a")).await,
        f.item("b", claim("cb", "uid-b")).await,
    ];
    f.driver.allocate(&mut fits, Some("node-0")).await;
    // Too big for the node: counted as unsatisfiable.
    f.allocate_immediate(claim("cc", "uid-c").params("three"))
        .await;
    f.driver.allocate(&mut [], None).await;
    f.driver.deallocate(&fits[0].claim).await.unwrap();
    f.driver.deallocate(&fits[0].claim).await.unwrap();
    f.cluster.put_claim(allocated(
        &fits[1].claim,
        fits[1].allocation.clone().unwrap(),
    ));
    let orphan = allocated(&claim("cd", "uid-d").0, fits[1].allocation.clone().unwrap());
    f.cluster.put_claim(orphan);
    let report = f.driver.reconcile_now().await.unwrap();
    assert_eq!(
        report.count(DriftKind::BadHandleData),
        1,
        "the copied handle names another claim UID"
    );
    assert_eq!(
        *recorder.0.lock().unwrap(),
        [
            "allocation delayed allocated 2",
            "allocation immediate unsatisfiable 1",
            "deallocation released",
            "deallocation not_allocated",
            "drift bad_handle_data 1",
        ]
    );
}
