//! The `nvml` health source: NVML's event set read in a thread of its own (only in builds with
//! the cargo feature `nvml`), its events mapped to device health by [`observation_of`], which is
//! pure and tested without a GPU.
//!
//! As NVIDIA's DRA driver classes them (`cmd/gpu-kubelet-plugin/device_health.go` of
//! NVIDIA/k8s-dra-driver-gpu): a critical Xid makes the GPU unhealthy unless it is one of the
//! Xids caused by applications ([`IGNORED_XIDS`]: 13, 31, 43, 45, 68, 109); a wait for events
//! that fails, or a GPU whose events cannot be registered, makes every GPU (or that one)
//! unhealthy as `GpuLost`. Beyond NVIDIA's driver, which registers double-bit ECC events but
//! skips them, a double-bit (uncorrectable) ECC error makes the GPU unhealthy too
//! (`EccDoubleBit`). A GPU made unhealthy stays so until the agent restarts, as in NVIDIA's
//! driver: NVML reports no recovery.

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;

use dra_allocator::model::AttributeValue;

use super::{HealthError, HealthSource, Observation, Observations, Reason};
use crate::device::Inventory;

/// The Xids that applications cause, which leave the GPU healthy.
pub const IGNORED_XIDS: [u64; 6] = [
    13,  // graphics engine exception
    31,  // GPU memory page fault
    43,  // GPU stopped processing
    45,  // preemptive cleanup, due to previous errors
    68,  // video processor exception
    109, // context switch timeout
];

/// An NVML event, as the event thread reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuEvent {
    /// A critical Xid of the GPU with `uuid` (`None`: NVML did not say which Xid).
    Xid {
        /// The GPU.
        uuid: String,
        /// The Xid.
        xid: Option<u64>,
    },
    /// A double-bit ECC error of the GPU with `uuid`.
    DoubleBitEcc {
        /// The GPU.
        uuid: String,
    },
    /// The GPU with `uuid` (`None`: every GPU) cannot be watched: lost, or NVML failed.
    Lost {
        /// The GPU.
        uuid: Option<String>,
        /// What NVML said.
        detail: String,
    },
}

/// The health an event gives its GPU; `None` for an ignored Xid.
pub fn observation_of(event: &GpuEvent) -> Option<Observation> {
    match event {
        GpuEvent::Xid { xid: Some(xid), .. } if IGNORED_XIDS.contains(xid) => None,
        GpuEvent::Xid { xid: Some(xid), .. } => Some(Observation::unhealthy(
            Reason::XidCritical,
            format!("critical Xid {xid} reported by NVML"),
        )),
        GpuEvent::Xid { xid: None, .. } => Some(Observation::unhealthy(
            Reason::XidCritical,
            "critical Xid (number unknown) reported by NVML",
        )),
        GpuEvent::DoubleBitEcc { .. } => Some(Observation::unhealthy(
            Reason::EccDoubleBit,
            "double-bit ECC error reported by NVML",
        )),
        GpuEvent::Lost { detail, .. } => Some(Observation::unhealthy(
            Reason::GpuLost,
            format!("NVML: {detail}"),
        )),
    }
}

/// The GPU an event is about (`None`: all of them).
fn uuid_of(event: &GpuEvent) -> Option<&str> {
    match event {
        GpuEvent::Xid { uuid, .. } | GpuEvent::DoubleBitEcc { uuid } => Some(uuid),
        GpuEvent::Lost { uuid, .. } => uuid.as_deref(),
    }
}

/// The events of the NVML thread, latched per GPU and matched to devices by their `uuid`
/// attribute.
#[derive(Debug)]
pub struct XidHealth {
    events: Receiver<GpuEvent>,
    /// The first failure per GPU UUID; `""` for one that hit every GPU.
    latched: BTreeMap<String, Observation>,
}

impl XidHealth {
    /// The source over the events arriving on `events`.
    pub fn new(events: Receiver<GpuEvent>) -> Self {
        XidHealth {
            events,
            latched: BTreeMap::new(),
        }
    }
}

impl HealthSource for XidHealth {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn observe(&mut self, inventory: &Inventory) -> Result<Observations, HealthError> {
        while let Ok(event) = self.events.try_recv() {
            if let Some(observation) = observation_of(&event) {
                let key = uuid_of(&event).unwrap_or_default().to_owned();
                self.latched.entry(key).or_insert(observation);
            }
        }
        let everyone = self.latched.get("");
        let mut observed = Observations::new();
        for (name, device) in inventory {
            let Some(AttributeValue::String(uuid)) = device.attributes.get("uuid") else {
                continue;
            };
            if let Some(observation) = self.latched.get(uuid.as_str()).or(everyone) {
                observed.insert(name.clone(), observation.clone());
            }
        }
        Ok(observed)
    }
}

#[cfg(feature = "nvml")]
pub use events::start;

#[cfg(feature = "nvml")]
mod events {
    //! The thread reading NVML's event set.

    use std::sync::mpsc::{channel, Sender};
    use std::sync::Arc;
    use std::time::Duration;

    use nvml_wrapper::bitmasks::event::EventTypes;
    use nvml_wrapper::enums::event::XidError;
    use nvml_wrapper::error::NvmlError;
    use nvml_wrapper::Nvml;

    use super::{GpuEvent, XidHealth};
    use crate::discovery::DiscoveryError;

    fn failed(call: &'static str) -> impl FnOnce(NvmlError) -> DiscoveryError {
        move |error| DiscoveryError::Nvml {
            call,
            source: Box::new(error),
        }
    }

    /// Opens NVML in a new thread, registers every GPU's critical Xid and double-bit ECC events
    /// and returns the source of the events; `wake` is notified after each event, so the agent
    /// takes it at once.
    ///
    /// # Errors
    /// NVML cannot be loaded, or an event set cannot be created or registered.
    pub fn start(wake: Arc<tokio::sync::Notify>) -> Result<XidHealth, DiscoveryError> {
        let (events, receiver) = channel();
        let (ready, started) = channel();
        std::thread::Builder::new()
            .name("nvml-events".to_owned())
            .spawn(move || watch(&events, &wake, &ready))
            .map_err(|e| DiscoveryError::Nvml {
                call: "start the event thread",
                source: Box::new(e),
            })?;
        match started.recv() {
            Ok(Ok(())) => Ok(XidHealth::new(receiver)),
            Ok(Err(error)) => Err(error),
            Err(e) => Err(DiscoveryError::Nvml {
                call: "start the event thread",
                source: Box::new(e),
            }),
        }
    }

    fn watch(
        events: &Sender<GpuEvent>,
        wake: &tokio::sync::Notify,
        ready: &Sender<Result<(), DiscoveryError>>,
    ) {
        let nvml = match Nvml::init().map_err(failed("init")) {
            Ok(nvml) => nvml,
            Err(error) => {
                let _ = ready.send(Err(error));
                return;
            }
        };
        let set = match register(&nvml) {
            Ok(set) => set,
            Err(error) => {
                let _ = ready.send(Err(error));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        loop {
            let event = match set.wait(5_000) {
                Ok(data) => {
                    let uuid = data.device.uuid().unwrap_or_default();
                    if data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                        let xid = match data.event_data {
                            Some(XidError::Value(xid)) => Some(xid),
                            _ => None,
                        };
                        GpuEvent::Xid { uuid, xid }
                    } else if data.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
                        GpuEvent::DoubleBitEcc { uuid }
                    } else {
                        continue;
                    }
                }
                Err(NvmlError::Timeout) => continue,
                Err(error) => {
                    let lost = matches!(error, NvmlError::GpuLost);
                    let event = GpuEvent::Lost {
                        uuid: None,
                        detail: error.to_string(),
                    };
                    if events.send(event).is_err() {
                        return;
                    }
                    wake.notify_one();
                    if lost {
                        return;
                    }
                    std::thread::sleep(Duration::from_secs(5));
                    continue;
                }
            };
            if events.send(event).is_err() {
                return;
            }
            wake.notify_one();
        }
    }

    fn register(nvml: &Nvml) -> Result<nvml_wrapper::EventSet<'_>, DiscoveryError> {
        let mut set = nvml
            .create_event_set()
            .map_err(failed("create event set"))?;
        let count = nvml.device_count().map_err(failed("device count"))?;
        for index in 0..count {
            let device = nvml.device_by_index(index).map_err(failed("device"))?;
            let supported = device
                .supported_event_types()
                .map_err(failed("supported event types"))?;
            let wanted =
                (EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR) & supported;
            set = device
                .register_events(wanted, set)
                .map_err(|e| failed("register events")(e.error))?;
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::NodeDevice;
    use std::sync::mpsc::channel;

    fn inventory() -> Inventory {
        ["GPU-a", "GPU-b"]
            .into_iter()
            .enumerate()
            .map(|(i, uuid)| {
                let name = format!("gpu-{i}");
                let device = NodeDevice {
                    name: name.clone(),
                    attributes: [("uuid".to_owned(), AttributeValue::String(uuid.to_owned()))]
                        .into(),
                    ..NodeDevice::default()
                };
                (name, device)
            })
            .collect()
    }

    #[test]
    fn application_xids_are_ignored_and_the_others_are_critical() {
        let xid = |xid| GpuEvent::Xid {
            uuid: "GPU-a".to_owned(),
            xid: Some(xid),
        };
        for ignored in IGNORED_XIDS {
            assert_eq!(observation_of(&xid(ignored)), None, "Xid {ignored}");
        }
        let fallen = observation_of(&xid(79)).unwrap();
        assert_eq!(fallen.reason, Some(Reason::XidCritical));
        assert_eq!(
            fallen.message.as_deref(),
            Some("critical Xid 79 reported by NVML")
        );
        let ecc = observation_of(&GpuEvent::DoubleBitEcc {
            uuid: "GPU-a".to_owned(),
        });
        assert_eq!(ecc.unwrap().reason, Some(Reason::EccDoubleBit));
    }

    #[test]
    fn an_event_marks_its_gpu_for_good_and_a_lost_nvml_marks_every_gpu() {
        let (events, receiver) = channel();
        let mut source = XidHealth::new(receiver);
        events
            .send(GpuEvent::Xid {
                uuid: "GPU-b".to_owned(),
                xid: Some(13),
            })
            .unwrap();
        assert!(source.observe(&inventory()).unwrap().is_empty());
        events
            .send(GpuEvent::Xid {
                uuid: "GPU-b".to_owned(),
                xid: Some(48),
            })
            .unwrap();
        let observed = source.observe(&inventory()).unwrap();
        assert_eq!(observed.keys().collect::<Vec<_>>(), ["gpu-1"]);
        assert_eq!(
            source.observe(&inventory()).unwrap(),
            observed,
            "no recovery without a restart"
        );
        events
            .send(GpuEvent::Lost {
                uuid: None,
                detail: "the GPU has fallen off the bus".to_owned(),
            })
            .unwrap();
        let observed = source.observe(&inventory()).unwrap();
        assert_eq!(observed["gpu-0"].reason, Some(Reason::GpuLost));
        assert_eq!(
            observed["gpu-1"].reason,
            Some(Reason::XidCritical),
            "a GPU keeps its first failure"
        );
    }
}
