//! One truth across replicas: two `dra-ledger run` processes with leader election against
//! `dra-ledger sim`, each with a ledger of its own (as two `StatefulSet` pods have). The standby
//! answers every `/v1` request from the leader's ledger (forwarded, both replicas named in the
//! headers, `dra-ledger admin` printing them), keeps `/healthz`, `/readyz` and `/metrics` its
//! own, answers 503 naming the leader while the killed leader's lease has not expired, and after
//! the takeover a `continue` token of the old leader answers 410 instead of a page of another
//! ledger. The replaced replica comes back as the standby and forwards to the new leader.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use testkit::process::{try_http_request, HttpAnswer};

use crate::cli_support::{binary, signal, spawn_replica, wait_exit, Lines};

const CLAIMS: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(60);

/// A replica whose Lease identity is its admin address, so that `--leader-url-template
/// http://{identity}` finds the leader without DNS.
struct Replica {
    child: Child,
    logs: Lines,
    addr: String,
}

/// A loopback address nothing listens on now.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

impl Replica {
    fn start(dir: &Path, kubeconfig: &Path, name: &str) -> Replica {
        let addr = free_addr();
        let ledger = dir.join(format!("{name}.redb"));
        let mut child = spawn_replica(
            kubeconfig,
            &ledger,
            &addr,
            &addr,
            &["--leader-url-template", "http://{identity}"],
        );
        let logs = Lines::new(child.stderr.take().unwrap());
        let replica = Replica { child, logs, addr };
        replica.wait_for("the admin server", |r| r.get("/healthz").status == 200);
        replica
    }

    /// `GET path`; status 0 while nothing answers on the address.
    fn get(&self, path: &str) -> HttpAnswer {
        try_http_request(&self.addr, "GET", path).unwrap_or_else(|_| HttpAnswer {
            status: 0,
            headers: Vec::new(),
            body: String::new(),
        })
    }

    fn wait_for(&self, what: &str, mut done: impl FnMut(&Replica) -> bool) {
        testkit::eventually_blocking(
            format_args!("{} {what}", self.addr),
            TIMEOUT,
            Duration::from_millis(100),
            || done(self),
        );
    }

    fn wait_status(&self, status: &str) {
        self.wait_for(status, |r| {
            r.get("/readyz")
                .body
                .contains(&format!("\"status\":\"{status}\""))
        });
    }

    fn stop(mut self) {
        signal(&self.child, "TERM");
        let status = wait_exit(&mut self.child, Duration::from_secs(30));
        self.logs.drain();
        assert!(status.success(), "{status:?}\n{}", self.logs.text());
    }
}

/// The JSON body of `answer`, which must have `status`.
fn json(answer: &HttpAnswer, status: u16) -> serde_json::Value {
    assert_eq!(answer.status, status, "{answer:?}");
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{e}: {answer:?}"))
}

/// Creates `CLAIMS` claims of class `gpu`, allocated at once, with kubectl.
fn create_claims(kubectl: &Path, kubeconfig: &Path) {
    let claims: Vec<String> = (0..CLAIMS)
        .map(|i| {
            format!(
                r#"{{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClaim",
                "metadata":{{"name":"claim-{i}","namespace":"default"}},
                "spec":{{"resourceClassName":"gpu","allocationMode":"Immediate"}}}}"#
            )
        })
        .collect();
    // One JSON document after another, as `kubectl create -f` reads a stream.
    let list = claims.join("\n");
    let mut child = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["create", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), list.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "kubectl create: {output:?}");
}

/// The claim UIDs of one `/v1/claims` answer.
fn uids(page: &serde_json::Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["uid"].as_str().unwrap().to_owned())
        .collect()
}

/// `dra-ledger admin claims` against `addr`: exit success, stdout and stderr.
fn admin_claims(addr: &str, extra: &[&str]) -> (bool, String, String) {
    let output = binary()
        .args(["admin", "--server", &format!("http://{addr}"), "claims"])
        .args(extra)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Follows the paging of `/v1/claims?limit=1` through `replica`, checking each page's headers.
fn page_through(replica: &Replica, leader: &str, via: Option<&str>) -> Vec<String> {
    let mut all = Vec::new();
    let mut path = "/v1/claims?limit=1".to_owned();
    loop {
        let answer = replica.get(&path);
        let page = json(&answer, 200);
        assert_eq!(
            answer.header("dra-ledger-replica"),
            Some(leader),
            "{answer:?}"
        );
        assert_eq!(answer.header("dra-ledger-forwarded-by"), via, "{answer:?}");
        all.extend(uids(&page));
        match page["continue"].as_str() {
            Some(token) => path = format!("/v1/claims?limit=1&continue={token}"),
            None => return all,
        }
    }
}

#[test]
fn the_standby_answers_from_the_leader_and_a_takeover_expires_its_continue_tokens() {
    let Some(kubectl) = testkit::require_tool("kubectl", "the Kubernetes CLI") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sim = testkit::sim::start_sim(
        crate::cli_support::BINARY,
        dir.path(),
        &[
            "--nodes",
            "2",
            "--devices-per-node",
            "2",
            "--resource-class",
            "gpu",
        ],
    );
    let a = Replica::start(dir.path(), &sim.kubeconfig, "replica-a");
    a.wait_status("ready");
    let b = Replica::start(dir.path(), &sim.kubeconfig, "replica-b");
    b.wait_status("standby");

    create_claims(&kubectl, &sim.kubeconfig);
    a.wait_for("holding every claim", |r| {
        let answer = r.get("/v1/claims");
        answer.status == 200 && uids(&json(&answer, 200)).len() == CLAIMS
    });

    // Through the standby, page by page: the leader's ledger answers every page (the standby's
    // own ledger holds nothing: a standby writes nothing).
    let direct = page_through(&a, &a.addr, None);
    assert_eq!(direct.len(), CLAIMS);
    assert_eq!(page_through(&b, &a.addr, Some(&b.addr)), direct);
    let nodes = b.get("/v1/nodes");
    assert_eq!(json(&nodes, 200), json(&a.get("/v1/nodes"), 200));
    assert_eq!(nodes.header("dra-ledger-replica"), Some(a.addr.as_str()));

    // The process endpoints stay the standby's own.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let answer = b.get(path);
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        assert_eq!(answer.header("dra-ledger-replica"), Some(b.addr.as_str()));
        assert_eq!(answer.header("dra-ledger-forwarded-by"), None, "{path}");
    }
    assert!(b.get("/readyz").body.contains("\"status\":\"standby\""));
    assert!(b.get("/metrics").body.contains("dra_ledger_leader 0"));

    // `dra-ledger admin` prints the table from the leader and says who answered on stderr.
    let (ok, table, said) = admin_claims(&b.addr, &[]);
    assert!(ok, "{said}");
    assert_eq!(table.lines().count(), CLAIMS + 1, "{table}");
    for uid in &direct {
        assert!(table.contains(uid.as_str()), "{uid} missing:\n{table}");
    }
    assert_eq!(
        said.trim(),
        format!("answered by replica {} (forwarded by {})", a.addr, b.addr)
    );
    println!(
        "$ dra-ledger admin --server http://{} claims\n{table}{said}",
        b.addr
    );

    // A listing begins through the standby; then the leader is killed.
    let first = json(&b.get("/v1/claims?limit=1"), 200);
    let token = first["continue"].as_str().unwrap().to_owned();
    let mut a = a;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // Until its lease expires the standby still sees the dead leader: 503 naming it, never the
    // standby's own (empty) ledger.
    let refused = b.get("/v1/claims");
    let error = json(&refused, 503);
    assert_eq!(error["error"]["code"], "leader_unreachable", "{refused:?}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains(&a.addr), "{message}");
    assert_eq!(refused.header("dra-ledger-replica"), Some(b.addr.as_str()));

    // The standby takes over and reconciles its ledger with the cluster.
    b.wait_status("ready");
    b.wait_for("holding every claim", |r| {
        let answer = r.get("/v1/claims");
        answer.status == 200 && uids(&json(&answer, 200)).len() == CLAIMS
    });
    // The old leader's token continues no listing of the new leader's ledger.
    let gone = b.get(&format!("/v1/claims?limit=1&continue={token}"));
    let error = json(&gone, 410);
    assert_eq!(error["error"]["code"], "expired", "{gone:?}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&a.addr)
            && message.contains(&b.addr)
            && message.contains("without continue"),
        "{message}"
    );
    let (ok, _, said) = admin_claims(&b.addr, &["--limit", "1", "--continue", &token]);
    assert!(!ok);
    assert!(
        said.contains("list again without continue") && said.contains("HTTP 410"),
        "{said}"
    );
    assert_eq!(page_through(&b, &b.addr, None), direct);

    // The killed replica comes back (a new process) as the standby, forwarding to the new leader.
    let a = Replica::start(dir.path(), &sim.kubeconfig, "replica-a");
    a.wait_status("standby");
    assert_eq!(page_through(&a, &b.addr, Some(&a.addr)), direct);

    a.stop();
    b.stop();
    sim.stop();
}
