//! Who reaches the controller's admin port in `deploy/base/`: the StatefulSet's governing Service
//! is headless and gives each replica the DNS name that the default `--leader-url-template`
//! forwards to, and the NetworkPolicy admits the admin port from the other replica, namespaces
//! labelled for monitoring and Prometheus pods only (evaluated here as the NetworkPolicy API
//! defines it: a source matches any `from` peer of a rule whose ports include the port). The
//! schema check against 1.30 is `deploy_manifests`'s, which covers every base manifest.

// Kubernetes kind names are prose in these docs.
#![allow(clippy::doc_markdown)]

use std::collections::BTreeMap;

use crate::deploy_support::find;
use crate::deploy_support::run_flags::RunFlags;
use dra_controller::leader::LeaderUrlTemplate;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Container, Service};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

type Labels = BTreeMap<String, String>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Whether `selector` selects `labels` (`matchLabels` and `matchExpressions`; empty selects all).
fn selects(selector: &LabelSelector, labels: &Labels) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            other => panic!("unknown operator {other}"),
        }
    });
    by_labels && by_expressions
}

/// A source of traffic: its namespace (name and labels) and its pod's labels.
struct Source {
    namespace: &'static str,
    namespace_labels: Labels,
    pod_labels: Labels,
}

fn source(namespace: &'static str, ns_labels: &[(&str, &str)], pod: &[(&str, &str)]) -> Source {
    let mut namespace_labels = labels(ns_labels);
    namespace_labels.insert(
        "kubernetes.io/metadata.name".to_owned(),
        namespace.to_owned(),
    );
    Source {
        namespace,
        namespace_labels,
        pod_labels: labels(pod),
    }
}

/// Whether `peer` of a policy in `policy_namespace` matches `from`: a pod selector alone means
/// pods of the policy's namespace; a namespace selector alone, every pod of those namespaces.
fn peer_matches(peer: &NetworkPolicyPeer, policy_namespace: &str, from: &Source) -> bool {
    assert!(peer.ip_block.is_none(), "no ipBlock peers expected");
    let namespace_ok = match &peer.namespace_selector {
        Some(selector) => selects(selector, &from.namespace_labels),
        None => from.namespace == policy_namespace,
    };
    let pod_ok = peer
        .pod_selector
        .as_ref()
        .is_none_or(|selector| selects(selector, &from.pod_labels));
    namespace_ok && pod_ok
}

/// Whether `policy` admits `from` to the named container `port` of the pods it selects.
fn admits(policy: &NetworkPolicy, from: &Source, port: &str, port_number: i32) -> bool {
    let namespace = policy.metadata.namespace.as_deref().unwrap_or("default");
    let spec = policy.spec.as_ref().expect("spec");
    spec.ingress.iter().flatten().any(|rule| {
        let port_ok = rule.ports.as_ref().is_none_or(|ports| {
            ports.iter().any(|p| match &p.port {
                None => true,
                Some(IntOrString::String(name)) => name == port,
                Some(IntOrString::Int(number)) => *number == port_number,
            })
        });
        let from_ok = rule
            .from
            .as_ref()
            .is_none_or(|peers| peers.iter().any(|peer| peer_matches(peer, namespace, from)));
        port_ok && from_ok
    })
}

/// The controller container and the labels of its pods.
fn controller_pods() -> (StatefulSet, Container, Labels) {
    let set: StatefulSet = find("StatefulSet", "dra-ledger").parse();
    let spec = set.spec.clone().expect("spec");
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .expect("pod labels");
    let container = spec.template.spec.expect("pod spec").containers[0].clone();
    (set, container, pod_labels.into_iter().collect())
}

/// The container port named `admin`.
fn admin_port(container: &Container) -> i32 {
    container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("admin"))
        .expect("a port named admin")
        .container_port
}

#[test]
fn the_governing_service_is_headless_and_names_the_replicas_where_standbys_forward() {
    let (set, container, pod_labels) = controller_pods();
    let spec = set.spec.clone().expect("spec");
    let namespace = set.metadata.namespace.clone().expect("namespace");
    let service_name = spec.service_name.clone().expect("serviceName");
    let peers: Service = find("Service", &service_name).parse();
    let peers_spec = peers.spec.expect("service spec");
    assert_eq!(peers_spec.cluster_ip.as_deref(), Some("None"), "headless");
    assert_eq!(peers_spec.publish_not_ready_addresses, Some(true));
    let selector: Labels = peers_spec.selector.expect("selector").into_iter().collect();
    assert!(selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    assert_eq!(
        peers_spec.ports.expect("ports")[0].target_port,
        Some(IntOrString::String("admin".to_owned()))
    );

    // The default template, as the pods run it, names the leader pod under this Service.
    let run = RunFlags::of(&container.args.clone().expect("args"));
    assert_eq!(
        run.given("leader-url-template"),
        None,
        "the default is used"
    );
    let port = admin_port(&container);
    assert!(run.value("listen").ends_with(&format!(":{port}")));
    let identity = format!("{}-1_0a1b2c3d", set.metadata.name.as_deref().unwrap());
    let url = LeaderUrlTemplate::default()
        .url_of(&identity, &namespace, u16::try_from(port).unwrap())
        .unwrap();
    assert_eq!(
        url.host(),
        Some(format!("dra-ledger-1.{service_name}.{namespace}.svc").as_str())
    );
    assert_eq!(url.port_u16(), u16::try_from(port).ok());
}

#[test]
fn the_network_policy_admits_the_admin_port_from_peers_monitoring_and_prometheus_only() {
    let (set, container, pod_labels) = controller_pods();
    let policy: NetworkPolicy = find("NetworkPolicy", "dra-ledger-admin").parse();
    assert_eq!(policy.metadata.namespace, set.metadata.namespace);
    let spec = policy.spec.as_ref().expect("spec");
    assert!(
        selects(
            spec.pod_selector.as_ref().expect("podSelector"),
            &pod_labels
        ),
        "selects the controller"
    );
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_owned()][..])
    );
    let port = admin_port(&container);
    let own = "dra-ledger";
    let controller: Vec<(&str, &str)> = pod_labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();

    let admitted = [
        ("the other replica", source(own, &[], &controller)),
        (
            "a namespace labelled for monitoring",
            source("sre", &[("dra-ledger.io/monitoring", "true")], &[]),
        ),
        (
            "Prometheus in its namespace",
            source(
                "monitoring",
                &[],
                &[("app.kubernetes.io/name", "prometheus")],
            ),
        ),
    ];
    for (who, from) in &admitted {
        assert!(admits(&policy, from, "admin", port), "{who} is refused");
    }
    let refused = [
        (
            "a workload namespace",
            source("team-a", &[], &[("app", "web")]),
        ),
        (
            "a namespace labelled otherwise",
            source("sre", &[("dra-ledger.io/monitoring", "false")], &[]),
        ),
        (
            "another pod of the controller's namespace",
            source(own, &[], &[("app", "debug")]),
        ),
        (
            "a pod named like the controller elsewhere",
            source("team-a", &[], &controller),
        ),
        (
            "the node agent",
            source(
                "dra-ledger-node",
                &[],
                &[("app.kubernetes.io/name", "dra-ledger-node")],
            ),
        ),
    ];
    for (who, from) in &refused {
        assert!(!admits(&policy, from, "admin", port), "{who} is admitted");
    }
    // Only the admin port is opened, even to the admitted sources.
    assert!(!admits(&policy, &admitted[0].1, "other", port + 1));
}
