//! Events on pods, as client-go's event recorder posts them: a core/v1 `Event` named
//! `<pod>.<hex timestamp>` with the pod as involved object, the reporting component (and host,
//! for a kubelet) as source.
//!
//! I/O only: a failed post is logged, never returned, as a recorder drops what it cannot send.

use chrono::Utc;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Api, Client};

/// Who posts an event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reporter<'a> {
    /// The component (`kubelet`, `resource_claim`).
    pub component: &'a str,
    /// The node of a kubelet.
    pub host: Option<&'a str>,
}

/// The event of `type_` (`Normal`, `Warning`) with `reason` and `message` on `pod`.
fn pod_event(pod: &Pod, reporter: Reporter<'_>, type_: &str, reason: &str, message: &str) -> Event {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let now = Utc::now();
    let nanos = now.timestamp_nanos_opt().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{pod_name}.{nanos:x}")),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod_name),
            namespace: Some(namespace),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            field_path: None,
        },
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some(reporter.component.to_owned()),
            host: reporter.host.map(str::to_owned),
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: None,
        count: Some(1),
        reporting_component: Some(reporter.component.to_owned()),
        reporting_instance: reporter.host.map(str::to_owned),
        ..Event::default()
    }
}

/// Posts a Warning event with `reason` and `message` on `pod`; a failure is only logged.
pub(crate) async fn post_pod_warning(
    client: &Client,
    pod: &Pod,
    reporter: Reporter<'_>,
    reason: &str,
    message: &str,
) {
    post_pod_event(client, pod, reporter, "Warning", reason, message).await;
}

/// Posts the event of `type_` with `reason` and `message` on `pod`; a failure is only logged.
pub(crate) async fn post_pod_event(
    client: &Client,
    pod: &Pod,
    reporter: Reporter<'_>,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let event = pod_event(pod, reporter, type_, reason, message);
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    if let Err(error) = api.create(&PostParams::default(), &event).await {
        tracing::warn!(%error, reason, "Failed to post an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_names_the_pod_and_its_reporter() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let kubelet = Reporter {
            component: "kubelet",
            host: Some("node-0"),
        };
        let event = pod_event(&pod, kubelet, "Warning", "R", "m");
        assert!(event.metadata.name.unwrap().starts_with("p."));
        assert_eq!(event.involved_object.uid.as_deref(), Some("u"));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.source.unwrap().host.as_deref(), Some("node-0"));
        let controller = Reporter {
            component: "resource_claim",
            host: None,
        };
        let event = pod_event(&pod, controller, "Warning", "R", "m");
        assert_eq!(event.reporting_component.as_deref(), Some("resource_claim"));
        assert_eq!(event.reporting_instance, None);
    }
}
