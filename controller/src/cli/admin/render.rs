//! The tables of `dra-ledger admin`, one per view, from the API's own response types
//! (`dra_api::v1::types`), so the client reads exactly what the server writes.

use dra_api::v1::types::{
    AdminAccessItem, AuditPage, CapacityItem, ClaimDetailView, ClaimItem, CordonResult, Counts,
    DeviceList, IntentList, NodeList, SharingMode, SharingView, UtilisationView,
};
use serde::de::DeserializeOwned;

use super::table::{age, list, now_ms, Table};

/// Decodes an answer as the expected view.
pub fn decode<T: DeserializeOwned>(json: serde_json::Value) -> anyhow::Result<T> {
    serde_json::from_value(json)
        .map_err(|e| anyhow::anyhow!("unexpected answer from the admin server: {e}"))
}

fn counts(c: &Counts) -> Vec<String> {
    [
        c.total,
        c.free,
        c.allocated,
        c.shared,
        c.cordoned,
        c.missing,
    ]
    .iter()
    .map(u64::to_string)
    .collect()
}

const COUNT_HEADERS: [&str; 6] = [
    "total",
    "free",
    "allocated",
    "shared",
    "cordoned",
    "missing",
];

/// `admin nodes`: the device counts, the unhealthy devices, then the admin-access claims (which
/// hold no device); where some node has partitions or shared devices, its whole-GPU
/// equivalents (`gpu-eq`, allocated/GPUs) and capacity allocated of total (`-` for the others).
pub fn nodes(view: &NodeList) -> String {
    let with_capacity = view.items.iter().any(|n| n.capacity.is_some());
    let mut headers = vec!["node"];
    headers.extend(COUNT_HEADERS);
    headers.extend(["unhealthy", "admin-access"]);
    if with_capacity {
        headers.extend(["gpu-eq", "capacity"]);
    }
    let mut table = Table::new(&headers);
    for node in &view.items {
        let mut row = vec![node.name.clone()];
        row.extend(counts(&node.devices));
        row.push(node.unhealthy.to_string());
        row.push(node.admin_access.to_string());
        if with_capacity {
            row.extend(capacity_cells(node.capacity.as_ref()));
        }
        table.row(row);
    }
    table.render()
}

/// A node's capacity as two cells: equivalents allocated of its GPUs (`1.0/2`) and each
/// capacity allocated of total (`memory=80Gi/160Gi`, comma-separated); `-` without one.
fn capacity_cells(capacity: Option<&CapacityItem>) -> [String; 2] {
    let Some(c) = capacity else {
        return ["-".to_owned(), "-".to_owned()];
    };
    let amounts: Vec<String> = c
        .capacity
        .iter()
        .map(|(name, used)| format!("{name}={}/{}", used.allocated, used.total))
        .collect();
    let amounts = if amounts.is_empty() {
        "-".to_owned()
    } else {
        amounts.join(",")
    };
    [
        format!("{:.1}/{}", c.equivalents_allocated, c.units),
        amounts,
    ]
}

fn sharing(s: &SharingView) -> String {
    match (s.mode, s.max_consumers) {
        (SharingMode::Shared, Some(n)) => format!("shared/{n}"),
        (SharingMode::Shared, None) => "shared".to_owned(),
        (SharingMode::Exclusive, _) => "exclusive".to_owned(),
    }
}

fn lower<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `admin prepared` (a node agent's claims).
pub fn prepared(view: &dra_node::admin::PreparedList) -> String {
    let mut table = Table::new(&["claim", "namespace/name", "devices", "cdi devices"]);
    for claim in &view.items {
        table.row(vec![
            claim.uid.clone(),
            format!("{}/{}", claim.namespace, claim.name),
            list(&claim.devices),
            list(&claim.cdi_devices),
        ]);
    }
    table.render()
}

/// `admin devices NODE`.
pub fn devices(view: &DeviceList) -> String {
    let mut table = Table::new(&[
        "device",
        "state",
        "health",
        "attributes",
        "consumers",
        "admin-access",
    ]);
    for device in &view.items {
        let attributes: Vec<String> = device
            .attributes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let consumers: Vec<String> = device
            .consumers
            .iter()
            .map(|c| c.claim_uid.clone())
            .collect();
        let health = match &device.health.reason {
            Some(reason) => format!("unhealthy:{reason}"),
            None => lower(&device.health.state),
        };
        table.row(vec![
            device.name.clone(),
            lower(&device.state),
            health,
            list(&attributes),
            list(&consumers),
            list(&device.admin_access),
        ]);
    }
    table.render()
}

/// `admin claims`: the allocations, then the admin-access claims apart (when there are any).
pub fn claims(items: &[ClaimItem], admin_access: &[AdminAccessItem]) -> String {
    let allocations = allocations(items);
    if admin_access.is_empty() {
        return allocations;
    }
    format!(
        "{allocations}\nAdmin access (holds no device):\n{}",
        admin_accesses(admin_access)
    )
}

fn admin_accesses(items: &[AdminAccessItem]) -> String {
    let now = now_ms();
    let mut table = Table::new(&["uid", "namespace", "name", "node", "devices", "age"]);
    for a in items {
        table.row(vec![
            a.uid.clone(),
            a.namespace.clone(),
            a.name.clone(),
            a.node.clone(),
            list(&a.devices),
            age(now, a.recorded_ms),
        ]);
    }
    table.render()
}

fn allocations(items: &[ClaimItem]) -> String {
    let now = now_ms();
    let mut table = Table::new(&[
        "uid",
        "namespace",
        "name",
        "node",
        "devices",
        "sharing",
        "state",
        "age",
    ]);
    for c in items {
        table.row(vec![
            c.uid.clone(),
            c.namespace.clone(),
            c.name.clone(),
            c.node.clone(),
            list(&c.devices),
            sharing(&c.sharing),
            lower(&c.state),
            age(now, c.created_ms),
        ]);
    }
    table.render()
}

/// `admin claim UID`: the allocation, then the intent history.
pub fn claim(view: &ClaimDetailView) -> String {
    let now = now_ms();
    let mut out = format!("Claim:      {}\n", view.uid);
    match &view.allocation {
        Some(a) => {
            let fields = [
                ("Namespace", a.namespace.clone()),
                ("Name", a.name.clone()),
                ("Node", a.node.clone()),
                ("Devices", list(&a.devices)),
                ("Sharing", sharing(&a.sharing)),
                ("State", lower(&a.state)),
                (
                    "Pod",
                    a.pod_uid.clone().unwrap_or_else(|| "<none>".to_owned()),
                ),
                ("Age", age(now, a.created_ms)),
            ];
            for (name, value) in fields {
                out = format!("{out}{:<12}{value}\n", format!("{name}:"));
            }
        }
        None => out.push_str("Allocation: <none>\n"),
    }
    if let Some(a) = &view.admin_access {
        out = format!(
            "{out}Admin access: {}/{} on {}: {} (holds no device, {})\n",
            a.namespace,
            a.name,
            a.node,
            list(&a.devices),
            age(now, a.recorded_ms)
        );
    }
    out.push_str("Intents:\n");
    let mut table = Table::new(&["id", "kind", "node", "devices", "outcome", "age"]);
    for i in &view.intents {
        table.row(vec![
            i.id.to_string(),
            lower(&i.kind),
            i.node.clone(),
            list(&i.devices),
            i.outcome
                .as_ref()
                .map_or_else(|| "<open>".to_owned(), lower),
            age(now, i.at_ms),
        ]);
    }
    for line in table.render().lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `admin intents`.
pub fn intents(view: &IntentList) -> String {
    let now = now_ms();
    let mut table = Table::new(&[
        "intent",
        "claim",
        "namespace",
        "name",
        "node",
        "devices",
        "age",
    ]);
    for i in &view.items {
        table.row(vec![
            i.intent.to_string(),
            i.claim_uid.clone(),
            i.namespace.clone(),
            i.name.clone(),
            i.node.clone(),
            list(&i.devices),
            age(now, i.created_ms),
        ]);
    }
    table.render()
}

/// `admin audit`.
pub fn audit(view: &AuditPage) -> String {
    let now = now_ms();
    let mut table = Table::new(&["seq", "age", "event", "claim", "node", "devices"]);
    for e in &view.items {
        table.row(vec![
            e.seq.to_string(),
            age(now, e.at_ms),
            e.event.clone(),
            e.claim_uid.clone().unwrap_or_else(|| "-".to_owned()),
            e.node.clone().unwrap_or_else(|| "-".to_owned()),
            list(&e.devices),
        ]);
    }
    table.render()
}

/// `admin utilisation`: totals as the first row, then one row per attribute value.
pub fn utilisation(view: &UtilisationView) -> String {
    let mut headers = vec!["attribute", "value"];
    headers.extend(COUNT_HEADERS);
    let mut table = Table::new(&headers);
    let mut row = vec!["*".to_owned(), "*".to_owned()];
    row.extend(counts(&view.totals));
    table.row(row);
    for (name, values) in &view.by_attribute {
        for (value, c) in values {
            let mut row = vec![name.clone(), value.clone()];
            row.extend(counts(c));
            table.row(row);
        }
    }
    format!(
        "Claims allocated: {}   Intents pending: {}\n{}",
        view.claims_allocated,
        view.intents_pending,
        table.render()
    )
}

/// `admin cordon` and `admin uncordon`.
pub fn cordon(result: &CordonResult) -> String {
    let verb = if result.cordoned {
        "cordoned"
    } else {
        "uncordoned"
    };
    if result.changed {
        format!("device {}/{} {verb}\n", result.node, result.device)
    } else {
        format!("device {}/{} already {verb}\n", result.node, result.device)
    }
}

fn report_rows(table: &mut Table, prefix: &str, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(fields) => {
            for (name, inner) in fields {
                let name = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                report_rows(table, &name, inner);
            }
        }
        Value::Array(items) if items.is_empty() => {
            table.row(vec![prefix.to_owned(), "<none>".to_owned()]);
        }
        Value::Array(items) => {
            for item in items {
                report_rows(table, prefix, item);
            }
        }
        Value::String(s) => table.row(vec![prefix.to_owned(), s.clone()]),
        other => table.row(vec![prefix.to_owned(), other.to_string()]),
    }
}

/// `admin reconcile`: the drift report's fields, one per line; nested ones as `drift.<kind>`.
pub fn report(json: &serde_json::Value) -> String {
    let mut table = Table::new(&["field", "value"]);
    report_rows(&mut table, "", json);
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_node::admin::{PreparedClaim, PreparedList};

    #[test]
    fn prepared_claims_are_one_row_each_with_their_devices_and_cdi_ids() {
        let answer = serde_json::json!({"items": [{
            "uid": "u-1",
            "namespace": "team-a",
            "name": "train",
            "devices": ["gpu-0", "gpu-1"],
            "cdiDevices": ["gpu.dra-ledger.io/claim=u-1"],
        }]});
        let view: PreparedList = decode(answer).unwrap();
        assert_eq!(
            view.items,
            [PreparedClaim {
                uid: "u-1".into(),
                namespace: "team-a".into(),
                name: "train".into(),
                devices: vec!["gpu-0".into(), "gpu-1".into()],
                cdi_devices: vec!["gpu.dra-ledger.io/claim=u-1".into()],
            }]
        );
        let text = prepared(&view);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[1],
            [
                "u-1",
                "team-a/train",
                "gpu-0,gpu-1",
                "gpu.dra-ledger.io/claim=u-1"
            ]
        );
    }

    #[test]
    fn admin_access_and_health_show_in_the_claim_node_and_device_tables() {
        let claims: dra_api::v1::types::ClaimList = decode(serde_json::json!({
            "items": [],
            "adminAccess": [{
                "uid": "a-1", "namespace": "ops", "name": "look", "node": "node-a",
                "devices": ["gpu-0"], "recordedMs": 0, "updatedMs": 0,
            }],
        }))
        .unwrap();
        let nodes: NodeList = decode(serde_json::json!({"items": [{
            "name": "node-a", "adminAccess": 1, "unhealthy": 1,
            "devices": {"total": 1, "free": 0, "allocated": 1, "shared": 0, "cordoned": 0, "missing": 0},
        }]}))
        .unwrap();
        let devices: DeviceList = decode(serde_json::json!({"node": "node-a", "items": [{
            "name": "gpu-0", "state": "allocated", "cordoned": false, "missing": false,
            "attributes": {}, "consumers": [{"claimUid": "c-1", "sharing": {"mode": "exclusive"}}],
            "adminAccess": ["a-1"],
            "health": {"state": "unhealthy", "reason": "XidCritical", "sinceMs": 5},
        }]}))
        .unwrap();

        let claims = self::claims(&claims.items, &claims.admin_access);
        let nodes = self::nodes(&nodes);
        let devices = self::devices(&devices);

        let lines: Vec<&str> = claims.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("Admin access"))
            .unwrap();
        let row: Vec<&str> = lines[at + 2].split_whitespace().collect();
        assert_eq!(row[..5], ["a-1", "ops", "look", "node-a", "gpu-0"]);
        let node_row: Vec<&str> = nodes.lines().nth(1).unwrap().split_whitespace().collect();
        let header = nodes.lines().next().unwrap().to_lowercase();
        assert_eq!(header.split_whitespace().last(), Some("admin-access"));
        assert_eq!(node_row[node_row.len() - 2..], ["1", "1"]);
        let device_row: Vec<&str> = devices.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(device_row[device_row.len() - 2..], ["c-1", "a-1"]);
        assert_eq!(device_row[2], "unhealthy:XidCritical");
    }

    #[test]
    fn nodes_with_partitions_or_shares_show_gpu_equivalents_and_capacity() {
        let counts = serde_json::json!({"total": 2, "free": 0, "allocated": 2, "shared": 1, "cordoned": 0, "missing": 0});
        let nodes: NodeList = decode(serde_json::json!({"items": [
            {"name": "node-a", "devices": counts, "capacity": {
                "units": 2, "equivalentsAllocated": 1.0,
                "capacity": {
                    "compute": {"allocated": "100", "total": "200"},
                    "memory": {"allocated": "80Gi", "total": "160Gi"},
                },
            }},
            {"name": "node-b", "devices": counts},
        ]}))
        .unwrap();
        let text = self::nodes(&nodes);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let header = text.lines().next().unwrap().to_lowercase();
        let header: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(header[header.len() - 2..], ["gpu-eq", "capacity"]);
        assert_eq!(
            rows[1][rows[1].len() - 2..],
            ["1.0/2", "compute=100/200,memory=80Gi/160Gi"]
        );
        assert_eq!(rows[2][rows[2].len() - 2..], ["-", "-"]);

        let whole: NodeList =
            decode(serde_json::json!({"items": [{"name": "node-b", "devices": counts}]})).unwrap();
        let whole = self::nodes(&whole);
        assert!(!whole.to_lowercase().contains("gpu-eq"), "{whole}");
    }
}
