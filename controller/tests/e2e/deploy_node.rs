//! The node agent's manifests: the `DaemonSet` runs `dra-ledger node` with flags the binary
//! accepts, every directory a flag names is the host's own path mounted at the same place, and
//! the `ClusterRole` grants exactly the requests the agent's garbage collection makes.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::resource::v1alpha2::{ResourceClaim, ResourceClaimSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::Api;

use crate::deploy_support::find;
use crate::deploy_support::rbac::{granted, lines, RecordingLayer};
use crate::deploy_support::run_flags::RunFlags;
use dra_node::gc::{find_stale, PreparedRef};

fn agent_pod() -> PodSpec {
    let set: DaemonSet = find("DaemonSet", "dra-ledger-node").parse();
    set.spec.expect("spec").template.spec.expect("pod spec")
}

/// Mount path -> (host path, read-only) of the container's hostPath volumes.
fn host_mounts(pod: &PodSpec, container: &Container) -> BTreeMap<String, (String, bool)> {
    let volumes: BTreeMap<&str, &str> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| Some((v.name.as_str(), v.host_path.as_ref()?.path.as_str())))
        .collect();
    container
        .volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let host = volumes.get(m.name.as_str())?;
            Some((
                m.mount_path.clone(),
                ((*host).to_owned(), m.read_only.unwrap_or(false)),
            ))
        })
        .collect()
}

#[test]
fn daemonset_runs_the_node_agent_with_host_paths_at_the_paths_its_flags_name() {
    let pod = agent_pod();
    let container = &pod.containers[0];
    let node = RunFlags::of(&container.args.clone().expect("args"));
    let mounts = host_mounts(&pod, container);
    for (flag, read_only) in [
        ("kubelet-registry-dir", false),
        ("kubelet-plugins-dir", false),
        ("cdi-dir", false),
        ("state-dir", false),
        ("sysfs-root", true),
        ("dev-root", true),
    ] {
        let path = node.value(flag);
        assert_eq!(
            mounts.get(path),
            Some(&(path.to_owned(), read_only)),
            "--{flag}={path}: the host's {path} mounted there (read-only: {read_only})"
        );
    }
    assert_eq!(
        node.value("kubelet-registry-dir"),
        "/var/lib/kubelet/plugins_registry",
        "where the 1.30 kubelet looks for registration sockets"
    );
    assert_eq!(node.value("devices"), "sysfs");

    let env = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "NODE_NAME");
    let field = env
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(
        field,
        Some("spec.nodeName"),
        "--node-name from the pod's node"
    );

    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("admin"))
        .map(|p| p.container_port);
    assert_eq!(
        port,
        Some(i32::from(node.parsed::<SocketAddr>("listen").port()))
    );
    let path = |probe: Option<&k8s_openapi::api::core::v1::Probe>| {
        probe.and_then(|p| p.http_get.as_ref()?.path.clone())
    };
    assert_eq!(
        path(container.liveness_probe.as_ref()).as_deref(),
        Some("/healthz")
    );
    assert_eq!(
        path(container.readiness_probe.as_ref()).as_deref(),
        Some("/readyz")
    );

    let security = container
        .security_context
        .as_ref()
        .expect("securityContext");
    assert_eq!(security.privileged, Some(false));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    let dropped = security.capabilities.as_ref().and_then(|c| c.drop.clone());
    assert_eq!(dropped, Some(vec!["ALL".to_owned()]));
    assert!(
        pod.termination_grace_period_seconds.unwrap_or(0) > 20,
        "longer than the shutdown grace"
    );
    let class: k8s_openapi::api::resource::v1alpha2::ResourceClass =
        find("ResourceClass", "gpu").parse();
    assert_eq!(node.value("driver-name"), class.driver_name);
}

#[test]
fn node_cluster_role_is_bound_to_the_daemonset_service_account() {
    let pod = agent_pod();
    let set: DaemonSet = find("DaemonSet", "dra-ledger-node").parse();
    let binding: ClusterRoleBinding = find("ClusterRoleBinding", "dra-ledger-node").parse();
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(binding.role_ref.name, "dra-ledger-node");
    let subjects = binding.subjects.unwrap_or_default();
    assert!(
        subjects.iter().any(|s| s.kind == "ServiceAccount"
            && Some(&s.name) == pod.service_account_name.as_ref()
            && s.namespace == set.metadata.namespace),
        "{subjects:?}"
    );
}

fn claim(name: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            resource_class_name: "gpu".into(),
            ..ResourceClaimSpec::default()
        },
        status: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_cluster_role_grants_exactly_what_the_agent_requests() {
    let role: ClusterRole = find("ClusterRole", "dra-ledger-node").parse();
    let granted = granted(&role);
    let cluster = dra_sim::cluster::start_cluster(dra_sim::cluster::ClusterConfig::default())
        .await
        .expect("cluster starts");
    let plain = cluster.kube_client();
    let claims: Api<ResourceClaim> = Api::namespaced(plain, "default");
    let kept = claims
        .create(&PostParams::default(), &claim("kept"))
        .await
        .unwrap();
    let recorder = RecordingLayer::default();
    let mut config = kube::Config::new(cluster.url().parse().expect("cluster URL"));
    config.default_namespace = "default".into();
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&recorder)
        .build();
    // One prepared claim exists but is not allocated (stale, confirmed by a GET), one is gone.
    let prepared = [
        PreparedRef {
            uid: kept.metadata.uid.clone().unwrap(),
            namespace: "default".into(),
            name: "kept".into(),
        },
        PreparedRef {
            uid: "0b8c6a3e-0000-4000-8000-000000000001".into(),
            namespace: "default".into(),
            name: "gone".into(),
        },
    ];
    let stale = find_stale(&client, &prepared, "node-0", "gpu.dra-ledger.io")
        .await
        .unwrap();
    assert_eq!(stale.len(), 2, "{stale:?}");
    cluster.shutdown().await;

    let observed = recorder.accesses();
    assert!(recorder.other().is_empty(), "{:?}", recorder.other());
    let denied: Vec<_> = observed.difference(&granted).collect();
    assert!(denied.is_empty(), "not allowed:\n{}", lines(denied));
    let unused: Vec<_> = granted.difference(&observed).collect();
    assert!(unused.is_empty(), "never requested:\n{}", lines(unused));
}
