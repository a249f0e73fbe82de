//! The checks of a chaos run: exclusivity and sharing limits over a set of allocated claims (used
//! by the watcher after every event), `dra-ledger ledger verify`, the cluster's allocations
//! against a ledger file while no controller runs, and the ledger's contents and audit counts.
//!
//! Problems are returned as text naming the claims involved; the tests assert there are none.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use dra_allocator::ledger::{AllocationQuery, AuditEvent, Ledger};
use dra_controller::driver::handle::{
    claim_allocation, ClaimAllocationState, HandleData, HandleSharing,
};
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use super::{retry, DRIVER};

/// A claim the cluster shows allocated by our driver.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterClaim {
    /// Namespace and name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// The parsed handle data.
    pub data: HandleData,
}

/// The claim as a [`ClusterClaim`] when it shows our allocation; `Err` when the handle data
/// does not parse.
pub fn allocated(claim: &ResourceClaim) -> Result<Option<ClusterClaim>, String> {
    match claim_allocation(claim, DRIVER) {
        Ok(ClaimAllocationState::Ours(data)) => Ok(Some(ClusterClaim {
            name: format!(
                "{}/{}",
                claim.namespace().unwrap_or_default(),
                claim.name_any()
            ),
            uid: claim.uid().unwrap_or_default(),
            data,
        })),
        Ok(_) => Ok(None),
        Err(error) => Err(format!(
            "claim {}: bad handle data: {error}",
            claim.name_any()
        )),
    }
}

/// Devices named by more than one claim where one of them holds it exclusively, and shared
/// devices with more claims than the smallest `maxConsumers` among them.
pub fn device_problems<'a>(claims: impl IntoIterator<Item = &'a ClusterClaim>) -> Vec<String> {
    let mut holders: BTreeMap<(&str, &str), Vec<&ClusterClaim>> = BTreeMap::new();
    for claim in claims {
        for device in &claim.data.devices {
            holders
                .entry((claim.data.node.as_str(), device.as_str()))
                .or_default()
                .push(claim);
        }
    }
    let mut problems = Vec::new();
    for ((node, device), users) in holders {
        if users.len() < 2 {
            continue;
        }
        let names: Vec<&str> = users.iter().map(|c| c.name.as_str()).collect();
        let limit = users
            .iter()
            .map(|c| match c.data.sharing {
                HandleSharing::Exclusive => 1,
                HandleSharing::Shared { max_consumers } => max_consumers as usize,
            })
            .min()
            .unwrap_or(1);
        if users.len() > limit {
            problems.push(format!(
                "{node}/{device} named by {} claims, at most {limit}: {names:?}",
                users.len()
            ));
        }
    }
    problems
}

/// The claims the cluster shows allocated by our driver (listed with retries).
pub async fn cluster_claims(client: &Client) -> Vec<ClusterClaim> {
    let api = Api::<ResourceClaim>::all(client.clone());
    let all = ListParams::default();
    let list = retry(60, || api.list(&all)).await.expect("claims listed");
    list.items
        .iter()
        .filter_map(|c| allocated(c).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Runs `dra-ledger ledger verify --ledger PATH`; its stdout on exit 0, else its output.
pub fn verify_ledger(path: &Path) -> Result<String, String> {
    let output = Command::new(env!("CARGO_BIN_EXE_dra-ledger"))
        .args(["ledger", "verify", "--ledger"])
        .arg(path)
        .env_remove(dra_allocator::failpoint::ENV)
        .output()
        .expect("dra-ledger ledger verify runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "ledger verify {}: exit {:?}\n{stdout}{}",
            path.display(),
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// What a ledger file holds (read while no controller has it open).
#[derive(Clone, Debug, Default)]
pub struct LedgerContents {
    /// Allocations by claim UID: node and devices.
    pub allocations: BTreeMap<String, (String, Vec<String>)>,
    /// Claim UIDs with a pending intent.
    pub pending: Vec<String>,
    /// Nodes the ledger knows devices of.
    pub nodes: usize,
    /// Audit counts by event kind (`allocated`, `confirmed`, `released`, `aborted`, `imported`).
    pub audit: BTreeMap<&'static str, u64>,
}

fn audit_kind(event: &AuditEvent) -> &'static str {
    match event {
        AuditEvent::Allocated { .. } => "allocated",
        AuditEvent::Imported { .. } => "imported",
        AuditEvent::Confirmed { .. } => "confirmed",
        AuditEvent::Released { .. } => "released",
        AuditEvent::Aborted { .. } => "aborted",
        _ => "other",
    }
}

/// Opens the ledger at `path` (no controller may hold it), reads its allocations, pending
/// intents and audit counts, and closes it.
pub fn ledger_contents(path: &Path) -> LedgerContents {
    let ledger = Ledger::open(path, DRIVER).expect("ledger opens");
    let mut contents = LedgerContents::default();
    let mut query = AllocationQuery {
        limit: 500,
        ..AllocationQuery::default()
    };
    loop {
        let page = ledger.allocations(&query).expect("ledger allocations");
        for a in page.items {
            contents
                .allocations
                .insert(a.claim.uid, (a.node, a.devices));
        }
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    contents.nodes = ledger.nodes().expect("ledger nodes").len();
    contents.pending = ledger
        .pending_intents()
        .expect("pending intents")
        .into_iter()
        .map(|p| p.claim.uid)
        .collect();
    let mut after = 0;
    loop {
        let entries = ledger.audit_since(after, 1000).expect("audit log");
        let Some(last) = entries.last() else { break };
        after = last.seq;
        for entry in &entries {
            *contents.audit.entry(audit_kind(&entry.event)).or_default() += 1;
        }
    }
    drop(ledger);
    contents
}

/// Every claim in `claims` that `contents` does not hold with exactly its node and devices.
pub fn missing_in_ledger(claims: &[ClusterClaim], contents: &LedgerContents) -> Vec<String> {
    claims
        .iter()
        .filter_map(|claim| match contents.allocations.get(&claim.uid) {
            Some((node, devices)) if *node == claim.data.node && *devices == claim.data.devices => {
                None
            }
            Some(held) => Some(format!(
                "claim {} shows {}:{:?}, the ledger holds {held:?}",
                claim.name, claim.data.node, claim.data.devices
            )),
            None => Some(format!(
                "claim {} shows {}:{:?}, the ledger holds nothing for it",
                claim.name, claim.data.node, claim.data.devices
            )),
        })
        .collect()
}

/// The checks while no controller runs (so the cluster's allocations are frozen): every ledger
/// verifies, and every allocated claim is held with the same devices by the ledger at `ledger`
/// (the one whose controller wrote it). Returns the problems and the ledger's contents.
pub async fn at_kill(client: &Client, ledger: &Path) -> (Vec<String>, LedgerContents) {
    let mut problems = Vec::new();
    if let Err(error) = verify_ledger(ledger) {
        problems.push(error);
    }
    let claims = cluster_claims(client).await;
    problems.extend(device_problems(&claims));
    let path = ledger.to_owned();
    let contents = tokio::task::spawn_blocking(move || ledger_contents(&path))
        .await
        .expect("ledger read task");
    problems.extend(missing_in_ledger(&claims, &contents));
    (problems, contents)
}
