//! Events about objects, posted the one way every controller here posts them: `events.k8s.io/v1`
//! events through kube's [`Recorder`], reported by `resource driver <name>` with the pod's name
//! (`POD_NAME`) as the instance when it is set.
//!
//! Owns the event value ([`EventRecord`]), the reference to its object and the recorder; what an
//! event says is the caller's.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType as KubeEventType, Recorder, Reporter};
use kube::{Client, Resource};

/// Severity of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something an operator or user should look at.
    Warning,
}

/// An event about one object.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// The object the event is about (claim, pod, class or scheduling context).
    pub regarding: ObjectReference,
    /// Severity.
    pub type_: EventType,
    /// Short `PascalCase` reason, e.g. `Failed`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl EventRecord {
    /// A Warning event about `object`.
    pub fn warning<K: Resource<DynamicType = ()>>(
        object: &K,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            regarding: object_reference(object),
            type_: EventType::Warning,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A Warning event with reason `Failed`, as a worker posts for a failed sync.
    pub fn failed<K: Resource<DynamicType = ()>>(object: &K, message: impl Into<String>) -> Self {
        Self::warning(object, "Failed", message)
    }
}

/// The reference to `object` used in events.
pub fn object_reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// Posts the events of driver `driver_name`.
#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
}

impl EventRecorder {
    /// Posts through `client`, reported by `resource driver <driver_name>`.
    pub fn new(client: Client, driver_name: &str) -> Self {
        let reporter = Reporter {
            controller: format!("resource driver {driver_name}"),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Posts `event`, saying the controller was doing `action` (`Allocate`, `Mirror`).
    pub async fn post(&self, action: &str, event: EventRecord) -> kube::Result<()> {
        let published = Event {
            type_: match event.type_ {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason,
            note: Some(event.message),
            action: action.to_owned(),
            secondary: None,
        };
        self.recorder.publish(&published, &event.regarding).await
    }
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").finish_non_exhaustive()
    }
}
