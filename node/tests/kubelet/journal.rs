//! The kubelet's calls against the real preparer (journal and CDI directory), with the bad input
//! a kubelet can pass on: garbage handles, handles of another node or another claim, devices
//! this node does not have, a device another claim holds, oversized handles, empty batches and
//! unknown claims. Each bad claim fails alone; only good claims get a CDI spec and an entry.

use std::sync::{Arc, RwLock};

use dra_node::cdi::CdiDir;
use dra_node::grpc::Plugin;
use dra_node::journal::Journal;
use dra_node::prepare::JournalPreparer;
use tokio::sync::{oneshot, watch};

use crate::support::{claim, config, connect, gpu, inventory, prepare, unprepare, DRIVER};
use dra_types::kubelet::v1alpha3::node_client::NodeClient;

const NODE: &str = "node-a";

fn handle(uid: &str, node: &str, devices: &[&str]) -> String {
    serde_json::json!({
        "node": node,
        "devices": devices,
        "sharing": {"mode": "Exclusive"},
        "claimUID": uid,
    })
    .to_string()
}

#[tokio::test]
async fn bad_claims_fail_alone_and_leave_no_spec_or_entry() {
    let dir = tempfile::tempdir().unwrap();
    let devices = inventory([gpu("gpu-0", 0), gpu("gpu-1", 1)]);
    let cdi = CdiDir::new(dir.path().join("cdi"), DRIVER);
    let journal = Journal::open(dir.path().join("journal.redb"), DRIVER).unwrap();
    let preparer = Arc::new(JournalPreparer::new(
        journal,
        cdi.clone(),
        NODE,
        Arc::new(RwLock::new(devices.clone())),
        "boot-1",
    ));
    let plugin = Plugin::bind(config(dir.path())).unwrap();
    let socket = plugin.sockets().plugin().to_owned();
    let (_inventory, inventory_rx) = watch::channel(devices);
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(plugin.serve(Arc::clone(&preparer), inventory_rx, async {
        let _ = stopped.await;
    }));
    let mut node = NodeClient::new(connect(&socket).await);

    assert!(prepare(&mut node, Vec::new()).await.is_empty());

    let oversized = handle("big", NODE, &["gpu-1"]) + &" ".repeat(16 * 1024);
    let claims = vec![
        claim("good", &handle("good", NODE, &["gpu-0"])),
        claim("garbage", "{\"node\": 7"),
        claim("elsewhere", &handle("elsewhere", "node-b", &["gpu-1"])),
        claim("borrowed", &handle("someone-else", NODE, &["gpu-1"])),
        claim("missing", &handle("missing", NODE, &["gpu-9"])),
        claim("taken", &handle("taken", NODE, &["gpu-0"])),
        claim("big", &oversized),
    ];
    let answer = prepare(&mut node, claims).await;
    assert_eq!(answer.len(), 7);
    assert_eq!(answer["good"].error, "");
    assert_eq!(answer["good"].cdi_devices, [format!("{DRIVER}/claim=good")]);
    for (uid, expected) in [
        ("garbage", "resource handle"),
        ("elsewhere", "allocated on node node-b, this is node node-a"),
        ("borrowed", "written for claim someone-else"),
        ("missing", "device gpu-9 is not on this node"),
        ("taken", "device gpu-0 is prepared for claim good"),
        ("big", "more than the 16384"),
    ] {
        let error = &answer[uid].error;
        assert!(error.contains(expected), "{uid}: {error}");
        assert!(answer[uid].cdi_devices.is_empty(), "{uid}");
    }
    assert_eq!(
        cdi.list().unwrap(),
        ["good"],
        "a spec for the good claim only"
    );
    let entries = preparer.entries().unwrap();
    assert_eq!(entries.keys().collect::<Vec<_>>(), ["good"]);

    let claims = vec![claim("never-prepared", ""), claim("good", "")];
    let unprepared = unprepare(&mut node, claims).await;
    assert_eq!(unprepared["never-prepared"].error, "");
    assert_eq!(unprepared["good"].error, "");
    assert!(cdi.list().unwrap().is_empty());
    assert!(preparer.entries().unwrap().is_empty());

    stop.send(()).unwrap();
    served.await.unwrap().unwrap();
}
