//! The ledger through its public API, as a program using `dra-allocator` would: open a ledger in
//! a temporary directory, publish the devices of one node, allocate a claim for two H200 GPUs
//! with 80Gi or more, confirm it, print it, release it.
//!
//! Run with `cargo run -p dra-allocator --example ledger_basics`.

use dra_allocator::ledger::{AllocateRequest, ClaimRef, Ledger};
use dra_allocator::model::{
    AttributeValue, ClaimRequest, ClassDefaults, Device, EffectiveRequest, Operator, Quantity,
    Requirement,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ledger = Ledger::open(dir.path().join("ledger.redb"), "gpu.example.com")?;

    // The devices one node publishes in its ResourceSlice.
    let devices = (0..4)
        .map(|i| {
            let model = if i < 3 { "H200" } else { "L4" };
            let memory = if i < 3 { "141Gi" } else { "24Gi" };
            Ok(Device::new(format!("gpu-{i}"))
                .with("model", AttributeValue::String(model.into()))
                .with("memory", AttributeValue::Quantity(Quantity::parse(memory)?)))
        })
        .collect::<Result<Vec<_>, dra_allocator::model::ParseError>>()?;
    let change = ledger.set_inventory("node-a", devices)?;
    println!("node-a: {} devices added", change.added.len());

    // A class of H200 GPUs, and a claim for two of them with at least 80Gi each.
    let class = ClassDefaults {
        selector: vec![Requirement::new("model", Operator::In, &["H200"])],
        ..ClassDefaults::default()
    };
    let claim = ClaimRequest {
        count: 2,
        selector: vec![Requirement::new("memory", Operator::Gt, &["80Gi"])],
        ..ClaimRequest::default()
    };
    let request = EffectiveRequest::combine(&class, &claim)?;

    let allocation = ledger.allocate(AllocateRequest {
        claim: ClaimRef::new("3f6c1a9e", "default", "training-gpus"),
        pod_uid: None,
        request,
        node: None,
    })?;
    // The allocation is durable as a pending intent; the controller confirms it once the
    // cluster shows it.
    ledger.confirm(&allocation.claim.uid)?;
    println!(
        "claim {}/{} holds {:?} on {} ({:?})",
        allocation.claim.namespace,
        allocation.claim.name,
        allocation.devices,
        allocation.node,
        allocation.sharing,
    );

    let released = ledger.release(&allocation.claim.uid)?;
    println!(
        "released {} devices; claim still allocated: {}",
        released.map_or(0, |a| a.devices.len()),
        ledger.allocation(&allocation.claim.uid)?.is_some(),
    );
    Ok(())
}
