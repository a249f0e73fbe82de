//! The socket files: their modes, a stale socket at start, and removal at a clean stop.

use std::os::unix::fs::PermissionsExt;

use futures::StreamExt;

use crate::support::{config, next_message, register_as_kubelet_130, Agent, PATIENCE};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn the_sockets_and_the_plugin_directory_are_private_to_the_agents_user() {
    let mut agent = Agent::start();
    assert_eq!(mode(agent.sockets.registration()), 0o600);
    assert_eq!(mode(agent.sockets.plugin()), 0o600);
    assert_eq!(mode(agent.sockets.plugin_dir()), 0o700);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_loose_plugin_directory_of_an_earlier_run_is_tightened() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let plugin_dir = config.plugins_dir.join(&config.driver_name);
    std::fs::create_dir_all(&plugin_dir).unwrap();
    std::fs::set_permissions(&plugin_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut agent = Agent::start_in(dir, config);
    assert_eq!(mode(agent.sockets.plugin_dir()), 0o700);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn stale_sockets_of_a_killed_run_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let sockets = dra_node::grpc::PluginSockets::new(
        &config.driver_name,
        &config.registry_dir,
        &config.plugins_dir,
    )
    .unwrap();
    std::fs::create_dir_all(sockets.plugin_dir()).unwrap();
    std::fs::create_dir_all(&config.registry_dir).unwrap();
    // a listener that is gone leaves its socket file behind, as after kill -9
    drop(std::os::unix::net::UnixListener::bind(sockets.registration()).unwrap());
    drop(std::os::unix::net::UnixListener::bind(sockets.plugin()).unwrap());
    let mut agent = Agent::start_in(dir, config);
    register_as_kubelet_130(agent.sockets.registration())
        .await
        .unwrap();
    assert!(agent.prepare(Vec::new()).await.is_empty());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_clean_stop_removes_both_sockets_even_with_the_resource_stream_open() {
    let mut agent = Agent::start();
    register_as_kubelet_130(agent.sockets.registration())
        .await
        .unwrap();
    let mut stream = agent.resource_stream().await;
    next_message(&mut stream).await;
    agent.stop().await.unwrap();
    assert!(!agent.sockets.registration().exists());
    assert!(!agent.sockets.plugin().exists());
    // the stream ends rather than the stop waiting for the kubelet to hang up
    let end = tokio::time::timeout(PATIENCE, stream.next()).await.unwrap();
    assert!(end.as_ref().is_none_or(Result::is_err), "{end:?}");
    let leftovers: Vec<_> = std::fs::read_dir(agent.dir.path().join("plugins_registry"))
        .unwrap()
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
