//! The manifests under `deploy/`: each validates against the Kubernetes 1.30 schemas
//! (`kubernetes-validate --strict`; the driver's custom resources against the schemas of
//! `deploy/base/crds.yaml`), the kustomization lists every base manifest, the StatefulSet's arguments
//! are flags `dra-ledger run` accepts and point into the volumes it mounts, the examples work
//! with the controller, and the ClusterRole grants exactly the requests the controller makes.

// Kubernetes kind names are prose in these docs.
#![allow(clippy::doc_markdown)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::deploy_support::rbac::{access_of, granted, granted_in, lines, RecordingLayer};
use crate::deploy_support::run_flags::{help_of, RunFlags};
use crate::deploy_support::schema::violations;
use crate::deploy_support::{
    all_documents, base_dir, deploy_dir, find, kubernetes_validate, manifest_files, yaml_files,
    CUSTOM_GROUP, KUBERNETES_VERSION, KUSTOMIZATION,
};
use dra_controller::params::{
    claim_request, class_parameters, DeviceClaimParameters, DeviceClassParameters,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::api::resource::v1alpha2::ResourceClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};

#[test]
fn manifests_validate_against_the_kubernetes_1_30_schemas() {
    let files = manifest_files();
    let Some(validation) = kubernetes_validate(KUBERNETES_VERSION, &files) else {
        return;
    };
    let report = validation.lines.join("\n");
    assert!(validation.success, "kubernetes-validate failed:\n{report}");
    // Only the driver's own kinds may lack a schema; they are checked against the CRDs below.
    for line in &validation.lines {
        let custom_without_schema = line.contains("Couldn't find schema")
            && line.contains(&format!("api version {CUSTOM_GROUP}/"));
        assert!(
            line.starts_with("INFO") || custom_without_schema,
            "unexpected kubernetes-validate message: {line}\n{report}"
        );
    }
    let built_in = all_documents().iter().filter(|d| !d.is_custom()).count();
    let passed = validation
        .lines
        .iter()
        .filter(|l| l.contains(" passed for resource "))
        .count();
    assert_eq!(
        passed, built_in,
        "every built-in object is validated:\n{report}"
    );
}

#[test]
fn kubernetes_validate_rejects_an_unknown_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("service.yaml");
    let service = std::fs::read_to_string(base_dir().join("service.yaml")).expect("service");
    std::fs::write(&broken, service.replace("  selector:", "  selektor:")).expect("write");
    let Some(validation) = kubernetes_validate(KUBERNETES_VERSION, &[broken]) else {
        return;
    };
    assert!(
        !validation.success,
        "a misspelt field must fail under --strict: {:?}",
        validation.lines
    );
}

/// The `openAPIV3Schema` of each custom kind in `deploy/base/crds.yaml`, as JSON.
fn crd_schemas() -> BTreeMap<String, Value> {
    crate::deploy_support::documents(&base_dir().join("crds.yaml"))
        .iter()
        .map(|doc| {
            let crd: CustomResourceDefinition = doc.parse();
            let version = crd
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .expect("storage version");
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("openAPIV3Schema");
            let api_version = format!("{}/{}", crd.spec.group, version.name);
            let key = format!("{api_version} {}", crd.spec.names.kind);
            (key, serde_json::to_value(schema).expect("schema as JSON"))
        })
        .collect()
}

#[test]
fn custom_resources_match_their_crd_schemas_and_convert() {
    let schemas = crd_schemas();
    let custom: Vec<_> = all_documents()
        .into_iter()
        .filter(crate::deploy_support::Document::is_custom)
        .collect();
    let kinds: BTreeSet<&str> = custom
        .iter()
        .map(crate::deploy_support::Document::kind)
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["DeviceClaimParameters", "DeviceClassParameters"]),
        "the examples show both parameter kinds"
    );
    for doc in &custom {
        let key = format!("{} {}", doc.api_version(), doc.kind());
        let schema = schemas
            .get(&key)
            .unwrap_or_else(|| panic!("no CRD for {key}"));
        let errors = violations(schema, &doc.value);
        assert!(errors.is_empty(), "{key} {}: {errors:#?}", doc.name());
        // Valid for the driver too, not only for the API server.
        if doc.kind() == "DeviceClassParameters" {
            let params: DeviceClassParameters = doc.parse();
            class_parameters(&params.spec).expect("class parameters convert");
        } else {
            let params: DeviceClaimParameters = doc.parse();
            claim_request(&params.spec).expect("claim parameters convert");
        }
    }
}

#[test]
fn crd_schema_check_names_unknown_fields_wrong_types_and_missing_fields() {
    let schema = &crd_schemas()["dra-ledger.io/v1alpha1 DeviceClaimParameters"];
    let document = json!({
        "apiVersion": "dra-ledger.io/v1alpha1",
        "kind": "DeviceClaimParameters",
        "metadata": {"name": "bad"},
        "spec": {
            "cuont": 2,
            "count": "two",
            "selector": [{"operator": "In", "values": ["H100"]}],
            "sharing": {"maxConsumers": -1},
            "sameAttribute": null,
        },
    });
    let errors = violations(schema, &document);
    for expected in [
        ".spec.cuont: unknown field",
        ".spec.count: expected integer",
        ".spec.selector[0].attribute: required field is missing",
        ".spec.sharing.maxConsumers: -1 is below the minimum 0",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(expected)),
            "missing {expected:?} in {errors:#?}"
        );
    }
    assert_eq!(errors.len(), 4, "nullable fields accept null: {errors:#?}");
    let without_spec =
        json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceClaimParameters"});
    assert_eq!(
        violations(schema, &without_spec),
        [".spec: required field is missing"]
    );
}

#[test]
fn kustomization_lists_every_base_manifest() {
    let resources = |dir: &std::path::Path| -> BTreeSet<PathBuf> {
        let kustomization = &crate::deploy_support::documents(&dir.join(KUSTOMIZATION))[0].value;
        kustomization["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|r| dir.join(r.as_str().expect("resource path")))
            .collect()
    };
    let base: BTreeSet<PathBuf> = yaml_files()
        .into_iter()
        .filter(|p| p.parent() == Some(base_dir().as_path()))
        .filter(|p| p.file_name().is_some_and(|n| n != KUSTOMIZATION))
        .collect();
    assert_eq!(
        resources(&base_dir()),
        base,
        "kustomization resources vs deploy/base/*.yaml"
    );
    assert_eq!(
        resources(&deploy_dir()),
        BTreeSet::from([deploy_dir().join("base")]),
        "deploy/ installs the base as it is"
    );
}

#[test]
fn statefulset_runs_the_controller_with_its_flags_volumes_and_probes() {
    let set: StatefulSet = find("StatefulSet", "dra-ledger").parse();
    let spec = set.spec.expect("spec");
    let pod = spec.template.spec.expect("pod spec");
    let container = &pod.containers[0];
    let run = RunFlags::of(&container.args.clone().expect("args"));
    let mounts: BTreeMap<String, String> = container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect();
    let claim_templates: Vec<String> = spec
        .volume_claim_templates
        .iter()
        .flatten()
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    assert_eq!(claim_templates, ["ledger"]);
    assert!(
        run.parsed::<PathBuf>("ledger")
            .starts_with(&mounts["ledger"]),
        "ledger on the volume"
    );
    assert_eq!(mounts["ledger"], "/var/lib/dra-ledger");
    let token = PathBuf::from(run.given("admin-token-file").expect("--admin-token-file"));
    assert!(
        token.starts_with(&mounts["admin-token"]),
        "token from the Secret"
    );
    let secret = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "admin-token");
    assert!(
        secret.and_then(|v| v.secret.as_ref()).is_some(),
        "admin-token is a Secret volume"
    );

    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("admin"));
    assert_eq!(
        port.map(|p| p.container_port),
        Some(i32::from(run.parsed::<SocketAddr>("listen").port()))
    );
    let probe_path = |probe: Option<&k8s_openapi::api::core::v1::Probe>| {
        probe
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.path.clone())
    };
    assert_eq!(
        probe_path(container.liveness_probe.as_ref()).as_deref(),
        Some("/healthz")
    );
    assert_eq!(
        probe_path(container.readiness_probe.as_ref()).as_deref(),
        Some("/readyz")
    );

    let security = container
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    let dropped = security.capabilities.as_ref().and_then(|c| c.drop.clone());
    assert_eq!(dropped, Some(vec!["ALL".to_owned()]));
    let pod_security = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.run_as_user, Some(65532));
    assert_eq!(pod_security.fs_group, Some(65532));
    assert!(
        pod.termination_grace_period_seconds.unwrap_or(0) > 20,
        "longer than the shutdown grace"
    );

    let class: ResourceClass = find("ResourceClass", "gpu").parse();
    assert_eq!(
        run.value("driver-name"),
        class.driver_name,
        "the example class is ours"
    );
    let image = container.image.as_deref().unwrap_or_default();
    assert!(
        image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))),
        "image {image} is tagged with the crate version"
    );

    let service: Service = find("Service", "dra-ledger").parse();
    let annotations = service.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("prometheus.io/port").map(String::as_str),
        Some("8080")
    );
    // The governing Service is the headless one (deploy_admin_access checks it).
    assert_eq!(spec.service_name.as_deref(), Some("dra-ledger-peers"));
}

#[test]
fn cluster_role_is_bound_to_the_statefulset_service_account() {
    let role: ClusterRole = find("ClusterRole", "dra-ledger").parse();
    assert!(!granted(&role).is_empty());
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding =
        find("ClusterRoleBinding", "dra-ledger").parse();
    assert_eq!(binding.role_ref.name, "dra-ledger");
    let set: StatefulSet = find("StatefulSet", "dra-ledger").parse();
    let account = set
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.service_account_name);
    let subjects = binding.subjects.unwrap_or_default();
    assert!(
        subjects.iter().any(|s| s.kind == "ServiceAccount"
            && Some(&s.name) == account.as_ref()
            && s.namespace.as_deref() == set.metadata.namespace.as_deref()),
        "binding subjects {subjects:?} vs service account {account:?}"
    );
    find("ServiceAccount", account.as_deref().unwrap_or_default());
}

#[test]
fn request_paths_map_to_rbac_verbs_and_resources() {
    let access = |method: &str, path: &str, query: Option<&str>| {
        let method = http::Method::from_bytes(method.as_bytes()).expect("method");
        access_of(&method, path, query).map(|a| a.to_string())
    };
    let cases = [
        ("GET", "/api/v1/pods", None, "list core/pods"),
        (
            "GET",
            "/api/v1/pods",
            Some("watch=true&resourceVersion=7"),
            "watch core/pods",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p",
            None,
            "get core/pods",
        ),
        (
            "GET",
            "/api/v1/namespaces/default",
            None,
            "get core/namespaces",
        ),
        (
            "PUT",
            "/apis/resource.k8s.io/v1alpha2/namespaces/ns/resourceclaims/c/status",
            None,
            "update resource.k8s.io/resourceclaims/status",
        ),
        (
            "PATCH",
            "/apis/resource.k8s.io/v1alpha2/namespaces/ns/podschedulingcontexts/p/status",
            None,
            "patch resource.k8s.io/podschedulingcontexts/status",
        ),
        (
            "POST",
            "/apis/events.k8s.io/v1/namespaces/ns/events",
            None,
            "create events.k8s.io/events",
        ),
        (
            "DELETE",
            "/apis/dra-ledger.io/v1alpha1/deviceclassparameters/x",
            None,
            "delete dra-ledger.io/deviceclassparameters",
        ),
        (
            "DELETE",
            "/apis/dra-ledger.io/v1alpha1/namespaces/ns/deviceclaimparameters",
            None,
            "deletecollection dra-ledger.io/deviceclaimparameters",
        ),
    ];
    for (method, path, query, expected) in cases {
        assert_eq!(
            access(method, path, query).as_deref(),
            Ok(expected),
            "{method} {path}"
        );
    }
    assert!(
        access("GET", "/apis", None).is_err(),
        "discovery is not a resource request"
    );
    assert!(access("GET", "/version", None).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_role_grants_exactly_what_the_controller_requests() {
    let role: ClusterRole = find("ClusterRole", "dra-ledger").parse();
    let granted = granted(&role);
    let recorded = crate::deploy_support::workload::run_examples_and_record(&granted).await;
    let observed = recorded.accesses();
    eprintln!("observed:\n{}", lines(&observed));
    assert!(
        recorded.other().is_empty(),
        "non-resource requests: {:?}",
        recorded.other()
    );
    let denied: Vec<_> = observed.difference(&granted).collect();
    assert!(
        denied.is_empty(),
        "requests the ClusterRole does not allow:\n{}",
        lines(denied)
    );
    let unused: Vec<_> = granted.difference(&observed).collect();
    assert!(
        unused.is_empty(),
        "granted but never requested:\n{}",
        lines(unused)
    );
}

#[test]
fn flag_check_refuses_what_dra_ledger_refuses_and_reads_its_defaults() {
    for args in [
        ["run", "--no-such-flag"],
        ["run", "--listen=not-an-address"],
        ["run", "--leader-elect=maybe"],
    ] {
        let args = args.map(String::from);
        let (code, _, stderr) = help_of(&args);
        assert_eq!(code, Some(2), "{args:?} is a usage error: {stderr}");
    }
    let run = RunFlags::of(&["run".to_owned()]);
    assert_eq!(run.value("ledger"), "/var/lib/dra-ledger/ledger.redb");
    assert_eq!(run.value("listen"), "0.0.0.0:8080");
    assert_eq!(run.value("leader-elect"), "true");
    assert_eq!(run.given("leader-elect-lease-name"), None);
}

#[test]
fn statefulset_replicas_elect_a_leader_named_by_pod_in_its_namespace() {
    let set: StatefulSet = find("StatefulSet", "dra-ledger").parse();
    let spec = set.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2), "a leader and a standby");
    assert_eq!(
        spec.pod_management_policy.as_deref(),
        Some("Parallel"),
        "the standby does not wait for the leader to be ready"
    );
    let container = &spec.template.spec.expect("pod spec").containers[0];
    let run = RunFlags::of(&container.args.clone().expect("args"));
    assert_eq!(run.value("leader-elect"), "true");
    assert_eq!(
        run.given("leader-elect-lease-name"),
        None,
        "the lease is named after the driver"
    );
    let env: BTreeMap<String, String> = container
        .env
        .iter()
        .flatten()
        .filter_map(|e| {
            let field = e.value_from.as_ref()?.field_ref.as_ref()?;
            Some((e.name.clone(), field.field_path.clone()))
        })
        .collect();
    assert_eq!(env["POD_NAME"], "metadata.name", "the election identity");
    assert_eq!(
        env["POD_NAMESPACE"], "metadata.namespace",
        "the Lease's namespace"
    );
}

#[test]
fn leader_election_role_is_bound_in_the_controller_namespace() {
    let role: Role = find("Role", "dra-ledger-leader-election").parse();
    let binding: RoleBinding = find("RoleBinding", "dra-ledger-leader-election").parse();
    let set: StatefulSet = find("StatefulSet", "dra-ledger").parse();
    let namespace = set.metadata.namespace.clone();
    assert_eq!(role.metadata.namespace, namespace);
    assert_eq!(binding.metadata.namespace, namespace);
    assert_eq!(binding.role_ref.kind, "Role");
    assert_eq!(binding.role_ref.name, "dra-ledger-leader-election");
    let subjects = binding.subjects.unwrap_or_default();
    let account = set
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.service_account_name);
    assert!(subjects
        .iter()
        .any(|s| s.kind == "ServiceAccount" && Some(&s.name) == account.as_ref()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_role_grants_exactly_what_the_elector_requests() {
    use dra_controller::leader::{Elector, Fence, LeaderConfig, Role as LeaderRole};
    use std::time::Duration;

    let role: Role = find("Role", "dra-ledger-leader-election").parse();
    let granted = granted_in(&role);
    let cluster = dra_sim::cluster::start_cluster(dra_sim::cluster::ClusterConfig::default())
        .await
        .expect("cluster starts");
    let recorder = RecordingLayer::default();
    let mut config = kube::Config::new(cluster.url().parse().expect("cluster URL"));
    config.default_namespace = "default".into();
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&recorder)
        .build();
    let leader = LeaderConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(100),
        ..LeaderConfig::new("gpu.dra-ledger.io", "default", "dra-ledger-0")
    };
    let fence = Fence::new();
    let elector = Elector::new(client, leader, fence.clone());
    let mut role_rx = elector.role();
    let (release, released) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(elector.run(async move {
        let mut rx = released;
        let _ = rx.wait_for(|r| *r).await;
    }));
    tokio::time::timeout(
        Duration::from_secs(30),
        role_rx.wait_for(|r| matches!(r, LeaderRole::Leader { .. })),
    )
    .await
    .expect("leads in time")
    .expect("elector running");
    assert!(fence.check().is_ok());
    // A few renewals, then a release.
    tokio::time::sleep(Duration::from_millis(500)).await;
    release.send(true).unwrap();
    let last = task.await.unwrap();
    assert!(matches!(last, LeaderRole::Standby { .. }), "{last:?}");
    assert!(fence.check().is_err(), "released: closed");
    cluster.shutdown().await;

    let observed = recorder.accesses();
    let denied: Vec<_> = observed.difference(&granted).collect();
    assert!(denied.is_empty(), "not allowed:\n{}", lines(denied));
    let unused: Vec<_> = granted.difference(&observed).collect();
    assert!(unused.is_empty(), "never requested:\n{}", lines(unused));
}
