//! The messages (1.30 `v1alpha3`, registration, `v1beta1` and `v1`) against bytes written
//! by hand from the upstream field numbers, so that a change to our `.proto` files that a real
//! kubelet would misread fails here.

use dra_types::kubelet::k8s::io::api::resource::v1alpha2::{
    NamedResourcesAttribute, NamedResourcesAttributeValue, NamedResourcesInstance,
    NamedResourcesResources, ResourceModel,
};
use dra_types::kubelet::pluginregistration::{PluginInfo, RegistrationStatus};
use dra_types::kubelet::v1alpha3::{
    NodeListAndWatchResourcesResponse, NodePrepareResourceResponse, NodePrepareResourcesRequest,
    NodeUnprepareResourceResponse,
};
use prost::Message;

/// A length-delimited field: tag, length, bytes.
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![number << 3 | 2, u8::try_from(bytes.len()).unwrap()];
    out.extend_from_slice(bytes);
    out
}

#[test]
fn plugin_info_and_registration_status_use_the_kubelets_field_numbers() {
    let info = PluginInfo {
        r#type: "DRAPlugin".into(),
        name: "d".into(),
        endpoint: "/p".into(),
        supported_versions: vec!["1.0.0".into()],
    };
    let expected = [
        field(1, b"DRAPlugin"),
        field(2, b"d"),
        field(3, b"/p"),
        field(4, b"1.0.0"),
    ]
    .concat();
    assert_eq!(info.encode_to_vec(), expected);

    let status =
        RegistrationStatus::decode([&[0x08, 1][..], &field(2, b"no")].concat().as_slice()).unwrap();
    assert!(status.plugin_registered);
    assert_eq!(status.error, "no");
}

#[test]
fn a_kubelet_claim_with_a_structured_handle_decodes_field_by_field() {
    let v1 = field(4, b"node-a"); // StructuredResourceHandle.nodeName = 4
    let claim = [
        field(1, b"ns"),
        field(2, b"uid"),
        field(3, b"name"),
        field(4, b"{}"),
        field(5, &v1),
    ]
    .concat();
    let request = NodePrepareResourcesRequest::decode(field(1, &claim).as_slice()).unwrap();
    let claim = &request.claims[0];
    assert_eq!(
        (
            claim.namespace.as_str(),
            claim.uid.as_str(),
            claim.name.as_str(),
            claim.resource_handle.as_str()
        ),
        ("ns", "uid", "name", "{}")
    );
    assert_eq!(
        claim.structured_resource_handle[0].node_name.as_deref(),
        Some("node-a")
    );
}

#[test]
fn prepare_and_unprepare_answers_use_the_kubelets_field_numbers() {
    let prepared = NodePrepareResourceResponse {
        cdi_devices: vec!["v/c=n".into()],
        error: "e".into(),
    };
    assert_eq!(
        prepared.encode_to_vec(),
        [field(1, b"v/c=n"), field(2, b"e")].concat()
    );
    let unprepared = NodeUnprepareResourceResponse { error: "e".into() };
    assert_eq!(unprepared.encode_to_vec(), field(1, b"e"));
}

#[test]
fn a_resource_message_nests_model_instance_attribute_and_value_as_kubernetes_does() {
    let message = NodeListAndWatchResourcesResponse {
        resources: vec![ResourceModel {
            named_resources: Some(NamedResourcesResources {
                instances: vec![NamedResourcesInstance {
                    name: Some("g".into()),
                    attributes: vec![NamedResourcesAttribute {
                        name: Some("a".into()),
                        attribute_value: Some(NamedResourcesAttributeValue {
                            bool: Some(true),
                            ..Default::default()
                        }),
                    }],
                }],
            }),
        }],
    };
    let value = [0x10, 1]; // bool = 2, varint
    let attribute = [field(1, b"a"), field(2, &value)].concat();
    let instance = [field(1, b"g"), field(2, &attribute)].concat();
    let model = field(1, &field(1, &instance)); // namedResources = 1 { instances = 1 }
    assert_eq!(message.encode_to_vec(), field(1, &model));
}

#[test]
fn the_services_have_the_names_the_kubelet_calls() {
    use dra_node::grpc::{NodeService, RegistrationService};
    use dra_types::kubelet::pluginregistration::registration_server::RegistrationServer;
    use dra_types::kubelet::v1alpha3::node_server::NodeServer;
    use tonic::server::NamedService;

    type Node = NodeServer<NodeService<crate::support::FakePreparer>>;
    type Health = dra_types::kubelet::v1alpha1::dra_resource_health_server::DraResourceHealthServer<
        dra_node::grpc::HealthService,
    >;
    assert_eq!(<Node as NamedService>::NAME, "v1alpha3.Node");
    assert_eq!(
        <RegistrationServer<RegistrationService> as NamedService>::NAME,
        "pluginregistration.Registration"
    );
    assert_eq!(
        <Health as NamedService>::NAME,
        "v1alpha1.DRAResourceHealth",
        "the kubelet's health client calls /v1alpha1.DRAResourceHealth/NodeWatchResources"
    );
}

#[test]
fn device_health_uses_the_kubelets_field_numbers() {
    use dra_types::kubelet::v1alpha1::{DeviceHealth, DeviceIdentifier, HealthStatus};
    let health = DeviceHealth {
        device: Some(DeviceIdentifier {
            pool_name: "p".into(),
            device_name: "d".into(),
        }),
        health: HealthStatus::Unhealthy as i32,
        last_updated_time: 1,
        health_check_timeout_seconds: 0,
        message: "m".into(),
    };
    let identifier = [field(1, b"p"), field(2, b"d")].concat();
    // device (1, nested), health (2, varint 2), last_updated_time (3, varint 1), message (5)
    let expected = [
        field(1, &identifier),
        vec![2 << 3, 2],
        vec![3 << 3, 1],
        field(5, b"m"),
    ]
    .concat();
    assert_eq!(health.encode_to_vec(), expected);
    assert_eq!(HealthStatus::Unknown as i32, 0);
    assert_eq!(HealthStatus::Healthy as i32, 1);
}

#[test]
fn v1_devices_and_claims_use_the_kubelets_field_numbers() {
    use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};
    let device = v1::Device {
        request_names: vec!["gpu".into()],
        pool_name: "node-a".into(),
        device_name: "gpu-0".into(),
        cdi_device_ids: vec!["d/claim=u".into()],
        share_id: Some("s1".into()),
    };
    let expected = [
        field(1, b"gpu"),
        field(2, b"node-a"),
        field(3, b"gpu-0"),
        field(4, b"d/claim=u"),
        field(5, b"s1"),
    ]
    .concat();
    assert_eq!(device.encode_to_vec(), expected);
    // v1beta1 has no share_id: the same bytes without field 5 decode to the same device.
    let beta = v1beta1::Device::decode(&expected[..expected.len() - 4]).unwrap();
    assert_eq!(
        (beta.pool_name.as_str(), beta.device_name.as_str()),
        ("node-a", "gpu-0")
    );
    let answer = v1::NodePrepareResourceResponse {
        devices: vec![],
        error: "no".into(),
    };
    assert_eq!(answer.encode_to_vec(), field(2, b"no"));
    let claim = [field(1, b"ns"), field(2, b"uid"), field(3, b"name")].concat();
    let request = v1::NodePrepareResourcesRequest::decode(field(1, &claim).as_slice()).unwrap();
    let claim = &request.claims[0];
    assert_eq!(
        (
            claim.namespace.as_str(),
            claim.uid.as_str(),
            claim.name.as_str()
        ),
        ("ns", "uid", "name")
    );
}
