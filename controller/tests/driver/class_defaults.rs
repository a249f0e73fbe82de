//! Class-level defaults for claims (`DeviceClassParameters.spec.{count, sameAttribute,
//! shareable}`): a claim's own parameters override them, a claim without parameters gets them,
//! and an invalid default is refused with the field named.

use dra_allocator::model::Sharing;
use dra_controller::params::{
    claim_request_with, class_parameters, default_claim_request, ClaimDefaults,
    DeviceClaimParametersSpec, DeviceClassParametersSpec, SharingSpec,
};

fn class(
    count: Option<i64>,
    same: Option<&str>,
    shareable: Option<bool>,
) -> DeviceClassParametersSpec {
    DeviceClassParametersSpec {
        count,
        same_attribute: same.map(str::to_owned),
        shareable,
        ..DeviceClassParametersSpec::default()
    }
}

#[test]
fn a_claim_without_parameters_gets_the_class_defaults() {
    let params = class_parameters(&DeviceClassParametersSpec {
        sharing: Some(SharingSpec {
            mode: Some("Shared".into()),
            max_consumers: Some(2),
        }),
        ..class(Some(2), Some("numa"), Some(true))
    })
    .unwrap();
    assert_eq!(
        params.defaults.sharing,
        Some(Sharing::Shared { max_consumers: 2 })
    );
    let (request, shareable) = default_claim_request(&params.claims);
    assert!(shareable);
    assert_eq!(request.count, 2);
    assert_eq!(request.same_attribute.as_deref(), Some("numa"));
    assert_eq!(
        request.sharing, None,
        "sharing comes from the class when combined"
    );

    let (plain, shareable) = default_claim_request(&ClaimDefaults::default());
    assert!(!shareable);
    assert_eq!(plain.count, 1);
}

#[test]
fn a_claims_own_parameters_override_the_class_defaults() {
    let defaults = class_parameters(&class(Some(4), Some("numa"), Some(true)))
        .unwrap()
        .claims;
    let own = DeviceClaimParametersSpec {
        count: Some(1),
        same_attribute: Some("pcieRoot".into()),
        shareable: Some(false),
        ..DeviceClaimParametersSpec::default()
    };
    let (request, shareable) = claim_request_with(&own, &defaults).unwrap();
    assert_eq!(
        (request.count, request.same_attribute.as_deref(), shareable),
        (1, Some("pcieRoot"), false)
    );
    let silent = DeviceClaimParametersSpec::default();
    let (request, shareable) = claim_request_with(&silent, &defaults).unwrap();
    assert_eq!(
        (request.count, request.same_attribute.as_deref(), shareable),
        (4, Some("numa"), true)
    );
}

#[test]
fn invalid_class_defaults_name_the_field() {
    for (spec, field) in [
        (class(Some(0), None, None), "spec.count"),
        (class(Some(17), None, None), "spec.count"),
        (class(None, Some(" "), None), "spec.sameAttribute"),
    ] {
        let error = class_parameters(&spec).expect_err(field);
        assert_eq!(error.0.field, field, "{spec:?}");
    }
}

#[test]
fn class_defaults_round_trip_in_camel_case() {
    let yaml = "count: 2\nsameAttribute: numa\nshareable: true\n";
    let spec: DeviceClassParametersSpec = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(spec, class(Some(2), Some("numa"), Some(true)));
    assert_eq!(serde_yaml::to_string(&spec).unwrap(), yaml);
}
