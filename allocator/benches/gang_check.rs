//! The gang check at scheduling scale: 4 pending claims of one pod against 128 candidate nodes,
//! over an inventory of 5,000 nodes with 8 devices each (about half of them in use; attributes as
//! a GPU driver publishes them, including a unique `uuid`). Prints p50/p99/max of single checks
//! timed with `Instant` (random candidate sets, then one set with the data in cache), then runs
//! criterion's measurement of the same check.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use dra_allocator::fit::{
    unsuitable_nodes, Consumers, DeviceView, Inventory, NamedRequest, NodeView, Reservations,
    SharedConsumer,
};
use dra_allocator::model::{
    AttributeValue, Device, EffectiveRequest, Operator, Policy, Quantity, Requirement, Sharing,
    Version,
};

const NODES: usize = 5_000;
const DEVICES: usize = 8;
const CANDIDATES: usize = 128;
const TIMED_CHECKS: usize = 5_000;

/// A small deterministic generator (xorshift64*), so every run sees the same cluster.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn inventory(rng: &mut Rng) -> Inventory {
    let models = ["H200", "H100", "A100"];
    let memory = ["141Gi", "80Gi", "40Gi"];
    let drivers = ["550.54.15", "535.161.8", "560.28.3"];
    let nodes = (0..NODES).map(|n| {
        let kind = n % models.len();
        let devices = (0..DEVICES as u8)
            .map(|d| {
                let device = Device::new(format!("gpu-{d}"))
                    .with("model", AttributeValue::String(models[kind].into()))
                    .with(
                        "memory",
                        AttributeValue::Quantity(
                            Quantity::parse(memory[kind]).expect("a quantity"),
                        ),
                    )
                    .with(
                        "driverVersion",
                        AttributeValue::Version(Version::parse(drivers[n % 3]).expect("a version")),
                    )
                    .with("numa", AttributeValue::Int(i64::from(d / 4)))
                    .with("index", AttributeValue::Int(i64::from(d)))
                    .with(
                        "uuid",
                        AttributeValue::String(format!("GPU-{n:05}-{d}-{:08x}", rng.next())),
                    );
                let consumers = match rng.below(10) {
                    0..=3 => Consumers::Exclusive {
                        claim_uid: format!("c-{n}-{d}"),
                    },
                    4 => Consumers::Shared(vec![SharedConsumer {
                        claim_uid: format!("s-{n}-{d}"),
                        max_consumers: 4,
                    }]),
                    _ => Consumers::None,
                };
                DeviceView {
                    device,
                    cordoned: rng.below(100) == 0,
                    missing: false,
                    consumers,
                }
            })
            .collect();
        NodeView::new(format!("node-{n:05}"), devices)
    });
    Inventory::from_nodes(nodes).expect("distinct device names")
}

fn requests() -> Vec<EffectiveRequest> {
    let request = |count, selector, sharing, same: Option<&str>| EffectiveRequest {
        count,
        selector,
        sharing,
        policy: Policy::Pack,
        same_attribute: same.map(str::to_owned),
    };
    vec![
        request(
            2,
            vec![Requirement::new("model", Operator::In, &["H200", "H100"])],
            Sharing::Exclusive,
            Some("numa"),
        ),
        request(
            1,
            vec![Requirement::new("memory", Operator::Gt, &["40Gi"])],
            Sharing::Exclusive,
            None,
        ),
        request(
            1,
            vec![Requirement::new("model", Operator::In, &["H100", "H200"])],
            Sharing::Shared { max_consumers: 4 },
            None,
        ),
        request(
            1,
            vec![Requirement::new(
                "driverVersion",
                Operator::Gt,
                &["540.0.0"],
            )],
            Sharing::Exclusive,
            None,
        ),
    ]
}

fn candidates(rng: &mut Rng) -> Vec<String> {
    (0..CANDIDATES)
        .map(|_| format!("node-{:05}", rng.below(NODES)))
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// Times `TIMED_CHECKS` gang checks cycling through `sets`; returns the sorted durations and
/// the mean number of unsuitable nodes per check.
fn time_checks(
    claims: &[NamedRequest<'_>],
    inventory: &Inventory,
    sets: &[Vec<String>],
    reservations: &Reservations,
) -> (Vec<Duration>, f64) {
    let mut samples = Vec::with_capacity(TIMED_CHECKS);
    let mut unsuitable = 0usize;
    for i in 0..TIMED_CHECKS {
        let set = &sets[i % sets.len()];
        let start = Instant::now();
        let result = unsuitable_nodes(inventory, claims, set, reservations);
        samples.push(start.elapsed());
        unsuitable += black_box(result).len();
    }
    samples.sort();
    (samples, unsuitable as f64 / TIMED_CHECKS as f64)
}

fn report(what: &str, (samples, unsuitable): &(Vec<Duration>, f64)) {
    println!(
        "gang check, 4 claims x {CANDIDATES} candidates over {NODES} nodes x {DEVICES} devices, \
         {what}: p50 {:?}, p99 {:?}, max {:?} ({TIMED_CHECKS} checks, {unsuitable:.1} unsuitable \
         nodes per check)",
        percentile(samples, 0.50),
        percentile(samples, 0.99),
        samples[samples.len() - 1],
    );
}

fn main() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let inventory = inventory(&mut rng);
    let requests = requests();
    let names = ["gpu-pair", "big-memory", "shared", "new-driver"];
    let claims: Vec<NamedRequest<'_>> = names
        .iter()
        .zip(&requests)
        .map(|(name, request)| NamedRequest { name, request })
        .collect();
    let reservations = Reservations::new();
    let candidate_sets: Vec<Vec<String>> = (0..64).map(|_| candidates(&mut rng)).collect();

    let cold = time_checks(&claims, &inventory, &candidate_sets, &reservations);
    report("random candidate sets", &cold);
    // The same 128 candidates every time: what is left when the nodes' data stays in cache.
    let warm = time_checks(&claims, &inventory, &candidate_sets[..1], &reservations);
    report("one candidate set, cache warm", &warm);

    let mut criterion = Criterion::default().configure_from_args();
    let mut round = 0usize;
    criterion.bench_function("gang_check_4_claims_128_nodes", |b| {
        b.iter(|| {
            round += 1;
            let set = &candidate_sets[round % candidate_sets.len()];
            black_box(unsuitable_nodes(&inventory, &claims, set, &reservations))
        });
    });
    criterion.final_summary();
}
