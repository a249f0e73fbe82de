//! The variant for NVIDIA nodes (`deploy/components/nvidia`, applied by the
//! `kubernetes-1.36-nvidia` overlay): the 1.36 overlay with only the node `DaemonSet` changed, to
//! `--devices=nvml` (a command line `dra-ledger node` accepts), the NVIDIA runtime class and
//! the variables by which the NVIDIA container runtime provides libnvidia-ml.so.1; it validates
//! against the 1.36 and 1.37 schemas.

use serde_json::json;

use crate::deploy_support::run_flags::RunFlags;
use crate::deploy_support::{kubernetes_validate, render_overlay};

#[test]
fn the_nvidia_overlay_changes_only_the_node_agent_to_nvml_through_the_nvidia_runtime() {
    let (Some(plain), Some(nvidia)) = (
        render_overlay("kubernetes-1.36"),
        render_overlay("kubernetes-1.36-nvidia"),
    ) else {
        return;
    };
    assert_eq!(plain.documents.len(), nvidia.documents.len());
    for (before, after) in plain.documents.iter().zip(&nvidia.documents) {
        if after.kind() == "DaemonSet" && after.name() == "dra-ledger-node" {
            continue;
        }
        assert_eq!(
            after.value,
            before.value,
            "{} {}",
            after.kind(),
            after.name()
        );
    }
    let daemonset = nvidia.find("DaemonSet", "dra-ledger-node").value;
    let spec = &daemonset["spec"]["template"]["spec"];
    assert_eq!(spec["runtimeClassName"], "nvidia");
    let container = &spec["containers"][0];
    let args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
    let flags = RunFlags::of(&args);
    assert_eq!(flags.value("devices"), "nvml");
    assert_eq!(flags.value("dra-api"), "v1");
    let env = container["env"].as_array().unwrap();
    for (name, value) in [
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("NVIDIA_DRIVER_CAPABILITIES", "utility"),
    ] {
        assert!(
            env.contains(&json!({"name": name, "value": value})),
            "{name}={value} in {env:?}"
        );
    }
    let plain_daemonset = plain.find("DaemonSet", "dra-ledger-node").value;
    let mut expected = plain_daemonset.clone();
    expected["spec"]["template"]["spec"]["runtimeClassName"] = json!("nvidia");
    expected["spec"]["template"]["spec"]["containers"][0]["args"][6] = json!("--devices=nvml");
    let expected_env = expected["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array_mut()
        .unwrap();
    expected_env.push(json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}));
    expected_env.push(json!({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}));
    assert_eq!(daemonset, expected, "nothing else of the DaemonSet changes");

    for version in ["1.36.0", "1.37.0"] {
        let Some(validation) = kubernetes_validate(version, &[nvidia.file.path().to_owned()])
        else {
            return;
        };
        let report = validation.lines.join("\n");
        assert!(validation.success, "{version}:\n{report}");
    }
}
