//! The errors of the 1.34 scheduler's pure parts, in layers: a string that is no quantity
//! ([`QuantityError`]) or no semantic version ([`SemverError`]) makes a device's CEL variable
//! fail ([`DeviceValueError`]); that, or a program that fails on the device, makes a selector
//! fail ([`EvaluationError`]); a selector that does not compile ([`CompileError`]) or fails, and
//! a claim the allocator cannot handle, are an [`AllocatorError`], which aborts the scheduling
//! cycle. The texts are upstream's: the pod's `FailedScheduling` event quotes them.
//!
//! Types only; nothing here depends on the scheduler's other modules.

use std::sync::Arc;

use cel::{ExecutionError, ParseErrors};

/// A string that is no Kubernetes quantity, as `resource.ParseQuantity` words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not of the quantity grammar.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Syntax,
    /// Beyond what a quantity holds.
    #[error("quantity is too large")]
    TooLarge,
}

/// A string that is no semantic version.
#[derive(Debug, thiserror::Error)]
pub enum SemverError {
    /// Not strict semver 2.0.0.
    #[error("could not parse {text:?} as semver: {source}")]
    Strict {
        /// The string.
        text: String,
        /// The parser's reason.
        #[source]
        source: semver::Error,
    },
    /// Not semver 2.0.0 even after normalizing.
    #[error("could not parse {text:?} as semver")]
    Normalized {
        /// The string as given.
        text: String,
        /// Why its normalized form is no version.
        #[source]
        source: Box<SemverError>,
    },
}

/// A device whose `device` variable cannot be built: upstream's evaluation fails on it.
#[derive(Debug, thiserror::Error)]
pub enum DeviceValueError {
    /// A `version` attribute that is no semantic version.
    #[error("attribute {name}: parse semantic version: {source}")]
    Version {
        /// The attribute.
        name: String,
        /// Why it is no version.
        #[source]
        source: SemverError,
    },
    /// A capacity that is no quantity.
    #[error("capacity {name}: {source}")]
    Capacity {
        /// The capacity.
        name: String,
        /// Why it is no quantity.
        #[source]
        source: QuantityError,
    },
}

/// A selector expression that does not compile.
#[derive(Debug, Clone, thiserror::Error)]
#[error("compilation failed: {source}")]
pub struct CompileError {
    /// The parser's errors (shared: compiled programs and their errors are cached).
    #[source]
    pub source: Arc<ParseErrors>,
}

/// A selector that cannot be evaluated on a device.
#[derive(Debug, thiserror::Error)]
pub enum EvaluationError {
    /// The device's variable cannot be built (shared: device variables are cached).
    #[error(transparent)]
    Device(Arc<DeviceValueError>),
    /// The program failed (a missing key reads as cel-go words it).
    #[error("{}", runtime_text(.0))]
    Runtime(#[source] ExecutionError),
    /// The program's result is no bool.
    #[error("CEL result of type {0} could not be converted to bool")]
    NotBool(String),
}

fn runtime_text(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        other => other.to_string(),
    }
}

/// Why the allocator cannot evaluate the pod's claims on a node; it fails the whole cycle.
#[derive(Debug, thiserror::Error)]
pub enum AllocatorError {
    /// A request with neither `exactly` nor `firstAvailable`.
    #[error(
        "claim {claim}, request {request}: missing device class name (unsupported request type?)"
    )]
    NoDeviceClass {
        /// `namespace/name` of the claim.
        claim: String,
        /// The request.
        request: String,
    },
    /// More devices requested than one allocation holds.
    #[error("claim {claim}: number of requested devices {count} exceeds the claim limit of {max}")]
    TooManyDevices {
        /// `namespace/name` of the claim.
        claim: String,
        /// The fewest devices the requests need.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A constraint of no known kind.
    #[error("claim {claim}, constraint #{index}: empty constraint (unsupported constraint type?)")]
    EmptyConstraint {
        /// `namespace/name` of the claim.
        claim: String,
        /// Its position.
        index: usize,
    },
    /// A selector of no known kind.
    #[error("claim {claim}, request {request}, selector #{index}: CEL expression empty (unsupported selector type?)")]
    EmptySelector {
        /// `namespace/name` of the claim.
        claim: String,
        /// `req` or `req/sub`.
        request: String,
        /// Its position.
        index: usize,
    },
    /// The request's class does not exist.
    #[error("claim {claim}, request {request}: could not retrieve device class {class}: deviceclass.resource.k8s.io \"{class}\" not found")]
    ClassNotFound {
        /// `namespace/name` of the claim.
        claim: String,
        /// `req` or `req/sub`.
        request: String,
        /// The class.
        class: String,
    },
    /// An `ExactCount` request with a count below zero.
    #[error("claim {claim}, request {request}: exact count {count:?} is invalid")]
    InvalidCount {
        /// `namespace/name` of the claim.
        claim: String,
        /// `req` or `req/sub`.
        request: String,
        /// The count as given.
        count: Option<i64>,
    },
    /// An `All` request while a pool is incomplete or invalid.
    #[error("claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently {state}")]
    PoolNotReady {
        /// `namespace/name` of the claim.
        claim: String,
        /// `req` or `req/sub`.
        request: String,
        /// `driver/pool`.
        pool: String,
        /// `being updated` or `invalid`.
        state: &'static str,
    },
    /// An allocation mode other than `ExactCount` and `All`.
    #[error("claim {claim}, request {request}: unsupported count mode {mode}")]
    UnsupportedMode {
        /// `namespace/name` of the claim.
        claim: String,
        /// `req` or `req/sub`.
        request: String,
        /// The mode.
        mode: String,
    },
    /// A selector of the class or the claim that does not compile.
    #[error("{origin}: selector #{index}: CEL compile error: {source}")]
    Compile {
        /// `class <name>` or `claim <namespace/name>`.
        origin: String,
        /// The selector's position.
        index: usize,
        /// The compiler's error.
        #[source]
        source: CompileError,
    },
    /// A selector of the class or the claim that fails on a device.
    #[error("{origin}: selector #{index}: CEL runtime error: {source}")]
    Evaluation {
        /// `class <name>` or `claim <namespace/name>`.
        origin: String,
        /// The selector's position.
        index: usize,
        /// The failure (shared: verdicts are cached).
        #[source]
        source: Arc<EvaluationError>,
    },
    /// An `All` request whose devices a `matchAttribute` constraint refuses.
    #[error("claim {claim}, request {request}: cannot add device {device} because a claim constraint would not be satisfied")]
    ConstraintUnsatisfied {
        /// `namespace/name` of the claim.
        claim: String,
        /// `req` or `req/sub`.
        request: String,
        /// `driver/pool/device`.
        device: String,
    },
}
