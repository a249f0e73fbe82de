//! The agent against a 1.34 API server as a 1.34 kubelet registers it: discovery chooses `v1`,
//! the kubelet picks `v1.DRAPlugin`, the 1.30 service is not served, and `/readyz` waits for
//! the registration and the node's slice. Against a 1.30 API server, or with `--dra-api
//! v1alpha2`, the agent is the 1.30 plugin.

use dra_node::grpc::versions::highest_supported_version;
use dra_sim::KubernetesVersion;
use dra_types::api_mode::DraApi;
use dra_types::kubelet::v1alpha3::node_client::NodeClient;
use dra_types::kubelet::v1alpha3::NodePrepareResourcesRequest;
use testkit::eventually::eventually;

use crate::support::{connect, register_as_kubelet_130, DRIVER, PATIENCE};
use crate::v1_support::{
    register_as_kubelet_134, write_inventory, AgentSettings, Cluster134, V1Agent, NODE,
    SLICE_PATIENCE,
};

#[tokio::test]
async fn a_134_kubelet_registers_the_agent_and_chooses_v1_draplugin() {
    let cluster = Cluster134::start().await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0"]);
    let mut agent = V1Agent::start(&cluster, dir.path(), AgentSettings::file(&inventory)).await;
    let (status, body) = agent.admin_get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["registered"], false, "{body}");

    let (info, service) = register_as_kubelet_134(agent.sockets.registration())
        .await
        .unwrap();
    assert_eq!(service, "v1.DRAPlugin");
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, agent.sockets.plugin().to_str().unwrap());
    assert_eq!(
        info.supported_versions,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1alpha1.DRAResourceHealth"
        ]
    );
    // a 1.30 kubelet finds no version it could use, and says so at registration
    assert!(highest_supported_version(&info.supported_versions).is_err());

    let ready = eventually("the agent ready with its slice", SLICE_PATIENCE, || async {
        let (status, body) = agent.admin_get("/readyz").await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(ready["slicesPublished"], true, "{ready}");
    assert_eq!(ready["registered"], true, "{ready}");
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn in_v1_mode_the_1_30_service_is_not_served() {
    let cluster = Cluster134::start().await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0"]);
    let mut agent = V1Agent::start(&cluster, dir.path(), AgentSettings::file(&inventory)).await;
    let mut v1alpha2 = NodeClient::new(connect(agent.sockets.plugin()).await);
    let status = tokio::time::timeout(
        PATIENCE,
        v1alpha2.node_prepare_resources(NodePrepareResourcesRequest::default()),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status}");
    agent.stop().await.unwrap();
    assert!(!agent.sockets.registration().exists());
    assert!(!agent.sockets.plugin().exists());
}

#[tokio::test]
async fn against_a_1_30_api_server_discovery_chooses_the_1_30_service() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_30).await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0"]);
    let mut agent = V1Agent::start(&cluster, dir.path(), AgentSettings::file(&inventory)).await;
    let info = register_as_kubelet_130(agent.sockets.registration())
        .await
        .unwrap();
    assert_eq!(info.supported_versions, ["1.0.0"]);
    let answer = NodeClient::new(connect(agent.sockets.plugin()).await)
        .node_prepare_resources(NodePrepareResourcesRequest::default())
        .await
        .unwrap();
    assert!(answer.into_inner().claims.is_empty());
    let (_, ready) = agent.admin_get("/readyz").await;
    assert!(ready.get("slicesPublished").is_none(), "{ready}");
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn an_explicit_v1alpha2_is_kept_whatever_the_api_server_serves() {
    let cluster = Cluster134::start().await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0"]);
    let mut settings = AgentSettings::file(&inventory);
    settings.dra_api = DraApi::V1alpha2;
    let mut agent = V1Agent::start(&cluster, dir.path(), settings).await;
    let info = register_as_kubelet_130(agent.sockets.registration())
        .await
        .unwrap();
    assert_eq!(info.supported_versions, ["1.0.0"]);
    assert!(
        cluster.slices_of(NODE).await.is_empty(),
        "no slice in v1alpha2 mode"
    );
    agent.stop().await.unwrap();
}
