//! `dra-ledger admin` against the admin router served on a real socket over a ledger with a few
//! allocations: tables, `-o json`, paging, the token handling and the error paths.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;

use dra_allocator::idle::{ClaimUse, IdleClaims};
use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger};
use dra_allocator::model::{AttributeValue, Device, EffectiveRequest, Policy, Sharing};
use dra_api::{AdminToken, AppState, Metrics, Readiness, Reconciler};

const TOKEN: &str = "admin-token-for-tests";

struct NoDrift;

#[async_trait::async_trait]
impl Reconciler for NoDrift {
    async fn reconcile_now(
        &self,
    ) -> Result<serde_json::Value, dra_api::reconciler::ReconcileError> {
        Ok(serde_json::json!({"released": 0, "imported": 1, "drift": {"missing_in_ledger": 1}}))
    }
}

/// The admin router over a fixture ledger on 127.0.0.1, with or without the token.
pub(crate) struct Server {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    pub(crate) ledger: Ledger,
    _runtime: tokio::runtime::Runtime,
}

fn gpu(name: &str, model: &str) -> Device {
    Device::new(name).with("model", AttributeValue::String(model.to_owned()))
}

fn allocate(ledger: &Ledger, uid: &str, namespace: &str, node: &str, count: u8) {
    let request = EffectiveRequest {
        count,
        selector: Vec::new(),
        sharing: Sharing::Exclusive,
        policy: Policy::Pack,
        same_attribute: None,
    };
    ledger
        .allocate(AllocateRequest {
            claim: ClaimRef::new(uid, namespace, format!("claim-{uid}")),
            pod_uid: None,
            request,
            node: Some(node.to_owned()),
        })
        .unwrap();
}

impl Server {
    pub(crate) fn start(with_token: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com").unwrap();
        let h100 = (0..4).map(|i| gpu(&format!("gpu-{i}"), "H100")).collect();
        ledger.set_inventory("node-a", h100).unwrap();
        ledger
            .set_inventory("node-b", vec![gpu("gpu-0", "A100"), gpu("gpu-1", "A100")])
            .unwrap();
        allocate(&ledger, "c1", "team-a", "node-a", 2);
        ledger.confirm("c1").unwrap();
        allocate(&ledger, "c2", "team-b", "node-b", 1);
        allocate(&ledger, "c3", "team-a", "node-a", 1);
        let readiness = Readiness::new();
        readiness.set_ledger_open();
        readiness.set_caches_synced();
        readiness.set_reconciled();
        // c3 is allocated without a consumer since the start.
        let idle = Arc::new(IdleClaims::default());
        idle.observe("c3", ClaimUse::Unused, ledger.now_ms());
        idle.observe("c1", ClaimUse::InUse, ledger.now_ms());
        let mut state = AppState::new(Arc::new(Metrics::new("0.0.0").unwrap()), readiness)
            .with_ledger(ledger.clone())
            .with_reconciler(Arc::new(NoDrift))
            .with_idle_claims(idle);
        if with_token {
            state = state.with_admin_token(AdminToken::new(TOKEN).unwrap());
        }
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        std::fs::write(dir.path().join("wrong-token"), "nope").unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move {
            axum::serve(listener, dra_api::router(state)).await.unwrap();
        });
        Server {
            addr,
            dir,
            ledger,
            _runtime: runtime,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `dra-ledger admin ARGS --server <this>`.
    pub(crate) fn admin(&self, args: &[&str]) -> Output {
        crate::cli_support::binary()
            .arg("admin")
            .args(args)
            .args(["--server", &format!("http://{}", self.addr)])
            .env_remove("DRA_LEDGER_TOKEN_FILE")
            .output()
            .unwrap()
    }
}

pub(crate) fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

pub(crate) fn failure(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Asserts every line starts its columns where the header does.
pub(crate) fn assert_aligned(text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines[0];
    assert_eq!(header, header.to_uppercase(), "{text}");
    let starts: Vec<usize> = header
        .match_indices("   ")
        .map(|(i, _)| i + header[i..].find(|c: char| c != ' ').unwrap())
        .collect();
    for line in &lines[1..] {
        for start in &starts {
            let before = line.as_bytes()[start - 1];
            let at = line.as_bytes()[*start];
            assert!(
                before == b' ' && at != b' ',
                "column at {start} in {line:?}\n{text}"
            );
        }
    }
}

#[test]
fn nodes_table_has_aligned_columns_and_upper_case_headers() {
    let server = Server::start(false);
    let text = stdout(&server.admin(&["nodes"]));
    assert_aligned(&text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "NODE     TOTAL   FREE   ALLOCATED   SHARED   CORDONED   MISSING   UNHEALTHY   ADMIN-ACCESS"
    );
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(cells, ["node-a", "4", "1", "3", "0", "0", "0", "0", "0"]);
    assert_eq!(lines.len(), 3);
}

#[test]
fn json_output_is_the_servers_json() {
    let server = Server::start(false);
    let text = stdout(&server.admin(&["claims", "-o", "json"]));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let uids: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids, ["c1", "c2", "c3"]);
    let utilisation: serde_json::Value =
        serde_json::from_str(&stdout(&server.admin(&["utilisation", "-o", "json"]))).unwrap();
    assert_eq!(utilisation["byAttribute"]["model"]["H100"]["allocated"], 3);
}

#[test]
fn claims_filter_and_page_with_limit() {
    let server = Server::start(false);
    let text = stdout(&server.admin(&["claims", "--namespace", "team-a"]));
    assert_aligned(&text);
    assert!(
        text.starts_with("UID   NAMESPACE   NAME       NODE     DEVICES"),
        "{text}"
    );
    let uids: Vec<&str> = text.lines().skip(1).map(|l| &l[..2]).collect();
    assert_eq!(uids, ["c1", "c3"]);

    let page = server.admin(&["claims", "--limit", "1"]);
    let text = stdout(&page);
    assert_eq!(text.lines().count(), 2, "{text}");
    let stderr = String::from_utf8_lossy(&page.stderr);
    let more = stderr
        .lines()
        .find(|l| l.starts_with("more claims: --limit 1 --continue "))
        .unwrap_or_else(|| panic!("no continue hint: {stderr}"));
    let token = more.rsplit(' ').next().unwrap();
    assert_eq!(
        stderr.lines().last(),
        Some("answered by replica dra-ledger"),
        "the replica that answered follows the answer: {stderr}"
    );
    let next = stdout(&server.admin(&["claims", "--limit", "1", "--continue", token]));
    assert!(next.lines().nth(1).unwrap().starts_with("c2 "), "{next}");
}

#[test]
fn claim_shows_allocation_and_intent_history() {
    let server = Server::start(false);
    let text = stdout(&server.admin(&["claim", "c1"]));
    assert!(text.contains("Namespace:  team-a"), "{text}");
    assert!(text.contains("State:      confirmed"), "{text}");
    let intents: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Intents:")
        .skip(2)
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(intents, ["allocate", "confirm"]);
}

#[test]
fn intents_audit_devices_and_utilisation_tables() {
    let server = Server::start(false);
    let intents = stdout(&server.admin(&["intents"]));
    assert_aligned(&intents);
    assert_eq!(intents.lines().count(), 3, "{intents}");
    let audit = stdout(&server.admin(&["audit", "--since", "6", "--limit", "2"]));
    let events: Vec<&str> = audit
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(events, ["allocated", "confirmed"]);
    let devices = stdout(&server.admin(&["devices", "node-b"]));
    assert_aligned(&devices);
    assert!(devices.contains("model=A100"), "{devices}");
    let utilisation = stdout(&server.admin(&["utilisation"]));
    assert!(utilisation.starts_with("Claims allocated: 3   Intents pending: 2\n"));
    let rows: Vec<Vec<&str>> = utilisation
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["*", "*", "6", "2", "4", "0", "0", "0"]);
    assert_eq!(rows[1], ["model", "A100", "2", "1", "1", "0", "0", "0"]);
}

#[test]
fn unknown_node_is_an_error_with_the_servers_message() {
    let server = Server::start(false);
    let stderr = failure(&server.admin(&["devices", "node-z"]));
    assert!(
        stderr.contains(
            "node node-z has no devices in the ledger (HTTP 404, answered by replica dra-ledger)"
        ),
        "{stderr}"
    );
}

#[test]
fn mutating_commands_need_the_servers_token() {
    let server = Server::start(true);
    let token = server.path("token");
    let wrong = server.path("wrong-token");
    let missing = failure(&server.admin(&["cordon", "node-a", "gpu-3"]));
    assert!(missing.contains("missing bearer token"), "{missing}");
    assert!(missing.contains("--token-file"), "{missing}");
    let bad = failure(&server.admin(&[
        "cordon",
        "node-a",
        "gpu-3",
        "--token-file",
        wrong.to_str().unwrap(),
    ]));
    assert!(bad.contains("invalid bearer token (pass"), "{bad}");
    assert!(!bad.contains(TOKEN));

    let token = token.to_str().unwrap();
    let done = stdout(&server.admin(&["cordon", "node-a", "gpu-3", "--token-file", token]));
    assert_eq!(done, "device node-a/gpu-3 cordoned\n");
    let again = stdout(&server.admin(&["cordon", "node-a", "gpu-3", "--token-file", token]));
    assert_eq!(again, "device node-a/gpu-3 already cordoned\n");
    assert_eq!(server.ledger.nodes().unwrap()[0].counts.cordoned, 1);
    let back = stdout(&server.admin(&["uncordon", "node-a", "gpu-3", "--token-file", token]));
    assert_eq!(back, "device node-a/gpu-3 uncordoned\n");

    let report = stdout(&server.admin(&["reconcile", "--token-file", token]));
    assert_aligned(&report);
    assert!(report.contains("drift.missing_in_ledger   1"), "{report}");
}

#[test]
fn without_a_server_token_mutating_commands_are_refused() {
    let server = Server::start(false);
    let token = server.path("token");
    let stderr = failure(&server.admin(&["reconcile", "--token-file", token.to_str().unwrap()]));
    assert!(stderr.contains("admin token not configured"), "{stderr}");
    assert!(
        stderr.contains("(HTTP 403, answered by replica dra-ledger)"),
        "{stderr}"
    );
}

#[test]
fn backup_downloads_a_ledger_that_opens() {
    let server = Server::start(true);
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("copy.redb");
    let token = server.path("token");
    let args = [
        "backup",
        "--to",
        to.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ];
    let text = stdout(&server.admin(&args));
    assert!(text.starts_with("wrote "), "{text}");
    let copy = Ledger::open(&to, "gpu.example.com").unwrap();
    assert_eq!(copy.nodes().unwrap(), server.ledger.nodes().unwrap());
    drop(copy);
    let exists = failure(&server.admin(&args));
    assert!(exists.contains("already exists"), "{exists}");
}

#[test]
fn unreachable_server_is_a_clear_error() {
    let output = crate::cli_support::binary()
        .args(["admin", "nodes", "--server", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    let stderr = failure(&output);
    assert!(
        stderr.contains("cannot reach the admin server at http://127.0.0.1:9"),
        "{stderr}"
    );
}

#[test]
fn run_serves_the_admin_api_with_its_token_and_the_drivers_reconcile() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let mut sim = crate::cli_support::start_sim(dir.path());
    let kubeconfig = sim.kubeconfig.clone();
    let mut run = crate::cli_support::run_with_token(&kubeconfig, dir.path(), &token)
        .spawn()
        .unwrap();
    let mut logs = crate::cli_support::Lines::new(run.stderr.take().unwrap());
    let addr = crate::cli_support::controller_addr(&mut logs);
    crate::cli_support::wait_leading(&addr, Duration::from_secs(60));
    let server = format!("http://{addr}");
    let admin = |args: &[&str]| {
        crate::cli_support::binary()
            .arg("admin")
            .args(args)
            .args(["--server", &server, "--token-file", token.to_str().unwrap()])
            .output()
            .unwrap()
    };

    let nodes = stdout(&admin(&["nodes"]));
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    let node = nodes
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let devices = stdout(&admin(&["devices", &node]));
    let device = devices
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let cordoned = stdout(&admin(&["cordon", &node, &device]));
    assert_eq!(cordoned, format!("device {node}/{device} cordoned\n"));
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&admin(&["reconcile", "-o", "json"]))).unwrap();
    assert_eq!(report["claims_checked"], 0, "{report}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    let copy = dir.path().join("copy.redb");
    stdout(&admin(&["backup", "--to", copy.to_str().unwrap()]));
    let ledger = Ledger::open(&copy, "gpu.dra-ledger.io").unwrap();
    assert_eq!(ledger.utilisation().unwrap().totals.cordoned, 1);
    drop(ledger);

    crate::cli_support::terminate(&run);
    assert!(crate::cli_support::wait_exit(&mut run, Duration::from_secs(30)).success());
    logs.drain();
    assert!(
        !logs.seen.iter().any(|line| line.contains(TOKEN)),
        "the token appears in the log"
    );
    crate::cli_support::terminate(&sim.child);
    assert!(crate::cli_support::wait_exit(&mut sim.child, Duration::from_secs(30)).success());
}
