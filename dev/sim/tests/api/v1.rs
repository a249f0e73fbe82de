//! The server playing Kubernetes 1.34: `resource.k8s.io/v1` instead of v1alpha2 in discovery,
//! the v1 kinds' defaults, pruning, validation, status rules (drivers' device status included),
//! generation and field selectors, pods' 1.34 claim fields, and `kubectl` against it.

use std::process::Command;

use dra_sim::server::ServerConfig;
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::{DeviceClass, ResourceSlice};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use crate::api_support::{api_error, start_with};
use crate::raw_http::send;

async fn start_134() -> (dra_sim::server::SimServerHandle, kube::Client) {
    start_with(ServerConfig {
        kubernetes_version: KubernetesVersion::V1_34,
        ..ServerConfig::default()
    })
    .await
}

fn v1(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn claims(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "default",
        &v1("ResourceClaim", "resourceclaims"),
    )
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[allow(clippy::needless_pass_by_value)] // takes the `json!` value it embeds
fn slice(name: &str, node: &str, devices: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "gpu.dra-ledger.io", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    })
}

#[tokio::test]
async fn discovery_serves_resource_v1_and_no_v1alpha2() {
    let (server, _client) = start_134().await;
    let version = send(server.addr(), "GET", "/version", None).await.json();
    assert_eq!(version["minor"], "34");
    assert_eq!(version["gitVersion"], "v1.34.0");
    let group = send(server.addr(), "GET", "/apis/resource.k8s.io", None)
        .await
        .json();
    assert_eq!(
        group["versions"],
        json!([{"groupVersion": "resource.k8s.io/v1", "version": "v1"}])
    );
    let list = send(server.addr(), "GET", "/apis/resource.k8s.io/v1", None)
        .await
        .json();
    let mut names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "deviceclasses",
            "resourceclaims",
            "resourceclaims/status",
            "resourceclaimtemplates",
            "resourceslices"
        ]
    );
    let v1alpha2 = send(
        server.addr(),
        "GET",
        "/apis/resource.k8s.io/v1alpha2/resourceclaims",
        None,
    )
    .await;
    assert_eq!(v1alpha2.code, 404, "{}", v1alpha2.body);
    server.shutdown().await;
}

#[tokio::test]
async fn a_claim_is_defaulted_pruned_and_its_spec_is_immutable() {
    let (server, client) = start_134().await;
    let api = claims(&client);
    let created = api
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "gpu"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                    "deviceClassName": "gpu.dra-ledger.io",
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                    "unknownField": 1}}]}},
            })),
        )
        .await
        .unwrap();
    let exactly = &created.data["spec"]["devices"]["requests"][0]["exactly"];
    assert_eq!(exactly["allocationMode"], "ExactCount");
    assert_eq!(exactly["count"], 1);
    assert!(
        exactly.get("tolerations").is_none(),
        "an alpha field of a gate that is off: {exactly}"
    );
    assert!(exactly.get("unknownField").is_none(), "{exactly}");
    assert!(
        created.metadata.generation.is_none(),
        "claims keep no generation"
    );

    let mut changed = created.clone();
    changed.data["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!(2);
    let error = api
        .replace("gpu", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    assert_eq!(api_error(&error).0, 422);
    assert!(error.to_string().contains("spec: Invalid value"), "{error}");
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_claims_are_refused_with_the_field_at_fault() {
    let (server, client) = start_134().await;
    let api = claims(&client);
    let error = api
        .create(&PostParams::default(), &object(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "bad"},
            "spec": {"devices": {
                "requests": [{"name": "r"}],
                "config": [{"requests": ["other"], "opaque": {"driver": "gpu.dra-ledger.io", "parameters": {}}}],
            }},
        })))
        .await
        .unwrap_err();
    assert_eq!(api_error(&error).0, 422);
    let text = error.to_string();
    assert!(text.contains("spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"), "{text}");
    assert!(
        text.contains("spec.devices.config[0].requests[0]"),
        "{text}"
    );
    let wrong_type = api
        .create(&PostParams::default(), &object(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "typed"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c", "count": "two"}}]}},
        })))
        .await
        .unwrap_err();
    assert_eq!(api_error(&wrong_type).0, 400, "{wrong_type}");
    server.shutdown().await;
}

#[tokio::test]
async fn claim_status_follows_the_allocation_and_reservation_rules() {
    let (server, client) = start_134().await;
    let api = claims(&client);
    api.create(&PostParams::default(), &object(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "gpu"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
    })))
    .await
    .unwrap();
    let reserve =
        json!({"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}});
    let error = api
        .patch_status("gpu", &PatchParams::default(), &Patch::Merge(&reserve))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("`allocated` is not set"),
        "{error}"
    );

    let allocation = json!({"status": {"allocation": {"devices": {
        "results": [{"request": "r", "driver": "gpu.dra-ledger.io", "pool": "node-0", "device": "gpu-0"}],
        "config": [{"source": "FromClaim", "opaque": {"driver": "gpu.dra-ledger.io", "parameters": {"kind": "DeviceConfig"}}}],
    }, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}});
    let allocated = api
        .patch_status("gpu", &PatchParams::default(), &Patch::Merge(&allocation))
        .await
        .unwrap();
    assert_eq!(
        allocated.data["status"]["allocation"]["devices"]["results"][0]["device"],
        "gpu-0"
    );
    api.patch_status("gpu", &PatchParams::default(), &Patch::Merge(&reserve))
        .await
        .unwrap();
    let moved = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "r", "driver": "gpu.dra-ledger.io", "pool": "node-1", "device": "gpu-0"}]}}}});
    let error = api
        .patch_status("gpu", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("status.allocation"), "{error}");
    let cleared = json!({"status": {"allocation": null, "reservedFor": null}});
    let done = api
        .patch_status("gpu", &PatchParams::default(), &Patch::Merge(&cleared))
        .await
        .unwrap();
    assert!(
        done.data["status"].get("allocation").is_none(),
        "{}",
        done.data["status"]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn drivers_device_status_is_validated_guarded_by_resource_version_and_dropped_with_the_allocation(
) {
    let (server, client) = start_134().await;
    let api = claims(&client);
    api.create(&PostParams::default(), &object(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pair"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
    })))
    .await
    .unwrap();
    let allocation = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "r", "driver": "gpu.dra-ledger.io", "pool": "node-0", "device": "gpu-0"},
        {"request": "r", "driver": "nic.example.com", "pool": "node-0", "device": "eth1"}]}}}});
    let allocated = api
        .patch_status("pair", &PatchParams::default(), &Patch::Merge(&allocation))
        .await
        .unwrap();
    let entry = |driver: &str, device: &str, reason: &str| {
        json!({"driver": driver, "pool": "node-0", "device": device,
            "conditions": [{"type": "Ready", "status": "True", "reason": reason,
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "data": {"uuid": "GPU-1"}})
    };
    // a status write of the whole claim as read, guarded by its resourceVersion
    let mut claim = serde_json::to_value(&allocated).unwrap();
    claim["status"]["devices"] = json!([
        entry("nic.example.com", "eth1", "Up"),
        entry("gpu.dra-ledger.io", "gpu-0", "Prepared"),
    ]);
    let written = api
        .replace_status(
            "pair",
            &PostParams::default(),
            serde_json::to_vec(&claim).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        written.data["status"]["devices"],
        claim["status"]["devices"]
    );
    let stale = api
        .replace_status(
            "pair",
            &PostParams::default(),
            serde_json::to_vec(&claim).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&stale).0, 409, "{stale}");

    let mut bad = serde_json::to_value(&written).unwrap();
    bad["status"]["devices"][1] = entry("gpu.dra-ledger.io", "gpu-0", "not a reason");
    let invalid = api
        .replace_status(
            "pair",
            &PostParams::default(),
            serde_json::to_vec(&bad).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(&invalid).0, 422, "{invalid}");
    assert!(
        invalid
            .to_string()
            .contains("status.devices[1].conditions[0].reason"),
        "{invalid}"
    );

    // the resourceclaim controller clears the allocation knowing nothing of device status: the
    // entries of the released devices go with it
    let cleared = json!({"status": {"allocation": null}});
    let done = api
        .patch_status("pair", &PatchParams::default(), &Patch::Merge(&cleared))
        .await
        .unwrap();
    assert!(
        done.data["status"].get("devices").is_none(),
        "{}",
        done.data["status"]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn slices_keep_generation_select_by_node_and_refuse_v1_violations() {
    let (server, client) = start_134().await;
    let api: Api<ResourceSlice> = Api::all(client.clone());
    for (name, node) in [("a", "node-0"), ("b", "node-1")] {
        let devices = json!([{"name": "gpu-0", "attributes": {"model": {"string": "H100"}}, "capacity": {"memory": {"value": "80Gi"}}}]);
        let created = api
            .create(
                &PostParams::default(),
                &serde_json::from_value(slice(name, node, devices)).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(created.metadata.generation, Some(1));
    }
    let on_node_1 = api
        .list(&ListParams::default().fields("spec.nodeName=node-1"))
        .await
        .unwrap();
    let names: Vec<_> = on_node_1
        .items
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(names, ["b"]);
    let old_name = api
        .list(&ListParams::default().fields("nodeName=node-1"))
        .await
        .unwrap_err();
    assert_eq!(
        api_error(&old_name).0,
        400,
        "the v1alpha2 field name is not a v1 selector"
    );

    let mut b = api.get("b").await.unwrap();
    b.spec.pool.generation = 2;
    b.spec.devices[0].name = "gpu-1".into();
    let replaced = api.replace("b", &PostParams::default(), &b).await.unwrap();
    assert_eq!(
        replaced.metadata.generation,
        Some(2),
        "a spec change bumps the generation"
    );
    b = replaced;
    b.spec.node_name = Some("node-2".into());
    let error = api
        .replace("b", &PostParams::default(), &b)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("spec.nodeName: Invalid value"),
        "{error}"
    );

    let raw: Api<DynamicObject> =
        Api::all_with(client.clone(), &v1("ResourceSlice", "resourceslices"));
    let bad = object(slice(
        "c",
        "node-0",
        json!([{"name": "Gpu_0", "attributes": {"v": {"version": "one"}}}]),
    ));
    let error = raw.create(&PostParams::default(), &bad).await.unwrap_err();
    let text = error.to_string();
    assert!(text.contains("spec.devices[0].name"), "{text}");
    assert!(
        text.contains("spec.devices[0].attributes[v].version"),
        "{text}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn device_classes_track_generation_and_need_expressions() {
    let (server, client) = start_134().await;
    let api: Api<DeviceClass> = Api::all(client.clone());
    let class = DeviceClass::with_cel("gpu", &["device.driver == 'gpu.dra-ledger.io'"]);
    let created = api.create(&PostParams::default(), &class).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let mut changed = created.clone();
    changed.spec.selectors[0].cel.as_mut().unwrap().expression = "true".into();
    let replaced = api
        .replace("gpu", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));
    let empty = DeviceClass::with_cel("empty", &[""]);
    let error = api
        .create(&PostParams::default(), &empty)
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("spec.selectors[0].cel.expression: Required value"),
        "{error}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn pods_keep_their_1_34_claim_fields_and_must_name_pod_claims() {
    let (server, client) = start_134().await;
    let pods: Api<DynamicObject> = Api::default_namespaced_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    let pod = |name: &str, container_claim: &str| {
        object(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {
                "resourceClaims": [
                    {"name": "gpu", "resourceClaimTemplateName": "gpu-template", "source": {"resourceClaimName": "x"}},
                    {"name": "nic", "resourceClaimName": "nic-0"},
                ],
                "containers": [{"name": "c", "image": "busybox:1.36",
                    "resources": {"claims": [{"name": container_claim, "request": "r0"}]}}],
            },
        }))
    };
    let created = pods
        .create(&PostParams::default(), &pod("p", "gpu"))
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"]["resourceClaims"],
        json!([{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}, {"name": "nic", "resourceClaimName": "nic-0"}])
    );
    assert_eq!(
        created.data["spec"]["containers"][0]["resources"]["claims"],
        json!([{"name": "gpu", "request": "r0"}])
    );
    let error = pods
        .create(&PostParams::default(), &pod("q", "tpu"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&error).0, 422);
    assert!(
        error
            .to_string()
            .contains("must be one of the names in pod.spec.resourceClaims"),
        "{error}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_default_server_still_plays_1_30() {
    let (server, _client) = crate::api_support::start().await;
    let version = send(server.addr(), "GET", "/version", None).await.json();
    assert_eq!(version["minor"], "30");
    let v1 = send(
        server.addr(),
        "GET",
        "/apis/resource.k8s.io/v1/resourceslices",
        None,
    )
    .await;
    assert_eq!(v1.code, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn kubectl_applies_and_shows_v1_objects() {
    const KUBECTL: &str = "/usr/bin/kubectl";
    if !std::path::Path::new(KUBECTL).exists() {
        testkit::tools::skip_or_fail(&format!("{KUBECTL} is not installed"));
        return;
    }
    let (server, client) = start_134().await;
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let devices = json!([{"name": "gpu-0", "attributes": {"model": {"string": "H100"}}}]);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(slice("node-0-gpu", "node-0", devices)).unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let manifest = dir.path().join("class.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.dra-ledger.io\nspec:\n  selectors:\n  - cel:\n      expression: device.driver == 'gpu.dra-ledger.io'\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: one-gpu\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.dra-ledger.io\n",
    )
    .unwrap();
    let home = dir.path().to_owned();
    let kubectl = move |args: &[&str]| {
        let out = Command::new(KUBECTL)
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", &home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dir_path = manifest.display().to_string();
    let (applied, slices, claim) = tokio::task::spawn_blocking(move || {
        let applied = kubectl(&["apply", "-f", &dir_path]);
        let again = kubectl(&["apply", "-f", &dir_path]);
        assert!(again.contains("unchanged"), "{again}");
        let slices = kubectl(&["get", "resourceslices", "-o", "yaml"]);
        let claim = kubectl(&[
            "get",
            "resourceclaims.v1.resource.k8s.io",
            "one-gpu",
            "-o",
            "json",
        ]);
        (applied, slices, claim)
    })
    .await
    .unwrap();
    assert!(
        applied.contains("deviceclass.resource.k8s.io/gpu.dra-ledger.io created"),
        "{applied}"
    );
    assert!(
        slices.contains("apiVersion: resource.k8s.io/v1"),
        "{slices}"
    );
    assert!(slices.contains("nodeName: node-0"), "{slices}");
    let claim: Value = serde_json::from_str(&claim).unwrap();
    assert_eq!(
        claim["spec"]["devices"]["requests"][0]["exactly"]["count"],
        1
    );
    server.shutdown().await;
}
