//! `dra-ledger --help`, the help of every subcommand, usage errors and `crds`.

use crate::cli_support::binary;
use serde::Deserialize;

fn run(args: &[&str]) -> std::process::Output {
    binary().args(args).output().expect("the binary runs")
}

#[test]
fn help_lists_every_subcommand() {
    let output = run(&["--help"]);
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    for command in ["run", "demo", "sim", "crds", "ledger", "explain"] {
        assert!(
            stdout
                .lines()
                .any(|line| line.trim_start().starts_with(command)),
            "{command} missing from\n{stdout}"
        );
    }
}

#[test]
fn every_subcommand_documents_its_flags_and_defaults() {
    let cases: [(&[&str], &[&str]); 10] = [
        (
            &["explain", "pod", "--help"],
            &[
                "NAMESPACE/NAME",
                "--kubeconfig",
                "--driver-name",
                "--dra-api",
                "why: ...",
            ],
        ),
        (
            &["run", "--help"],
            &[
                "--driver-name",
                "[default: gpu.dra-ledger.io]",
                "--ledger",
                "[default: /var/lib/dra-ledger/ledger.redb]",
                "--workers",
                "[default: 10]",
                "--listen",
                "[default: 0.0.0.0:8080]",
                "--admin-token-file",
                "--log-format",
                "--reconcile-interval",
                "[default: 5m]",
                "--kubeconfig",
                "--history-rollup-after",
                "[default: 7d]",
            ],
        ),
        (
            &["demo", "--help"],
            &[
                "--nodes",
                "--devices-per-node",
                "--pods",
                "--duration",
                "--ledger",
                "--listen",
                "[default: 127.0.0.1:8080]",
                "--kubeconfig-out",
                "--no-node-agents",
            ],
        ),
        (
            &["sim", "--help"],
            &[
                "--nodes",
                "--kubeconfig-out",
                "--listen",
                "--kubelet-dir",
                "--kubelet-root",
            ],
        ),
        (&["crds", "--help"], &["CustomResourceDefinitions"]),
        (&["ledger", "inspect", "--help"], &["--ledger", "--json"]),
        (&["ledger", "verify", "--help"], &["--ledger"]),
        (&["ledger", "backup", "--help"], &["--ledger", "--to"]),
        (&["ledger", "migrate", "--help"], &["--ledger"]),
        (
            &["node", "--help"],
            &["--gpu-sharing", "[default: none]", "capacity"],
        ),
    ];
    for (args, expected) in cases {
        let output = run(args);
        assert!(output.status.success(), "{args:?}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        for text in expected {
            assert!(
                stdout.contains(text),
                "{args:?}: {text} missing from\n{stdout}"
            );
        }
    }
}

#[test]
fn unknown_flags_are_usage_errors_with_exit_code_2() {
    let output = run(&["demo", "--pods", "lots"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("invalid value 'lots' for '--pods"),
        "{stderr}"
    );
}

#[test]
fn gpu_sharing_is_refused_for_a_source_other_than_nvml() {
    let output = run(&[
        "node",
        "check",
        "--devices",
        "sysfs",
        "--gpu-sharing",
        "capacity",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("--gpu-sharing capacity applies to --devices nvml only, not sysfs"),
        "{stderr}"
    );
    let output = run(&["node", "--gpu-sharing", "halves"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "an unknown mode is a usage error"
    );
}

#[test]
fn crds_prints_both_parameter_definitions() {
    let output = run(&["crds"]);
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout, dra_controller::params::crd_manifests());
    let names: Vec<String> = serde_yaml::Deserializer::from_str(&stdout)
        .map(|document| {
            let value = serde_yaml::Value::deserialize(document).unwrap();
            assert_eq!(value["kind"].as_str(), Some("CustomResourceDefinition"));
            value["metadata"]["name"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "deviceclassparameters.dra-ledger.io",
            "deviceclaimparameters.dra-ledger.io"
        ]
    );
}
