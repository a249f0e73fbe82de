use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ClaimSource, Node, NodeSpec, Pod, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, PodSchedulingContext, PodSchedulingContextSpec, PodSchedulingContextStatus,
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimSchedulingStatus,
    ResourceClaimSpec, ResourceClaimStatus, ResourceClass,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::explain;
use super::plan::{
    decide_explained, potential_nodes, resolve, Decision, PodClaim, Snapshot, MAX_NODE_LIST,
};
use super::plan::{pre_bind, PreBind};
use super::{claims_to_write, wants};
use crate::actors::indexes::OwnWrites;
use crate::actors::selectors::node_name_selector;
use crate::actors::ObjectKey;

const POD_UID: &str = "pod-uid";

/// Publishing `nodes` as the potential nodes, with `selected` as the selected node.
fn publish(nodes: &[&str], selected: Option<&str>) -> Decision {
    Decision::Publish {
        potential_nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        selected_node: selected.map(str::to_owned),
    }
}

/// The decision of one scheduling cycle over the snapshot, without its message.
fn decide(snap: &Snapshot<'_>) -> Decision {
    decide_explained(snap).0
}

fn pod(claims: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            uid: Some(POD_UID.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            resource_claims: Some(
                claims
                    .iter()
                    .map(|(pod_claim, claim)| PodResourceClaim {
                        name: (*pod_claim).into(),
                        source: Some(ClaimSource {
                            resource_claim_name: Some((*claim).into()),
                            resource_claim_template_name: None,
                        }),
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
}

/// A claim fixture: `claim("a").delayed()`, `.allocated_on("n1")`, `.reserved_by("uid")`.
struct ClaimBuilder(ResourceClaim);

fn claim(name: &str) -> ClaimBuilder {
    ClaimBuilder(ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            allocation_mode: Some("WaitForFirstConsumer".into()),
            resource_class_name: "gpu".into(),
            parameters_ref: None,
        },
        status: None,
    })
}

impl ClaimBuilder {
    fn immediate(mut self) -> Self {
        self.0.spec.allocation_mode = Some("Immediate".into());
        self
    }
    fn status(&mut self) -> &mut ResourceClaimStatus {
        self.0
            .status
            .get_or_insert_with(ResourceClaimStatus::default)
    }
    fn allocated_on(mut self, node: &str) -> Self {
        self.status().allocation = Some(AllocationResult {
            available_on_nodes: Some(node_name_selector(node)),
            ..AllocationResult::default()
        });
        self
    }
    fn reserved_by(mut self, uid: &str) -> Self {
        self.status()
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: format!("pod-{uid}"),
                uid: uid.into(),
            });
        self
    }
    fn deallocation_requested(mut self) -> Self {
        self.status().deallocation_requested = Some(true);
        self
    }
    fn shareable(mut self) -> Self {
        if let Some(allocation) = self.status().allocation.as_mut() {
            allocation.shareable = Some(true);
        }
        self
    }
    fn at_version(mut self, version: u64) -> Self {
        self.0.metadata.resource_version = Some(version.to_string());
        self
    }
    fn into_pod_claim(self, pod_claim_name: &str) -> PodClaim {
        PodClaim {
            pod_claim_name: pod_claim_name.into(),
            claim: Arc::new(self.0),
        }
    }
}

fn context(
    selected: Option<&str>,
    potential: &[&str],
    unsuitable: &[(&str, &[&str])],
) -> PodSchedulingContext {
    PodSchedulingContext {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: PodSchedulingContextSpec {
            selected_node: selected.map(Into::into),
            potential_nodes: Some(potential.iter().map(|n| (*n).into()).collect()),
        },
        status: Some(PodSchedulingContextStatus {
            resource_claims: Some(
                unsuitable
                    .iter()
                    .map(|(name, nodes)| ResourceClaimSchedulingStatus {
                        name: Some((*name).into()),
                        unsuitable_nodes: Some(nodes.iter().map(|n| (*n).into()).collect()),
                    })
                    .collect(),
            ),
        }),
    }
}

fn class_gpu(name: &str) -> Option<Arc<ResourceClass>> {
    (name == "gpu").then(|| {
        Arc::new(ResourceClass {
            metadata: ObjectMeta {
                name: Some("gpu".into()),
                ..ObjectMeta::default()
            },
            driver_name: "gpu.dra-ledger.io".into(),
            ..ResourceClass::default()
        })
    })
}

fn no_load(_: &str) -> usize {
    0
}

fn run(claims: &[PodClaim], ctx: Option<&PodSchedulingContext>, nodes: &[Arc<Node>]) -> Decision {
    let pod = pod(&[]);
    decide(&Snapshot {
        pod: &pod,
        claims,
        context: ctx,
        nodes,
        class: &class_gpu,
        load: &no_load,
    })
}

fn nodes(names: &[&str]) -> Vec<Arc<Node>> {
    names.iter().map(|n| node(n)).collect()
}

#[test]
fn pod_without_claims_binds_to_least_loaded_node() {
    let pod = pod(&[]);
    let load = |n: &str| if n == "n1" { 3 } else { 1 };
    let decision = decide(&Snapshot {
        pod: &pod,
        claims: &[],
        context: None,
        nodes: &nodes(&["n1", "n2"]),
        class: &class_gpu,
        load: &load,
    });
    assert_eq!(
        decision,
        Decision::Bind {
            node: "n2".into(),
            reserve: vec![]
        }
    );
}

#[test]
fn unschedulable_nodes_are_filtered_out() {
    let mut cordoned = (*node("n1")).clone();
    cordoned.spec = Some(NodeSpec {
        unschedulable: Some(true),
        ..NodeSpec::default()
    });
    let decision = run(&[], None, &[Arc::new(cordoned), node("n2")]);
    assert_eq!(
        decision,
        Decision::Bind {
            node: "n2".into(),
            reserve: vec![]
        }
    );
    let only_cordoned = run(
        &[],
        None,
        &[Arc::new((*node("n1")).clone()).clone()].map(|n| {
            let mut n = (*n).clone();
            n.spec = Some(NodeSpec {
                unschedulable: Some(true),
                ..NodeSpec::default()
            });
            Arc::new(n)
        }),
    );
    assert!(matches!(only_cordoned, Decision::Unschedulable(_)));
}

#[test]
fn single_pending_claim_publishes_potential_and_selected_node_at_once() {
    let claims = [claim("c").into_pod_claim("gpu")];
    let decision = run(&claims, None, &nodes(&["n2", "n1"]));
    let Decision::Publish {
        potential_nodes,
        selected_node,
    } = decision
    else {
        panic!("expected Publish, got {decision:?}");
    };
    assert_eq!(potential_nodes, vec!["n1".to_owned(), "n2".to_owned()]);
    // Both nodes are equally loaded: either may be selected.
    assert!(
        selected_node
            .as_deref()
            .is_some_and(|n| potential_nodes.iter().any(|p| p == n)),
        "{selected_node:?}"
    );
}

#[test]
fn two_pending_claims_wait_for_driver_information_before_selecting() {
    let claims = [
        claim("a").into_pod_claim("a"),
        claim("b").into_pod_claim("b"),
    ];
    let first = run(&claims, None, &nodes(&["n1", "n2"]));
    assert_eq!(first, publish(&["n1", "n2"], None));
    let partial = context(None, &["n1", "n2"], &[("a", &[])]);
    assert_eq!(
        run(&claims, Some(&partial), &nodes(&["n1", "n2"])),
        Decision::Unschedulable("waiting for resource driver to provide information".into())
    );
    // The published list holds every feasible node, so it stays as it is: only the selection
    // is new.
    let complete = context(None, &["n1", "n2"], &[("a", &["n1"]), ("b", &[])]);
    assert_eq!(
        run(&claims, Some(&complete), &nodes(&["n1", "n2"])),
        publish(&["n1", "n2"], Some("n2"))
    );
}

#[test]
fn unsuitable_nodes_are_never_selected() {
    let claims = [claim("c").into_pod_claim("gpu")];
    let ctx = context(None, &["n1", "n2"], &[("gpu", &["n1"])]);
    assert_eq!(
        run(&claims, Some(&ctx), &nodes(&["n1", "n2"])),
        publish(&["n1", "n2"], Some("n2"))
    );
}

#[test]
fn potential_nodes_are_published_again_only_when_a_feasible_node_is_missing() {
    // One claim allocated on n1 leaves n1 the only feasible node: it is in the list already,
    // so the cycle waits for the driver without writing the context.
    let claims = [
        claim("a").allocated_on("n1").into_pod_claim("a"),
        claim("b").into_pod_claim("b"),
    ];
    let ctx = context(Some("n1"), &["n1", "n2"], &[("a", &[]), ("b", &[])]);
    assert_eq!(
        run(&claims, Some(&ctx), &nodes(&["n1", "n2"])),
        Decision::Unschedulable("waiting for resource driver to allocate resource".into())
    );
    // A node that joined the cluster is feasible and not listed: a new list with it.
    let claims = [claim("c").into_pod_claim("gpu")];
    let ctx = context(Some("n1"), &["n1"], &[("gpu", &[])]);
    let decision = run(&claims, Some(&ctx), &nodes(&["n1", "n2"]));
    let Decision::Publish {
        potential_nodes, ..
    } = decision
    else {
        panic!("expected Publish, got {decision:?}");
    };
    assert_eq!(potential_nodes, vec!["n1".to_owned(), "n2".to_owned()]);
}

#[test]
fn published_selection_waits_for_allocation() {
    let claims = [claim("c").into_pod_claim("gpu")];
    let ctx = context(Some("n1"), &["n1", "n2"], &[("gpu", &[])]);
    assert_eq!(
        run(&claims, Some(&ctx), &nodes(&["n1", "n2"])),
        Decision::Unschedulable("waiting for resource driver to allocate resource".into())
    );
}

#[test]
fn allocated_claims_bind_on_their_node_and_reserve_only_unreserved_claims() {
    let claims = [
        claim("a").allocated_on("n2").into_pod_claim("a"),
        claim("b")
            .allocated_on("n2")
            .reserved_by(POD_UID)
            .into_pod_claim("b"),
    ];
    assert_eq!(
        run(&claims, None, &nodes(&["n1", "n2", "n3"])),
        Decision::Bind {
            node: "n2".into(),
            reserve: vec!["a".into()]
        }
    );
}

#[test]
fn unallocated_immediate_claim_keeps_the_pod_waiting() {
    let claims = [claim("c").immediate().into_pod_claim("gpu")];
    assert!(matches!(
        run(&claims, None, &nodes(&["n1"])),
        Decision::Unschedulable(_)
    ));
}

#[test]
fn claim_in_use_by_another_pod_blocks_scheduling() {
    let claims = [claim("c")
        .allocated_on("n1")
        .reserved_by("other")
        .into_pod_claim("gpu")];
    assert_eq!(
        run(&claims, None, &nodes(&["n1"])),
        Decision::Unschedulable("resourceclaim c is in use".into())
    );
}

#[test]
fn claim_being_deallocated_blocks_scheduling() {
    let claims = [claim("c")
        .allocated_on("n1")
        .deallocation_requested()
        .into_pod_claim("gpu")];
    assert!(matches!(
        run(&claims, None, &nodes(&["n1"])),
        Decision::Unschedulable(_)
    ));
}

#[test]
fn selected_node_unsuitable_after_allocation_deallocates_after_clearing_selection() {
    // Claim a was allocated on n1, then the driver found that b does not fit there.
    let claims = [
        claim("a").allocated_on("n1").into_pod_claim("a"),
        claim("b").into_pod_claim("b"),
    ];
    let ctx = context(Some("n1"), &["n1", "n2"], &[("b", &["n1"])]);
    assert_eq!(
        run(&claims, Some(&ctx), &nodes(&["n1", "n2"])),
        Decision::Deallocate {
            claim: "a".into(),
            clear_selected_node: true
        }
    );
}

#[test]
fn claim_reserved_by_another_pod_is_not_deallocated() {
    let mut shared = claim("a").allocated_on("n1").reserved_by("other");
    shared.status().allocation.as_mut().unwrap().shareable = Some(true);
    let claims = [shared.into_pod_claim("a"), claim("b").into_pod_claim("b")];
    let ctx = context(None, &["n1"], &[("b", &["n1"])]);
    assert!(matches!(
        run(&claims, Some(&ctx), &nodes(&["n1", "n2"])),
        Decision::Unschedulable(_)
    ));
}

#[test]
fn potential_nodes_are_capped_sorted_and_drawn_from_feasible_nodes() {
    let names: Vec<String> = (0..300).map(|i| format!("node-{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let chosen = potential_nodes(&refs);
    assert_eq!(chosen.len(), MAX_NODE_LIST);
    assert!(chosen.windows(2).all(|w| w[0] < w[1]));
    assert!(chosen.iter().all(|n| names.contains(n)));
}

#[test]
fn template_claim_must_be_recorded_and_owned_by_the_pod() {
    let mut pod = pod(&[]);
    pod.spec.as_mut().unwrap().resource_claims = Some(vec![PodResourceClaim {
        name: "gpu".into(),
        source: Some(ClaimSource {
            resource_claim_template_name: Some("t".into()),
            resource_claim_name: None,
        }),
    }]);
    let none = |_: &str| None;
    assert!(resolve(&pod, &none)
        .unwrap_err()
        .reason
        .contains("not created yet"));
    pod.status = Some(PodStatus {
        resource_claim_statuses: Some(vec![PodResourceClaimStatus {
            name: "gpu".into(),
            resource_claim_name: Some("p-gpu-abc".into()),
        }]),
        ..PodStatus::default()
    });
    let foreign = |_: &str| Some(Arc::new(claim("p-gpu-abc").0));
    assert!(resolve(&pod, &foreign)
        .unwrap_err()
        .reason
        .contains("not created for the pod"));
    let owned = |_: &str| {
        let mut c = claim("p-gpu-abc").0;
        c.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: POD_UID.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        Some(Arc::new(c))
    };
    let resolved = resolve(&pod, &owned).unwrap();
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].pod_claim_name, "gpu");
    let deleting = |_: &str| {
        let mut c = claim("p-gpu-abc").0;
        c.metadata.deletion_timestamp = Some(Time(chrono::Utc::now()));
        Some(Arc::new(c))
    };
    assert!(resolve(&pod, &deleting)
        .unwrap_err()
        .reason
        .contains("being deleted"));
}

#[test]
fn pods_of_other_schedulers_and_bound_pods_are_ignored() {
    let mut p = pod(&[]);
    assert!(wants(&p));
    p.spec.as_mut().unwrap().scheduler_name = Some("volcano".into());
    assert!(!wants(&p));
    p.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
    p.spec.as_mut().unwrap().node_name = Some("n1".into());
    assert!(!wants(&p));
}

fn event_of(
    claims: &[PodClaim],
    ctx: Option<&PodSchedulingContext>,
    nodes: &[Arc<Node>],
) -> Option<String> {
    let pod = pod(&[]);
    decide_explained(&Snapshot {
        pod: &pod,
        claims,
        context: ctx,
        nodes,
        class: &class_gpu,
        load: &no_load,
    })
    .1
}

#[test]
fn failed_scheduling_texts_are_the_upstream_ones() {
    let in_use = [claim("c")
        .allocated_on("n1")
        .reserved_by("other")
        .into_pod_claim("gpu")];
    assert_eq!(
        event_of(&in_use, None, &nodes(&["n1", "n2"])).as_deref(),
        Some(
            "0/2 nodes are available: resourceclaim in use. preemption: 0/2 nodes are available: \
             2 Preemption is not helpful for scheduling., no new claims to deallocate"
        )
    );
    let immediate = [claim("c").immediate().into_pod_claim("gpu")];
    assert!(event_of(&immediate, None, &nodes(&["n1"]))
        .unwrap()
        .starts_with("0/1 nodes are available: unallocated immediate resourceclaim. "));

    let pending = [claim("c").into_pod_claim("gpu")];
    let all_unsuitable = context(Some("n1"), &["n1", "n2"], &[("gpu", &["n1", "n2"])]);
    assert!(event_of(&pending, Some(&all_unsuitable), &nodes(&["n1", "n2"]))
        .unwrap()
        .starts_with(
            "0/2 nodes are available: 2 resourceclaim cannot be allocated for the node (unsuitable). "
        ));
    let reported = context(Some("n1"), &["n1"], &[("gpu", &[])]);
    assert_eq!(
        event_of(&pending, Some(&reported), &nodes(&["n1"])),
        Some(explain::reserve_waiting())
    );
    assert_eq!(
        event_of(&pending, None, &nodes(&["n1"])).as_deref(),
        Some(explain::PRE_BIND_WAITING)
    );
    let bound = [claim("c").allocated_on("n1").into_pod_claim("gpu")];
    assert_eq!(event_of(&bound, None, &nodes(&["n1"])), None);
}

#[test]
fn unresolved_claims_carry_the_upstream_text() {
    let pod = pod(&[("gpu", "missing")]);
    let none = |_: &str| None;
    let unresolved = resolve(&pod, &none).unwrap_err();
    assert_eq!(unresolved.reason, "resourceclaim missing not found");
    assert_eq!(
        unresolved.upstream,
        "could not find ResourceClaim \"default/missing\""
    );
}

/// The race behind a pod bound with a claim deallocated under it: a cycle decides on a snapshot
/// that predates this scheduler's own deallocation request, and the informer delivers the
/// request before the bind looks at which claims to read live. The snapshot's copy decides.
#[test]
fn a_claim_whose_snapshot_copy_predates_the_own_write_is_read_live_before_the_bind() {
    let own = OwnWrites::new();
    let key = ObjectKey::new("default", "p");
    own.wrote(&ObjectKey::new("default", "a"), Some(12));
    let snapshot = [
        claim("a")
            .allocated_on("n1")
            .reserved_by(POD_UID)
            .at_version(10)
            .into_pod_claim("gpu-0"),
        claim("b")
            .allocated_on("n1")
            .reserved_by(POD_UID)
            .at_version(11)
            .into_pod_claim("gpu-1"),
    ];
    assert_eq!(claims_to_write(&own, &key, &snapshot, &[]), ["a"]);
    let caught_up = [claim("a")
        .allocated_on("n1")
        .deallocation_requested()
        .at_version(12)
        .into_pod_claim("gpu-0")];
    assert!(
        claims_to_write(&own, &key, &caught_up, &[]).is_empty(),
        "a snapshot that shows the write needs no live read"
    );
    let to_reserve = [claim("b")
        .allocated_on("n1")
        .at_version(11)
        .into_pod_claim("gpu-1")];
    assert_eq!(
        claims_to_write(&own, &key, &to_reserve, &["b".to_owned()]),
        ["b"]
    );
}

#[test]
fn pre_bind_refuses_a_claim_that_changed_since_the_decision_and_reserves_the_others() {
    let n1 = node("n1");
    let step = |builder: ClaimBuilder, to_reserve: bool| {
        let mut claim = builder.0;
        let step = pre_bind(&mut claim, "p", POD_UID, to_reserve, &n1);
        (step, claim)
    };
    assert_eq!(
        step(claim("a").allocated_on("n1").reserved_by(POD_UID), false).0,
        PreBind::Keep
    );
    assert_eq!(
        step(claim("a").allocated_on("n2").reserved_by(POD_UID), false).0,
        PreBind::Unusable,
        "deallocated and allocated again on another node since the decision"
    );
    assert_eq!(
        step(
            claim("a").allocated_on("n1").deallocation_requested(),
            false
        )
        .0,
        PreBind::Unusable,
        "its deallocation was requested"
    );
    assert_eq!(
        step(claim("a"), true).0,
        PreBind::Unusable,
        "not allocated any more"
    );
    assert_eq!(
        step(claim("a").allocated_on("n1"), false).0,
        PreBind::Unusable,
        "seen reserved for the pod, no longer"
    );
    assert_eq!(
        step(claim("a").allocated_on("n1").reserved_by("other"), true).0,
        PreBind::Unusable,
        "in use by another pod"
    );
    let (reserved, written) = step(claim("a").allocated_on("n1"), true);
    assert_eq!(reserved, PreBind::Reserve);
    assert!(super::plan::reserved_for(&written, POD_UID));
    let (shared, written) = step(
        claim("a")
            .allocated_on("n1")
            .shareable()
            .reserved_by("other"),
        true,
    );
    assert_eq!(shared, PreBind::Reserve);
    assert_eq!(written.status.unwrap().reserved_for.unwrap().len(), 2);
}
