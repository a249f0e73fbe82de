//! Wiping a node's `ResourceSlices` as the 1.34 kubelet does: every slice of the node when the
//! kubelet starts (no driver is usable before its plugin registers), and a driver's slices of the
//! node once it has had no registered plugin for the wipe delay (30 s upstream), unless a plugin
//! of the driver registers before then. [`WipeSchedule`] is the pure bookkeeping of the delays;
//! [`delete_node_slices`] the deletion (one `deletecollection` with field selectors).
//!
//! The schedule takes the time as an argument, so that it is tested without waiting.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use tokio::time::Instant;

use crate::actors::error::{is_not_found, ActorError, Result};
use dra_types::resource_v1::ResourceSlice;

/// When the slices of drivers without a registered plugin are to be deleted.
#[derive(Debug, Default, Clone)]
pub(crate) struct WipeSchedule {
    due: BTreeMap<String, Instant>,
}

impl WipeSchedule {
    /// The driver's last plugin went at `now`: its slices go at `now + delay`. A wipe already
    /// scheduled keeps its time.
    pub(crate) fn driver_gone(&mut self, driver: &str, now: Instant, delay: Duration) {
        self.due.entry(driver.to_owned()).or_insert(now + delay);
    }

    /// A plugin of the driver registered: its wipe is cancelled. Returns whether one was pending.
    pub(crate) fn driver_back(&mut self, driver: &str) -> bool {
        self.due.remove(driver).is_some()
    }

    /// The drivers whose wipe is due at `now`.
    pub(crate) fn due(&self, now: Instant) -> Vec<String> {
        self.due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(driver, _)| driver.clone())
            .collect()
    }

    /// The driver's wipe is done.
    pub(crate) fn done(&mut self, driver: &str) {
        self.due.remove(driver);
    }

    /// The driver's wipe failed: try again at `at`.
    pub(crate) fn retry(&mut self, driver: &str, at: Instant) {
        self.due.insert(driver.to_owned(), at);
    }

    /// Whether a wipe of the driver is pending.
    #[cfg(test)]
    pub(crate) fn is_pending(&self, driver: &str) -> bool {
        self.due.contains_key(driver)
    }
}

/// The field selector of the node's slices, of one driver or of all.
pub(crate) fn selector(node: &str, driver: Option<&str>) -> String {
    match driver {
        Some(driver) => format!("spec.nodeName={node},spec.driver={driver}"),
        None => format!("spec.nodeName={node}"),
    }
}

/// Deletes the slices of `node` (of `driver` only, when given).
pub(crate) async fn delete_node_slices(
    client: &Client,
    node: &str,
    driver: Option<&str>,
) -> Result<()> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let fields = selector(node, driver);
    let list = ListParams::default().fields(&fields);
    let action = format!("delete the resource slices with {fields}");
    match api.delete_collection(&DeleteParams::default(), &list).await {
        Ok(_) => {
            tracing::debug!(%node, ?driver, "Deleted resource slices");
            Ok(())
        }
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(ActorError::api(action, error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_secs(30);

    #[test]
    fn a_gone_driver_is_wiped_once_the_delay_is_over() {
        let start = Instant::now();
        let mut schedule = WipeSchedule::default();
        schedule.driver_gone("d", start, DELAY);
        assert!(schedule.due(start + Duration::from_secs(29)).is_empty());
        assert_eq!(schedule.due(start + DELAY), ["d"]);
        schedule.done("d");
        assert!(schedule.due(start + DELAY * 2).is_empty());
        assert!(!schedule.is_pending("d"));
    }

    #[test]
    fn a_driver_back_in_time_is_not_wiped() {
        let start = Instant::now();
        let mut schedule = WipeSchedule::default();
        schedule.driver_gone("d", start, DELAY);
        assert!(schedule.driver_back("d"));
        assert!(schedule.due(start + DELAY * 10).is_empty());
        assert!(!schedule.driver_back("d"), "nothing pending any more");
    }

    #[test]
    fn going_again_keeps_the_first_deadline_and_other_drivers_are_apart() {
        let start = Instant::now();
        let mut schedule = WipeSchedule::default();
        schedule.driver_gone("a", start, DELAY);
        schedule.driver_gone("a", start + Duration::from_secs(20), DELAY);
        schedule.driver_gone("b", start + Duration::from_secs(10), DELAY);
        assert_eq!(schedule.due(start + DELAY), ["a"]);
        assert_eq!(schedule.due(start + Duration::from_secs(40)), ["a", "b"]);
    }

    #[test]
    fn a_failed_wipe_is_tried_again_later() {
        let start = Instant::now();
        let mut schedule = WipeSchedule::default();
        schedule.driver_gone("d", start, DELAY);
        schedule.retry("d", start + DELAY + Duration::from_secs(1));
        assert!(schedule.due(start + DELAY).is_empty());
        assert_eq!(schedule.due(start + DELAY + Duration::from_secs(1)), ["d"]);
    }

    #[test]
    fn the_selector_names_the_node_and_the_driver() {
        assert_eq!(selector("n", None), "spec.nodeName=n");
        assert_eq!(
            selector("n", Some("gpu.example.com")),
            "spec.nodeName=n,spec.driver=gpu.example.com"
        );
    }
}
