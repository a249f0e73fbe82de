//! The CEL environment of device selectors, as `k8s.io/dynamic-resource-allocation/cel` builds
//! it on the Kubernetes base environment: the `cel` crate's standard library with its strings
//! and lists extensions, plus the Kubernetes quantity and semver libraries
//! ([`super::quantity`], [`super::semver_lib`]); and the `device` variable: `driver`,
//! `attributes` and `capacity`, each a map from domain to a map from id to value. Names
//! without a domain belong to the device's driver; an unknown domain is an empty map (so
//! `"x" in device.attributes["other.example.com"]` is false), an unknown id a runtime error
//! (`no such key: x`). Which Kubernetes functions exist here is listed, and tested, in
//! `docs/simulator.md` ("CEL in the 1.34 scheduler").
//!
//! Compiled programs are cached by expression. Pure: no I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use cel::common::traits::{Container, Indexer, Iterable, Sizer};
use cel::common::types::{CelBool, CelInt, CelMap, CelString, Type, MAP_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{extensions, Context, Env, ExecutionError, Program, Value};
use dra_runtime::lock::LockExt;

use super::error::{CompileError, DeviceValueError, EvaluationError};
use super::quantity::Quantity;
use super::semver_lib::Semver;
use dra_types::resource_v1::{Device, DeviceAttribute};

/// The verdict of an expression on a device; a failure is kept (and shared) as one too.
pub type Verdict = Result<bool, Arc<EvaluationError>>;

/// The verdicts of the expressions evaluated on one device, by expression.
type Verdicts = foldhash::HashMap<String, Verdict>;

/// How many devices' verdicts [`CelEnv`] keeps before it starts over.
const VERDICT_DEVICES: usize = 1 << 16;

/// The device selector environment with its caches: compiled expressions, and the verdicts of
/// expressions on devices. A selector's result depends only on the expression and on the
/// device's driver, attributes and capacity, so it is kept across cycles and pods, by the
/// device's content ([`device_key`]): a slice that changes a device gives it a new key.
pub struct CelEnv {
    env: Arc<Env>,
    programs: Mutex<HashMap<String, Result<Arc<Program>, CompileError>>>,
    /// Device key -> expression -> verdict.
    verdicts: Mutex<foldhash::HashMap<String, Verdicts>>,
}

/// The identity of a device's `device` variable: its driver, attributes and capacity.
pub fn device_key(driver: &str, device: &Device) -> String {
    format!("{driver:?} {:?} {:?}", device.attributes, device.capacity)
}

impl std::fmt::Debug for CelEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelEnv").finish_non_exhaustive()
    }
}

impl Default for CelEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl CelEnv {
    /// The environment of Kubernetes 1.34 device selectors (as far as the library goes).
    pub fn new() -> Self {
        let mut env = Env::stdlib();
        // None of these declare an overload twice; a failure would be a programming error
        // caught by every test that evaluates a selector.
        let registered = env
            .add_extension(extensions::strings)
            .and_then(|()| env.add_extension(extensions::lists))
            .and_then(|()| super::quantity::register(&mut env))
            .and_then(|()| super::semver_lib::register(&mut env));
        if let Err(error) = registered {
            tracing::error!(%error, "Could not build the CEL environment of device selectors");
        }
        Self {
            env: Arc::new(env),
            programs: Mutex::new(HashMap::new()),
            verdicts: Mutex::new(foldhash::HashMap::default()),
        }
    }

    /// The verdict of `expression` on the device with key `device` ([`device_key`]), computed
    /// by `evaluate` the first time (a runtime error is a verdict too).
    pub fn verdict(
        &self,
        device: &str,
        expression: &str,
        evaluate: impl FnOnce() -> Result<bool, EvaluationError>,
    ) -> Verdict {
        let known = self
            .verdicts
            .lock_or_recover()
            .get(device)
            .and_then(|by_expression| by_expression.get(expression).cloned());
        if let Some(verdict) = known {
            return verdict;
        }
        let verdict = evaluate().map_err(Arc::new);
        let mut verdicts = self.verdicts.lock_or_recover();
        if verdicts.len() >= VERDICT_DEVICES && !verdicts.contains_key(device) {
            verdicts.clear();
        }
        verdicts
            .entry(device.to_owned())
            .or_default()
            .insert(expression.to_owned(), verdict.clone());
        verdict
    }

    /// The compiled `expression`, from the cache when it was compiled before.
    pub fn compile(&self, expression: &str) -> Result<Arc<Program>, CompileError> {
        if let Some(cached) = self.programs.lock_or_recover().get(expression) {
            return cached.clone();
        }
        let compiled = self
            .env
            .compile(expression)
            .map(Arc::new)
            .map_err(|errors| CompileError {
                source: Arc::new(errors),
            });
        self.programs
            .lock_or_recover()
            .insert(expression.to_owned(), compiled.clone());
        compiled
    }

    /// Evaluates a compiled selector for one device: `Ok(true)` when it matches; `Err` with the
    /// runtime error (a result that is not a bool is one too).
    pub fn matches(
        &self,
        program: &Program,
        device: &DeviceValue,
    ) -> Result<bool, EvaluationError> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_as_val("device", device.0.clone_as_boxed());
        let result =
            Value::resolve_val(program.expression(), &context).map_err(EvaluationError::Runtime)?;
        match result.downcast_ref::<CelBool>() {
            Some(value) => Ok(*value.inner()),
            None => Err(EvaluationError::NotBool(
                result.get_type().name().to_owned(),
            )),
        }
    }
}

/// Values by domain, then id.
type ById<'a> = BTreeMap<&'a str, Vec<(&'a str, Box<dyn Val>)>>;

/// The `device` variable of one device.
#[derive(Debug)]
pub struct DeviceValue(Box<dyn Val>);

/// Splits `domain/id`, or files a bare id under `driver`.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

impl DeviceValue {
    /// Builds the variable of `device` published by `driver`. A version that is no semver or a
    /// capacity that is no quantity is an error, as upstream's evaluation fails on it.
    pub fn new(driver: &str, device: &Device) -> Result<Self, DeviceValueError> {
        let mut attributes: ById = BTreeMap::new();
        for (name, attribute) in &device.attributes {
            let value: Box<dyn Val> =
                match attribute {
                    DeviceAttribute::Int(i) => Box::new(CelInt::from(*i)),
                    DeviceAttribute::Bool(b) => Box::new(CelBool::from(*b)),
                    DeviceAttribute::String(s) => Box::new(CelString::from(s.clone())),
                    DeviceAttribute::Version(v) => Box::new(Semver::parse(v).map_err(
                        |source| DeviceValueError::Version {
                            name: name.clone(),
                            source,
                        },
                    )?),
                };
            let (domain, id) = qualified(name, driver);
            attributes.entry(domain).or_default().push((id, value));
        }
        let mut capacity: ById = BTreeMap::new();
        for (name, cap) in &device.capacity {
            let value =
                Quantity::parse(&cap.value.0).map_err(|source| DeviceValueError::Capacity {
                    name: name.clone(),
                    source,
                })?;
            let (domain, id) = qualified(name, driver);
            capacity
                .entry(domain)
                .or_default()
                .push((id, Box::new(value)));
        }
        let mut fields: HashMap<cel::common::types::CelMapKey<'static>, Box<dyn Val>> =
            HashMap::new();
        fields.insert(
            "driver".to_owned().into(),
            Box::new(CelString::from(driver.to_owned())),
        );
        fields.insert(
            "attributes".to_owned().into(),
            Box::new(DomainMap::new(attributes)),
        );
        fields.insert(
            "capacity".to_owned().into(),
            Box::new(DomainMap::new(capacity)),
        );
        Ok(Self(Box::new(CelMap::from(fields))))
    }
}

/// A map from domain to a map of ids whose unknown keys are empty maps, like upstream's
/// `newStringInterfaceMapWithDefault`.
#[derive(Debug, Clone)]
struct DomainMap {
    domains: CelMap<'static>,
    empty: CelMap<'static>,
}

impl DomainMap {
    fn new(entries: ById<'_>) -> Self {
        let domains: HashMap<_, Box<dyn Val>> = entries
            .into_iter()
            .map(|(domain, ids)| {
                let inner: HashMap<_, Box<dyn Val>> = ids
                    .into_iter()
                    .map(|(id, value)| (id.to_owned().into(), value))
                    .collect();
                (
                    domain.to_owned().into(),
                    Box::new(CelMap::from(inner)) as Box<dyn Val>,
                )
            })
            .collect();
        Self {
            domains: CelMap::from(domains),
            empty: CelMap::default(),
        }
    }
}

impl Val for DomainMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }
    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }
    fn as_container(&self) -> Option<&dyn Container> {
        Some(&self.domains)
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(&self.domains)
    }
    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(&self.domains)
    }
    fn equals(&self, other: &dyn Val) -> bool {
        self.domains.equals(other)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
}

impl Indexer for DomainMap {
    fn get<'b, 'v>(&'b self, index: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.domains.get(index) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&self.empty)),
            other => other,
        }
    }

    fn steal<'v>(self: Box<Self>, index: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(index).map(CowVal::into_owned)
    }
}

#[cfg(test)]
mod tests;
