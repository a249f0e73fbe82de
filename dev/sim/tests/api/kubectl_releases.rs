//! Every `kubectl.1.N` installed beside the `kubectl` dispatcher (1.27 to 1.33 on these machines)
//! against every release the simulator plays: create namespace (a protobuf body from 1.32 on),
//! label, apply twice (client-side validation reads `/openapi/v2` in protobuf up to 1.28, v3
//! later), get, describe, patch, create configmap, get events, api-resources, explain (the
//! published schemas), create -f of a `kind: List` (validated by the client against the schemas)
//! and delete. One simulated server per release; the kubectl releases take turns on it.

use dra_sim::server::ServerConfig;
use dra_sim::KubernetesVersion;

use crate::api_support::kubectl::Kubectl;

fn config_map(namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: applied, namespace: {namespace}}}\ndata: {{a: \"1\"}}\n"
    )
}

fn list(namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: l1, namespace: {namespace}}}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: l2, namespace: {namespace}}}\n  data: {{k: v}}\n"
    )
}

fn assert_contains(output: &str, wanted: &str, step: &str) {
    assert!(
        output.contains(wanted),
        "{step}: {wanted:?} not in:\n{output}"
    );
}

/// Namespace, label, apply twice, get, describe, patch, create configmap and events with one
/// kubectl against a server playing `release`, in namespace `ns`.
async fn writes_and_reads(k: &Kubectl, release: KubernetesVersion, ns: &str) {
    let step = |s: &str| format!("{release}, {s}");
    assert_contains(
        &k.ok(&["create", "namespace", ns]).await,
        &format!("namespace/{ns} created"),
        &step("create namespace"),
    );
    assert_contains(
        &k.ok(&["label", "namespace", ns, "team=dra"]).await,
        "labeled",
        &step("label"),
    );
    let labels = k
        .ok(&[
            "get",
            "namespace",
            ns,
            "-o",
            "jsonpath={.metadata.labels.team}",
        ])
        .await;
    assert_eq!(labels, "dra", "{}", step("the label"));

    let manifest = k.write("cm.yaml", &config_map(ns));
    assert_contains(
        &k.ok(&["apply", "-f", &manifest]).await,
        "configmap/applied created",
        &step("first apply"),
    );
    assert_contains(
        &k.ok(&["apply", "-f", &manifest]).await,
        "configmap/applied unchanged",
        &step("second apply"),
    );
    assert_contains(
        &k.ok(&["get", "configmaps", "-n", ns]).await,
        "applied",
        &step("get"),
    );
    assert_contains(
        &k.ok(&["describe", "configmap", "applied", "-n", ns]).await,
        "Name:         applied",
        &step("describe"),
    );
    k.ok(&[
        "patch",
        "configmap",
        "applied",
        "-n",
        ns,
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ])
    .await;
    let data = k
        .ok(&[
            "get",
            "configmap",
            "applied",
            "-n",
            ns,
            "-o",
            "jsonpath={.data.a}{.data.b}",
        ])
        .await;
    assert_eq!(data, "12", "{}", step("patch"));

    assert_contains(
        &k.ok(&[
            "create",
            "configmap",
            "made",
            "-n",
            ns,
            "--from-literal=x=y",
        ])
        .await,
        "configmap/made created",
        &step("create configmap"),
    );
    let made = k
        .ok(&[
            "get",
            "configmap",
            "made",
            "-n",
            ns,
            "-o",
            "jsonpath={.data.x}",
        ])
        .await;
    assert_eq!(made, "y", "{}", step("the created configmap"));
    k.ok(&["get", "events", "-n", ns]).await;
}

/// api-resources, explain, create -f of a List and the namespace's deletion.
async fn discovery_schemas_and_lists(k: &Kubectl, release: KubernetesVersion, ns: &str) {
    let step = |s: &str| format!("{release}, {s}");
    let claims = if release.serves_v1() {
        "deviceclasses"
    } else {
        "podschedulingcontexts"
    };
    assert_contains(
        &k.ok(&["api-resources"]).await,
        claims,
        &step("api-resources"),
    );
    assert_contains(
        &k.ok(&["explain", "configmaps.data"]).await,
        "map[string]string",
        &step("explain"),
    );
    assert_contains(
        &k.ok(&["explain", "resourceclaims.spec"]).await,
        "FIELDS:",
        &step("explain a resource.k8s.io kind"),
    );

    let items = k.write("list.yaml", &list(ns));
    let created = k.ok(&["create", "-f", &items]).await;
    assert_contains(&created, "configmap/l1 created", &step("create -f List"));
    assert_contains(&created, "configmap/l2 created", &step("create -f List"));

    assert_contains(
        &k.ok(&["delete", "namespace", ns]).await,
        &format!("namespace \"{ns}\" deleted"),
        &step("delete"),
    );
}

#[tokio::test]
async fn every_installed_kubectl_works_against_every_simulated_release() {
    let releases = testkit::tools::kubectl_releases();
    if releases.is_empty() {
        testkit::tools::skip_or_fail(
            "no kubectl.1.N beside the target of the kubectl on PATH (the Google Cloud SDK's kubectl package installs them)",
        );
        return;
    }
    for release in KubernetesVersion::ALL {
        let config = ServerConfig {
            kubernetes_version: release,
            ..ServerConfig::default()
        };
        let (server, _client) = crate::api_support::start_with(config).await;
        for (minor, binary) in &releases {
            let k = Kubectl::new(&server, binary);
            let ns = format!("kubectl-1-{minor}");
            writes_and_reads(&k, release, &ns).await;
            discovery_schemas_and_lists(&k, release, &ns).await;
        }
        server.shutdown().await;
    }
}
