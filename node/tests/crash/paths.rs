//! The two ways the child prepares: straight through `JournalPreparer` with the controller's
//! handles (the 1.30 path), or through the `v1.DRAPlugin` service, which reads each claim's
//! allocation (written from the same handle, as the 1.34 scheduler would) from an in-memory
//! claim source and prepares it with the same preparer. Either way the answers come back per
//! claim UID, in request order.

use std::sync::Arc;

use dra_allocator::handle::{HandleData, HandleSharing};
use dra_node::grpc::DraService;
use dra_node::prepare::{ClaimPreparer, ClaimRequest, JournalPreparer, PrepareError};
use dra_node::v1::claims::{ClaimSource, MemoryClaims};
use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::v1;
use dra_types::resource_v1::{
    DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
};

use crate::opaque::shared_config;
use crate::setup::{DRIVER, NODE};

/// Which path a run takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `JournalPreparer::prepare` with resource handles.
    Handles,
    /// `v1.DRAPlugin` over claims read from a claim source.
    V1,
    /// `v1.DRAPlugin` preparing two claims that share one device ([`crate::shares`]).
    V1Shares,
}

impl Api {
    /// The argument that names it on the child's command line.
    pub fn arg(self) -> &'static str {
        match self {
            Api::Handles => "handles",
            Api::V1 => "v1",
            Api::V1Shares => "v1-shares",
        }
    }

    /// The path an argument names.
    pub fn from_arg(arg: &str) -> Api {
        match arg {
            "v1" => Api::V1,
            "v1-shares" => Api::V1Shares,
            _ => Api::Handles,
        }
    }
}

/// Why a prepare was refused, as far as the workload cares.
#[derive(Debug)]
pub enum Refusal {
    /// A device is held by another claim (expected for new claims).
    InUse,
    /// Anything else.
    Other(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::InUse => f.write_str("a device is in use"),
            Refusal::Other(error) => f.write_str(error),
        }
    }
}

/// The child's way to prepare.
pub enum Path {
    /// The preparer itself.
    Handles(JournalPreparer),
    /// The v1 service over the preparer.
    V1 {
        /// The claims the service reads.
        claims: Arc<MemoryClaims>,
        /// The service.
        service: DraService<JournalPreparer>,
        /// The runtime its calls run on.
        runtime: tokio::runtime::Runtime,
    },
}

/// The claim object the 1.34 scheduler would have written for `request`'s handle.
fn allocated_claim(request: &ClaimRequest) -> ResourceClaim {
    let data = HandleData::parse(&request.resource_handle).unwrap();
    let results = data
        .devices
        .iter()
        .map(|d| DeviceRequestAllocationResult::new("gpu", DRIVER, NODE, d))
        .collect();
    let config = match data.sharing {
        HandleSharing::Exclusive => Vec::new(),
        HandleSharing::Shared { max_consumers } => vec![shared_config(DRIVER, max_consumers)],
    };
    ResourceClaim::new(&request.namespace, &request.name, &request.uid)
        .allocated(DeviceAllocationResult { results, config })
}

fn v1_claim(request: &ClaimRequest) -> v1::Claim {
    v1::Claim {
        namespace: request.namespace.clone(),
        uid: request.uid.clone(),
        name: request.name.clone(),
    }
}

impl Path {
    /// The path `api` over `preparer`.
    pub fn new(api: Api, preparer: JournalPreparer) -> Path {
        match api {
            Api::Handles => Path::Handles(preparer),
            Api::V1 | Api::V1Shares => {
                let claims = Arc::new(MemoryClaims::default());
                let source: Arc<dyn ClaimSource> = claims.clone();
                let service = DraService::new(Arc::new(preparer), source, DRIVER, NODE);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                Path::V1 {
                    claims,
                    service,
                    runtime,
                }
            }
        }
    }

    /// Prepares `claims`, allocated as they are, through the v1 service: its answer per claim
    /// UID.
    pub fn prepare_v1(
        &self,
        claims: &[ResourceClaim],
    ) -> std::collections::HashMap<String, v1::NodePrepareResourceResponse> {
        let Path::V1 {
            claims: source,
            service,
            runtime,
        } = self
        else {
            panic!("claims as allocated are prepared through the v1 service");
        };
        for claim in claims {
            source.put(claim.clone());
        }
        let requests: Vec<v1::Claim> = claims
            .iter()
            .map(|claim| v1::Claim {
                namespace: claim.metadata.namespace.clone().unwrap_or_default(),
                uid: claim.metadata.uid.clone().unwrap_or_default(),
                name: claim.metadata.name.clone().unwrap_or_default(),
            })
            .collect();
        runtime.block_on(service.prepare(requests)).claims
    }

    /// Prepares `batch`: per claim UID, the CDI IDs or the refusal.
    pub fn prepare(&self, batch: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, Refusal>)> {
        match self {
            Path::Handles(preparer) => preparer
                .prepare(batch)
                .into_iter()
                .map(|(uid, answer)| {
                    let answer = answer.map_err(|e| match e {
                        PrepareError::DeviceInUse { .. } => Refusal::InUse,
                        other => Refusal::Other(other.to_string()),
                    });
                    (uid, answer)
                })
                .collect(),
            Path::V1 {
                claims,
                service,
                runtime,
            } => {
                for request in batch {
                    claims.put(allocated_claim(request));
                }
                let claims: Vec<v1::Claim> = batch.iter().map(v1_claim).collect();
                let mut answer = runtime.block_on(service.prepare(claims)).claims;
                let mut seen = Vec::new();
                batch
                    .iter()
                    .filter(|r| {
                        let first = !seen.contains(&r.uid);
                        seen.push(r.uid.clone());
                        first
                    })
                    .map(|request| {
                        let entry = answer.remove(&request.uid).unwrap();
                        let result = if entry.error.is_empty() {
                            let mut ids: Vec<String> = entry
                                .devices
                                .into_iter()
                                .flat_map(|d| d.cdi_device_ids)
                                .collect();
                            ids.dedup();
                            Ok(ids)
                        } else if entry.error.contains(" is prepared for claim ") {
                            Err(Refusal::InUse)
                        } else {
                            Err(Refusal::Other(entry.error))
                        };
                        (request.uid.clone(), result)
                    })
                    .collect()
            }
        }
    }

    /// Unprepares `batch`: per claim UID, success or the error.
    pub fn unprepare(&self, batch: &[ClaimRequest]) -> Vec<(String, Result<(), String>)> {
        match self {
            Path::Handles(preparer) => preparer
                .unprepare(batch)
                .into_iter()
                .map(|(uid, answer)| (uid, answer.map_err(|e| e.to_string())))
                .collect(),
            Path::V1 {
                service, runtime, ..
            } => {
                let claims: Vec<v1::Claim> = batch.iter().map(v1_claim).collect();
                let answer = runtime.block_on(service.unprepare(claims)).claims;
                batch
                    .iter()
                    .map(|r| {
                        let error = answer[&r.uid].error.clone();
                        (
                            r.uid.clone(),
                            if error.is_empty() { Ok(()) } else { Err(error) },
                        )
                    })
                    .collect()
            }
        }
    }
}
