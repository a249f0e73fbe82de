use super::*;

fn served_versions(api: &ServedApi) -> Vec<&'static str> {
    api.resource_versions.iter().map(|v| v.version).collect()
}

#[test]
fn every_v1_release_serves_only_v1_by_default_and_1_37_serves_device_taint_rules_in_it() {
    for release in KubernetesVersion::v1_releases() {
        let api = ServedApi::defaults(release);
        assert_eq!(served_versions(&api), ["v1"], "{release}");
        let rules = api.resource_versions[0].kinds.contains(&"DeviceTaintRule");
        assert_eq!(rules, release == KubernetesVersion::V1_37, "{release}");
    }
    assert!(ServedApi::defaults(KubernetesVersion::V1_30)
        .resource_versions
        .is_empty());
}

#[test]
fn gates_follow_the_upstream_stages_of_each_release() {
    use FeatureGate as G;
    let on = |release: KubernetesVersion, gate| ServedApi::defaults(release).gates.enabled(gate);
    for release in [KubernetesVersion::V1_34, KubernetesVersion::V1_35] {
        assert!(on(release, G::DRAAdminAccess) && on(release, G::DRAPrioritizedList));
        assert!(on(release, G::DRAResourceClaimDeviceStatus));
        for gate in [
            G::DRADeviceTaints,
            G::DRAExtendedResource,
            G::DRAConsumableCapacity,
            G::ResourceHealthStatus,
            G::ResourceHealthStatusMessage,
        ] {
            assert!(!on(release, gate), "{release} {gate}");
        }
    }
    assert!(on(KubernetesVersion::V1_36, G::DRADeviceTaints));
    assert!(on(KubernetesVersion::V1_36, G::DRAPartitionableDevices));
    assert!(!on(KubernetesVersion::V1_36, G::DRADeviceTaintRules));
    assert!(on(KubernetesVersion::V1_37, G::DRADeviceTaintRules));
    for release in [KubernetesVersion::V1_36, KubernetesVersion::V1_37] {
        assert!(on(release, G::ResourceHealthStatus), "{release}");
        assert!(on(release, G::ResourceHealthStatusMessage), "{release}");
    }
}

#[test]
fn runtime_config_enables_beta_versions_and_unknown_ones_are_refused() {
    let overrides = ApiOverrides {
        runtime_config: "resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta1"
            .parse()
            .unwrap(),
        ..ApiOverrides::default()
    };
    let api = ServedApi::new(KubernetesVersion::V1_36, &overrides).unwrap();
    assert_eq!(served_versions(&api), ["v1", "v1beta2", "v1beta1"]);
    assert!(api.resource_versions[1].kinds.contains(&"DeviceTaintRule"));

    let unknown = ApiOverrides {
        runtime_config: "resource.k8s.io/v2".parse().unwrap(),
        ..ApiOverrides::default()
    };
    let error = ServedApi::new(KubernetesVersion::V1_36, &unknown).unwrap_err();
    assert!(
        error.to_string().contains("resource.k8s.io/v1beta2"),
        "{error}"
    );
    assert!(ServedApi::new(KubernetesVersion::V1_30, &overrides).is_err());
}

#[test]
fn feature_gates_switch_defaults_but_not_locked_ones() {
    let gates: FeatureGateSettings = "DRADeviceTaints=true, DRAAdminAccess=false"
        .parse()
        .unwrap();
    let overrides = ApiOverrides {
        feature_gates: gates,
        ..ApiOverrides::default()
    };
    let api = ServedApi::new(KubernetesVersion::V1_35, &overrides).unwrap();
    assert!(api.gates.enabled(FeatureGate::DRADeviceTaints));
    assert!(!api.gates.enabled(FeatureGate::DRAAdminAccess));
    let error = ServedApi::new(KubernetesVersion::V1_37, &overrides).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot set feature gate DRAAdminAccess to false, feature is locked to true"
    );
}

#[test]
fn malformed_settings_are_refused_with_the_apiserver_wording() {
    let unknown = "NoSuchGate=true"
        .parse::<FeatureGateSettings>()
        .unwrap_err();
    assert_eq!(unknown.to_string(), "unrecognized feature gate: NoSuchGate");
    let missing = "DRADeviceTaints"
        .parse::<FeatureGateSettings>()
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "missing bool value for DRADeviceTaints"
    );
    let bad = "resource.k8s.io/v1beta2=yes"
        .parse::<RuntimeConfig>()
        .unwrap_err();
    assert!(bad.to_string().contains("invalid syntax"), "{bad}");
}
