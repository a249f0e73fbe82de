//! The `v1` releases side by side (1.34 to 1.37): what each serves in discovery, which gated
//! fields it keeps, the `v1beta1` conversion behind `--runtime-config`, `DeviceTaintRule` where
//! it is served, and the validation of the fields added since 1.34. Each test runs every release
//! it is about rather than a copy per release.

use std::net::SocketAddr;

use dra_sim::server::{ServerConfig, SimServer, SimServerHandle};
use dra_sim::{ApiOverrides, KubernetesVersion};
use serde_json::{json, Value};

use crate::raw_http::{send, Answer};

const GROUP: &str = "/apis/resource.k8s.io";

async fn start(version: KubernetesVersion, gates: &str, runtime: &str) -> SimServerHandle {
    SimServer::start(ServerConfig {
        kubernetes_version: version,
        api: ApiOverrides {
            feature_gates: gates.parse().unwrap(),
            runtime_config: runtime.parse().unwrap(),
        },
        ..ServerConfig::default()
    })
    .await
    .expect("server starts")
}

async fn post(addr: SocketAddr, path: &str, body: &Value) -> Answer {
    send(addr, "POST", path, Some(body)).await
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    names.sort_unstable();
    names
}

#[allow(clippy::needless_pass_by_value)] // takes the `json!` value it embeds
fn slice(devices: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-0",
            "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

fn rule(api_version: &str, effect: &str) -> Value {
    json!({"apiVersion": api_version, "kind": "DeviceTaintRule", "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "gpu.example.com/unhealthy", "value": "true", "effect": effect}}})
}

#[tokio::test]
async fn discovery_lists_the_versions_and_kinds_each_release_serves_by_default() {
    for version in KubernetesVersion::v1_releases() {
        let server = start(version, "", "").await;
        let addr = server.addr();
        let about = send(addr, "GET", "/version", None).await.json();
        assert_eq!(about["gitVersion"], format!("v{version}.0"));
        let group = send(addr, "GET", GROUP, None).await.json();
        assert_eq!(
            group["versions"],
            json!([{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]),
            "{version}"
        );
        let mut expected = vec![
            "deviceclasses",
            "resourceclaims",
            "resourceclaims/status",
            "resourceclaimtemplates",
            "resourceslices",
        ];
        if version == KubernetesVersion::V1_37 {
            expected.extend(["devicetaintrules", "devicetaintrules/status"]);
            expected.sort_unstable();
        }
        let list = send(addr, "GET", &format!("{GROUP}/v1"), None).await.json();
        assert_eq!(names(&list), expected, "{version}");
        for beta in ["v1beta1", "v1beta2", "v1alpha3"] {
            let answer = send(addr, "GET", &format!("{GROUP}/{beta}"), None).await;
            assert_eq!(answer.code, 404, "{version} {beta}: {}", answer.body);
        }
        server.shutdown().await;
    }
}

#[tokio::test]
async fn runtime_config_adds_beta_versions_after_v1_in_discovery() {
    let server = start(
        KubernetesVersion::V1_36,
        "",
        "resource.k8s.io/v1beta1,resource.k8s.io/v1beta2=true",
    )
    .await;
    let group = send(server.addr(), "GET", GROUP, None).await.json();
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1", "v1beta2", "v1beta1"]);
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let beta2 = send(server.addr(), "GET", &format!("{GROUP}/v1beta2"), None).await;
    assert!(names(&beta2.json()).contains(&"devicetaintrules".to_owned()));
    let beta1 = send(server.addr(), "GET", &format!("{GROUP}/v1beta1"), None).await;
    assert!(!names(&beta1.json()).contains(&"devicetaintrules".to_owned()));
    server.shutdown().await;

    let refused = SimServer::start(ServerConfig {
        kubernetes_version: KubernetesVersion::V1_37,
        api: ApiOverrides {
            feature_gates: "DRAPrioritizedList=false".parse().unwrap(),
            ..ApiOverrides::default()
        },
        ..ServerConfig::default()
    })
    .await;
    let Err(error) = refused else {
        panic!("a locked gate cannot be switched");
    };
    let error = error.to_string();
    assert!(error.contains("locked to true"), "{error}");
}

#[tokio::test]
async fn a_gated_field_is_dropped_where_its_gate_is_off_and_kept_where_on() {
    let device = json!([{"name": "gpu-0", "taints": [{"key": "gpu.example.com/xid", "effect": "NoSchedule"}]}]);
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}});
    let cases = [
        (KubernetesVersion::V1_34, "", false),
        (KubernetesVersion::V1_35, "", false),
        (
            KubernetesVersion::V1_35,
            "DRADeviceTaints=true,DRAExtendedResource=true",
            true,
        ),
        (KubernetesVersion::V1_36, "", true),
        (KubernetesVersion::V1_37, "", true),
        (
            KubernetesVersion::V1_36,
            "DRADeviceTaints=false,DRAExtendedResource=false",
            false,
        ),
    ];
    for (version, gates, kept) in cases {
        let server = start(version, gates, "").await;
        let created = post(
            server.addr(),
            &format!("{GROUP}/v1/resourceslices"),
            &slice(device.clone()),
        )
        .await;
        assert_eq!(created.code, 201, "{version} {gates}: {}", created.body);
        let taints = &created.json()["spec"]["devices"][0]["taints"];
        assert_eq!(taints.is_array(), kept, "{version} {gates}: {taints}");
        if kept {
            assert!(
                taints[0]["timeAdded"].is_string(),
                "the server stamps the time: {taints}"
            );
        }
        let created = post(server.addr(), &format!("{GROUP}/v1/deviceclasses"), &class).await;
        let name = &created.json()["spec"]["extendedResourceName"];
        assert_eq!(
            name.is_string(),
            kept,
            "{version} {gates}: {}",
            created.body
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn a_v1beta1_claim_reads_back_through_v1_and_a_v1_one_through_v1beta1() {
    let server = start(KubernetesVersion::V1_36, "", "resource.k8s.io/v1beta1").await;
    let addr = server.addr();
    let claims = |version: &str| format!("{GROUP}/{version}/namespaces/default/resourceclaims");
    let beta = json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
        "metadata": {"name": "beta"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu",
            "tolerations": [{"key": "gpu.example.com/xid", "operator": "Exists"}]}]}}});
    let created = post(addr, &claims("v1beta1"), &beta).await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(created.json()["apiVersion"], "resource.k8s.io/v1beta1");
    let as_v1 = send(addr, "GET", &format!("{}/beta", claims("v1")), None)
        .await
        .json();
    assert_eq!(as_v1["apiVersion"], "resource.k8s.io/v1");
    assert_eq!(
        as_v1["spec"]["devices"]["requests"][0],
        json!({"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
            "count": 1, "tolerations": [{"key": "gpu.example.com/xid", "operator": "Exists"}]}})
    );

    let v1 = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "ga"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}},
            {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic"}]}]}}});
    assert_eq!(post(addr, &claims("v1"), &v1).await.code, 201);
    let as_beta = send(addr, "GET", &format!("{}/ga", claims("v1beta1")), None)
        .await
        .json();
    assert_eq!(
        as_beta["spec"]["devices"]["requests"],
        json!([{"name": "gpu", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
            {"name": "nic", "firstAvailable": [
                {"name": "fast", "deviceClassName": "nic", "allocationMode": "ExactCount", "count": 1}]}])
    );
    let listed = send(addr, "GET", &claims("v1beta1"), None).await.json();
    assert!(listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["spec"]["devices"]["requests"][0].get("exactly").is_none()));

    let mut beta_slice = slice(json!([{"name": "gpu-0", "basic": {
        "attributes": {"model": {"string": "H100"}}}}]));
    beta_slice["apiVersion"] = json!("resource.k8s.io/v1beta1");
    let created = post(
        addr,
        &format!("{GROUP}/v1beta1/resourceslices"),
        &beta_slice,
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    let as_v1 = send(addr, "GET", &format!("{GROUP}/v1/resourceslices/s"), None)
        .await
        .json();
    assert_eq!(
        as_v1["spec"]["devices"][0],
        json!({"name": "gpu-0", "attributes": {"model": {"string": "H100"}}})
    );
    server.shutdown().await;
}

#[tokio::test]
async fn device_taint_rules_are_served_with_their_status_where_the_release_serves_them() {
    let releases_serving_rules = [
        (KubernetesVersion::V1_37, "", "v1"),
        (
            KubernetesVersion::V1_36,
            "resource.k8s.io/v1beta2",
            "v1beta2",
        ),
        (
            KubernetesVersion::V1_35,
            "resource.k8s.io/v1alpha3",
            "v1alpha3",
        ),
    ];
    for (version, runtime, api) in releases_serving_rules {
        let server = start(version, "", runtime).await;
        let addr = server.addr();
        let rules = format!("{GROUP}/{api}/devicetaintrules");
        let created = post(
            addr,
            &rules,
            &rule(&format!("resource.k8s.io/{api}"), "None"),
        )
        .await;
        assert_eq!(created.code, 201, "{version}: {}", created.body);
        let created = created.json();
        assert_eq!(created["metadata"]["generation"], 1);
        let added = created["spec"]["taint"]["timeAdded"].clone();
        assert!(added.is_string(), "{created}");

        let mut changed = created.clone();
        changed["spec"]["taint"]["effect"] = json!("NoExecute");
        let updated = send(addr, "PUT", &format!("{rules}/r"), Some(&changed)).await;
        assert_eq!(updated.code, 200, "{version}: {}", updated.body);
        let updated = updated.json();
        assert_eq!(updated["metadata"]["generation"], 2);
        assert_eq!(updated["spec"]["taint"]["effect"], "NoExecute");

        let mut status = updated.clone();
        status["status"] = json!({"conditions": [{"type": "EvictionInProgress", "status": "False",
            "reason": "NoPods", "message": "0 pods evicted", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let written = send(addr, "PUT", &format!("{rules}/r/status"), Some(&status)).await;
        assert_eq!(written.code, 200, "{version}: {}", written.body);
        assert_eq!(
            written.json()["status"]["conditions"][0]["reason"],
            "NoPods"
        );

        let deleted = send(addr, "DELETE", &format!("{rules}/r"), None).await;
        assert_eq!(deleted.code, 200, "{version}: {}", deleted.body);
        let gone = send(addr, "GET", &format!("{rules}/r"), None).await;
        assert_eq!(gone.code, 404);
        server.shutdown().await;
    }
    for version in [
        KubernetesVersion::V1_34,
        KubernetesVersion::V1_35,
        KubernetesVersion::V1_36,
    ] {
        let server = start(version, "", "").await;
        for api in ["v1", "v1beta2", "v1alpha3"] {
            let path = format!("{GROUP}/{api}/devicetaintrules");
            let answer = post(
                server.addr(),
                &path,
                &rule(&format!("resource.k8s.io/{api}"), "NoSchedule"),
            )
            .await;
            assert_eq!(answer.code, 404, "{version} {api}: {}", answer.body);
        }
        server.shutdown().await;
    }
}

fn messages(answer: &Answer) -> Vec<String> {
    let body = answer.json();
    body["details"]["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .map(|c| {
                    format!(
                        "{}: {}",
                        c["field"].as_str().unwrap(),
                        c["message"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_new_fields_are_validated_with_upstreams_messages() {
    let server = start(KubernetesVersion::V1_37, "", "").await;
    let addr = server.addr();
    let bad_slice = slice(
        json!([{"name": "gpu-0", "taints": [{"key": "", "effect": "Sometimes"}],
        "bindingConditions": ["Ready"]}]),
    );
    let answer = post(addr, &format!("{GROUP}/v1/resourceslices"), &bad_slice).await;
    assert_eq!(answer.code, 422, "{}", answer.body);
    let causes = messages(&answer);
    for expected in [
        "spec.devices[0].taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
        "spec.devices[0].taints[0].key: Invalid value: \"\": name part must be non-empty",
        "spec.devices[0].bindingFailureConditions: Invalid value: \"[]\": bindingFailureConditions are required to use bindingConditions",
    ] {
        assert!(causes.iter().any(|c| c == expected), "{expected} not in {causes:#?}");
    }

    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "tolerations": [{"key": "k", "operator": "Exists", "value": "v"},
                {"key": "k", "operator": "Maybe"}]}}]}}});
    let answer = post(
        addr,
        &format!("{GROUP}/v1/namespaces/default/resourceclaims"),
        &claim,
    )
    .await;
    assert_eq!(answer.code, 422, "{}", answer.body);
    let causes = messages(&answer);
    for expected in [
        "spec.devices.requests[0].exactly.tolerations[0].value: Invalid value: \"v\": must be empty for operator `Exists`",
        "spec.devices.requests[0].exactly.tolerations[1].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\"",
    ] {
        assert!(causes.iter().any(|c| c == expected), "{expected} not in {causes:#?}");
    }

    let mut bad_rule = rule("resource.k8s.io/v1", "Soon");
    bad_rule["spec"]["deviceSelector"]["device"] = json!("GPU_0");
    let answer = post(addr, &format!("{GROUP}/v1/devicetaintrules"), &bad_rule).await;
    assert_eq!(answer.code, 422, "{}", answer.body);
    let causes = messages(&answer);
    assert!(
        causes
            .iter()
            .any(|c| c.starts_with("spec.deviceSelector.device: Invalid value: \"GPU_0\"")),
        "{causes:#?}"
    );
    assert!(
        causes
            .iter()
            .any(|c| c.starts_with("spec.taint.effect: Unsupported value: \"Soon\"")),
        "{causes:#?}"
    );

    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "kubernetes.io/gpu"}});
    let answer = post(addr, &format!("{GROUP}/v1/deviceclasses"), &class).await;
    assert_eq!(
        messages(&answer),
        ["spec.extendedResourceName: Invalid value: \"kubernetes.io/gpu\": must be a valid extended resource name"]
    );
    server.shutdown().await;
}
