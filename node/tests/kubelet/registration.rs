//! Registration: what `GetInfo` answers, and what happens after the kubelet's verdict.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use dra_node::grpc::versions::highest_supported_version;
use dra_node::grpc::RegistrationState;
use dra_types::kubelet::pluginregistration::RegistrationStatus;
use testkit::eventually::eventually;

use crate::support::{register_as_kubelet_130, Agent, DRIVER, PATIENCE};

/// What tells one socket file from the next at the same path: inode and change time.
fn created(path: &Path) -> (u64, i64, i64) {
    let metadata = std::fs::metadata(path).unwrap();
    (metadata.ino(), metadata.ctime(), metadata.ctime_nsec())
}

#[tokio::test]
async fn a_130_kubelet_registers_the_plugin_with_its_driver_name_and_plugin_socket() {
    let mut agent = Agent::start();
    assert_eq!(*agent.registration.borrow(), RegistrationState::Waiting);
    let info = register_as_kubelet_130(agent.sockets.registration())
        .await
        .unwrap();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, agent.sockets.plugin().to_str().unwrap());
    assert_eq!(info.supported_versions, ["1.0.0"]);
    assert_eq!(
        highest_supported_version(&info.supported_versions)
            .unwrap()
            .to_string(),
        "1.0.0"
    );
    assert!(agent.registration.borrow().is_registered());
    agent.stop().await.unwrap();
}

#[test]
fn a_130_kubelet_would_refuse_a_plugin_advertising_only_service_names() {
    assert!(highest_supported_version(&["v1.DRAPlugin"]).is_err());
    assert!(highest_supported_version(&["v1.DRAPlugin", "v1beta1.DRAPlugin"]).is_err());
    assert!(highest_supported_version(&["v1.DRAPlugin", "1.0.0"]).is_ok());
}

#[tokio::test]
async fn a_refused_registration_is_kept_with_the_kubelets_reason_and_offered_again_on_a_new_socket()
{
    let mut agent = Agent::start();
    let registration = agent.sockets.registration().to_owned();
    let first = created(&registration);
    let mut client = agent.registration_client().await;
    let refusal = RegistrationStatus {
        plugin_registered: false,
        error: "another plugin with the same name is already registered".into(),
    };
    client.notify_registration_status(refusal).await.unwrap();
    assert_eq!(
        *agent.registration.borrow(),
        RegistrationState::Refused(
            "another plugin with the same name is already registered".into()
        )
    );

    // the plugin watcher sees a socket it has not seen before and registers again
    eventually("the registration socket created again", PATIENCE, || {
        let state = agent.registration.borrow().clone();
        async move { state == RegistrationState::Waiting }
    })
    .await;
    // a new file (an inode number can be reused, its change time moves on)
    assert_ne!(created(&registration), first);
    register_as_kubelet_130(&registration).await.unwrap();
    assert!(agent.registration.borrow().is_registered());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_registration_after_a_refusal_keeps_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::config(dir.path());
    config.retry_initial = std::time::Duration::from_millis(300);
    let mut agent = Agent::start_in(dir, config);
    let registration = agent.sockets.registration().to_owned();
    let first = created(&registration);
    let mut client = agent.registration_client().await;
    let refusal = RegistrationStatus {
        plugin_registered: false,
        error: "busy".into(),
    };
    client.notify_registration_status(refusal).await.unwrap();
    // the kubelet's own retry succeeds before the backoff ends
    register_as_kubelet_130(&registration).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(created(&registration), first);
    assert!(agent.registration.borrow().is_registered());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_plugin_serving_both_apis_is_read_right_by_a_130_and_a_134_kubelet() {
    use std::sync::Arc;

    use dra_node::grpc::{DraService, Plugin, PluginServices};
    use dra_node::v1::claims::{ClaimSource, MemoryClaims};
    use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::v1;
    use dra_types::kubelet::v1alpha3::node_client::NodeClient;

    use crate::support::{config, connect, gpu, inventory, FakePreparer};
    use crate::v1_support::register_as_kubelet_134;

    let dir = tempfile::tempdir().unwrap();
    let plugin = Plugin::bind(config(dir.path())).unwrap();
    let sockets = plugin.sockets().clone();
    let preparer = Arc::new(FakePreparer::default());
    let (_inventory, inventory_rx) = tokio::sync::watch::channel(inventory([gpu("gpu-0", 0)]));
    let claims: Arc<dyn ClaimSource> = Arc::new(MemoryClaims::default());
    let v1 = DraService::new(Arc::clone(&preparer), claims, DRIVER, "node-0");
    let services = PluginServices::v1alpha2(Arc::clone(&preparer), inventory_rx).with_v1(v1);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(plugin.serve_services(services, async {
        let _ = stopped.await;
    }));

    let old = register_as_kubelet_130(sockets.registration())
        .await
        .unwrap();
    assert_eq!(
        old.supported_versions,
        ["1.0.0", "v1.DRAPlugin", "v1beta1.DRAPlugin"]
    );
    let (_, service) = register_as_kubelet_134(sockets.registration())
        .await
        .unwrap();
    assert_eq!(service, "v1.DRAPlugin");
    // both services answer on the one plugin socket
    let v1alpha2 = NodeClient::new(connect(sockets.plugin()).await)
        .node_unprepare_resources(
            dra_types::kubelet::v1alpha3::NodeUnprepareResourcesRequest {
                claims: vec![crate::support::claim("u1", "")],
            },
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v1alpha2.claims["u1"].error, "");
    let v1 = v1::dra_plugin_client::DraPluginClient::new(connect(sockets.plugin()).await)
        .node_prepare_resources(v1::NodePrepareResourcesRequest {
            claims: vec![v1::Claim {
                namespace: "default".into(),
                uid: "u2".into(),
                name: "absent".into(),
            }],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(v1.claims["u2"].error.contains("not found"), "{v1:?}");
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
