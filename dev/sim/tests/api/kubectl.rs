//! End to end with the real `kubectl` against the simulated API server through a written
//! kubeconfig: api-resources, apply (create, then a change), get (json and table), patch (merge and
//! strategic), delete waiting for finalizer removal, wait (delete, jsonpath, condition) and
//! get --watch.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::api_support::kubectl::Kubectl;

const KUBECTL: &str = "/usr/bin/kubectl";

fn kubectl_available() -> bool {
    Path::new(KUBECTL).exists()
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: nginx:1.25
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

#[tokio::test]
async fn kubectl_drives_the_simulated_api_server() {
    if !kubectl_available() {
        testkit::tools::skip_or_fail(&format!(
            "{KUBECTL} is not installed (apt-get install kubernetes-client; .ci/run installs it)"
        ));
        return;
    }
    let (server, _client) = crate::api_support::start().await;
    let k = Kubectl::new(&server, Path::new(KUBECTL));

    let resources = k.ok(&["api-resources"]).await;
    for name in [
        "pods",
        "resourceclaims",
        "podschedulingcontexts",
        "resourceslices",
        "customresourcedefinitions",
    ] {
        assert!(
            resources.contains(name),
            "api-resources lacks {name}:\n{resources}"
        );
    }

    let typo = k.write(
        "typo.yaml",
        &POD.replace("containers:", "containerz:\n  - name: x\n  containers:"),
    );
    let rejected = k.run(&["apply", "-f", &typo]).await;
    assert!(!rejected.status.success());
    let stderr = String::from_utf8_lossy(&rejected.stderr);
    assert!(
        stderr.contains("unknown field \"spec.containerz\""),
        "{stderr}"
    );

    let pod = k.write("pod.yaml", POD);
    assert!(k
        .ok(&["apply", "-f", &pod])
        .await
        .contains("pod/web created"));
    let changed = k.write(
        "pod2.yaml",
        &POD.replace("{app: web}", "{app: web, tier: front}"),
    );
    assert!(k
        .ok(&["apply", "-f", &changed])
        .await
        .contains("pod/web configured"));
    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "pod", "web", "-o", "json"]).await).unwrap();
    assert_eq!(json["metadata"]["labels"]["tier"], "front");
    assert!(
        json["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let table = k.ok(&["get", "pods"]).await;
    assert!(
        table.starts_with("NAME") && table.contains("web") && table.contains("Pending"),
        "{table}"
    );

    patch_and_delete(&k).await;
    crd_flow(&k).await;
    watch_flow(&k).await;
    events_flow(&k).await;
    server.shutdown().await;
}

/// Merge, strategic and JSON patches, then deletion held by a finalizer and `wait --for=delete`.
async fn patch_and_delete(k: &Kubectl) {
    k.ok(&[
        "patch",
        "pod",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"metadata":{"labels":{"patched":"yes"}}}"#,
    ])
    .await;
    let labels = k
        .ok(&[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.metadata.labels.patched} {.metadata.finalizers[0]}",
        ])
        .await;
    assert_eq!(labels, "yes example.com/hold");

    k.ok(&["delete", "pod", "web", "--wait=false"]).await;
    assert!(k.ok(&["get", "pod", "web"]).await.contains("Terminating"));
    let waiter = {
        let mut cmd = k.command(&["wait", "--for=delete", "pod/web", "--timeout=20s"]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    k.ok(&[
        "patch",
        "pod",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let wait_out = waiter.await.unwrap();
    assert!(
        wait_out.status.success(),
        "{}",
        String::from_utf8_lossy(&wait_out.stderr)
    );
    assert!(k.run(&["get", "pod", "web"]).await.status.code() != Some(0));
}

/// A CRD applied and established, its custom resource applied, status-patched and waited for.
async fn crd_flow(k: &Kubectl) {
    let crd = k.write("crd.yaml", CRD);
    k.ok(&["apply", "-f", &crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=10s",
    ])
    .await;
    let widget = k.write(
        "w.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n",
    );
    k.ok(&["apply", "-f", &widget]).await;
    assert!(k
        .ok(&["api-resources", "--api-group=example.com"])
        .await
        .contains("widgets"));
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ])
    .await;
    k.ok(&[
        "wait",
        "--for=jsonpath={.status.phase}=Ready",
        "widget/w1",
        "--timeout=10s",
    ])
    .await;
    assert!(k.ok(&["get", "wd"]).await.contains("w1"));
}

/// `kubectl get --watch` sees an object created while it watches.
async fn watch_flow(k: &Kubectl) {
    let watcher = {
        let mut cmd = k.command(&[
            "get",
            "configmaps",
            "--watch",
            "-o",
            "name",
            "--request-timeout=3s",
        ]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    k.ok(&["create", "configmap", "seen", "--from-literal=a=b"])
        .await;
    let watch_out = watcher.await.unwrap();
    assert!(
        String::from_utf8_lossy(&watch_out.stdout).contains("configmap/seen"),
        "{watch_out:?}"
    );
}

const EVENT: &str = "apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: web.1}
eventTime: \"2026-01-01T00:00:00.000000Z\"
regarding: {kind: Pod, name: web, namespace: default}
note: Allocated claim
reason: Allocated
type: Normal
action: Allocate
reportingController: dra-ledger
reportingInstance: dra-ledger-0
";

/// An events.k8s.io/v1 Event is listed by `kubectl get events` (core/v1) as a table row.
async fn events_flow(k: &Kubectl) {
    let event = k.write("event.yaml", EVENT);
    k.ok(&["apply", "-f", &event]).await;
    let table = k.ok(&["get", "events"]).await;
    assert!(
        table.contains("REASON") && table.contains("Allocated") && table.contains("pod/web"),
        "{table}"
    );
}
