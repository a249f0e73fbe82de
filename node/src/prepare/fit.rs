//! Whether a claim may hold a device that other claims hold already: the device-level check of
//! a prepare. A device is held whole (alone, shared by up to `maxConsumers` claims, or with
//! admin access, which is in no one's way) or by shares (a device allocated to several claims
//! at once, each share with its own ID): shares of one device coexist with each other, never
//! with a claim holding the device whole. Pure: the holders come as the journal has them.

use crate::journal::{Entry, EntrySharing};

/// How a claim wants one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Want<'a> {
    /// The device.
    pub device: &'a str,
    /// The claim's sharing.
    pub sharing: EntrySharing,
    /// The claim holds the device by a share.
    pub by_share: bool,
}

/// Whether `entry` holds `device` by a share.
fn holds_by_share(entry: &Entry, device: &str) -> bool {
    entry.shares.iter().any(|s| s.device == device)
}

/// The first of `holders` (other claims, by UID) in the way of `want`; `None` when the device
/// can be held as wanted beside them.
pub(crate) fn blocker<'a>(
    want: Want<'_>,
    holders: impl IntoIterator<Item = (&'a str, &'a Entry)>,
) -> Option<&'a str> {
    if want.sharing == EntrySharing::AdminAccess {
        return None;
    }
    let holding: Vec<(&str, &Entry)> = holders
        .into_iter()
        .filter(|(_, e)| e.sharing != EntrySharing::AdminAccess)
        .filter(|(_, e)| e.devices.iter().any(|d| d == want.device))
        .collect();
    if want.by_share {
        return holding
            .iter()
            .find(|(_, e)| !holds_by_share(e, want.device))
            .map(|(uid, _)| *uid);
    }
    if let Some((uid, _)) = holding.iter().find(|(_, e)| holds_by_share(e, want.device)) {
        return Some(uid);
    }
    let start = match want.sharing {
        EntrySharing::Shared(max) => max,
        EntrySharing::Exclusive | EntrySharing::AdminAccess => 1,
    };
    let limit = holding
        .iter()
        .try_fold(start, |limit, (_, e)| match e.sharing {
            EntrySharing::Exclusive => None,
            EntrySharing::Shared(max) => Some(limit.min(max)),
            EntrySharing::AdminAccess => Some(limit),
        });
    let fits =
        limit.is_some_and(|limit| holding.len() < usize::try_from(limit).unwrap_or(usize::MAX));
    if fits {
        None
    } else {
        holding.first().map(|(uid, _)| *uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceShare;
    use crate::journal::EntryState;

    fn whole(device: &str, sharing: EntrySharing) -> Entry {
        Entry {
            state: EntryState::Prepared,
            namespace: "default".into(),
            name: "c".into(),
            devices: vec![device.into()],
            sharing,
            cdi_ids: Vec::new(),
            boot_id: "b".into(),
            shares: Vec::new(),
        }
    }

    fn share(device: &str, id: &str) -> Entry {
        Entry {
            shares: vec![DeviceShare {
                device: device.into(),
                share_id: id.into(),
                consumed: [("memory".to_owned(), "40Gi".to_owned())].into(),
            }],
            ..whole(device, EntrySharing::Exclusive)
        }
    }

    fn want(sharing: EntrySharing, by_share: bool) -> Want<'static> {
        Want {
            device: "gpu-0",
            sharing,
            by_share,
        }
    }

    #[test]
    fn two_shares_of_one_device_coexist() {
        let first = share("gpu-0", "s-1");
        let second = share("gpu-0", "s-2");
        let holders = [("u1", &first), ("u2", &second)];
        assert_eq!(blocker(want(EntrySharing::Exclusive, true), holders), None);
    }

    #[test]
    fn two_exclusive_claims_on_one_whole_device_are_refused() {
        let held = whole("gpu-0", EntrySharing::Exclusive);
        let holders = [("u1", &held)];
        assert_eq!(
            blocker(want(EntrySharing::Exclusive, false), holders),
            Some("u1")
        );
        let other = whole("gpu-1", EntrySharing::Exclusive);
        assert_eq!(
            blocker(want(EntrySharing::Exclusive, false), [("u1", &other)]),
            None
        );
    }

    #[test]
    fn a_share_and_a_whole_holder_of_one_device_are_in_each_others_way() {
        let held = whole("gpu-0", EntrySharing::Shared(4));
        assert_eq!(
            blocker(want(EntrySharing::Exclusive, true), [("u1", &held)]),
            Some("u1")
        );
        let shared = share("gpu-0", "s-1");
        assert_eq!(
            blocker(want(EntrySharing::Shared(4), false), [("u2", &shared)]),
            Some("u2")
        );
    }

    #[test]
    fn shared_devices_take_claims_up_to_the_smallest_max_consumers() {
        let a = whole("gpu-0", EntrySharing::Shared(3));
        let b = whole("gpu-0", EntrySharing::Shared(2));
        assert_eq!(
            blocker(want(EntrySharing::Shared(3), false), [("u1", &a)]),
            None
        );
        assert_eq!(
            blocker(
                want(EntrySharing::Shared(3), false),
                [("u1", &a), ("u2", &b)]
            ),
            Some("u1")
        );
    }

    #[test]
    fn admin_access_is_in_no_ones_way_and_takes_any_device() {
        let admin = whole("gpu-0", EntrySharing::AdminAccess);
        assert_eq!(
            blocker(want(EntrySharing::Exclusive, false), [("u1", &admin)]),
            None
        );
        let held = whole("gpu-0", EntrySharing::Exclusive);
        assert_eq!(
            blocker(want(EntrySharing::AdminAccess, false), [("u2", &held)]),
            None
        );
    }
}
