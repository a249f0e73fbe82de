//! The admin API's view of leader election ([`dra_api::Leadership`]): while this replica holds
//! the Lease its own ledger answers `/v1`, in the term of the Lease's transitions; while another
//! replica holds it, requests go to that replica's admin URL ([`LeaderUrlTemplate`]); with no
//! holder, or once the lease is lost, there is no ledger to answer from.
//!
//! Reads the elector's role only; must not talk to the API server or serve HTTP.

use std::sync::Arc;

use dra_api::{AddressError, Leadership, Serving};
use tokio::sync::watch;

use crate::leader::{LeaderUrlTemplate, Role};

/// Where this replica's `/v1` requests are answered, from the elector's role.
#[derive(Debug)]
pub(super) struct LeaderRoute {
    pub(super) role: watch::Receiver<Role>,
    pub(super) template: LeaderUrlTemplate,
    /// The Lease's namespace, for `{namespace}`.
    pub(super) namespace: String,
    /// This replica's admin port, for `{port}`.
    pub(super) port: u16,
}

impl Leadership for LeaderRoute {
    fn serving(&self) -> Serving {
        match &*self.role.borrow() {
            Role::Leader { transitions, .. } => Serving::Local {
                term: u64::try_from(*transitions).unwrap_or(0),
            },
            Role::Standby {
                holder: Some(holder),
            } => Serving::Leader {
                identity: holder.clone(),
                url: self
                    .template
                    .url_of(holder, &self.namespace, self.port)
                    .map_err(|error| Arc::new(error) as AddressError),
            },
            Role::Standby { holder: None } => Serving::NoLeader,
            Role::Lost { .. } => Serving::Lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(role: Role) -> (watch::Sender<Role>, LeaderRoute) {
        let (tx, rx) = watch::channel(role);
        let route = LeaderRoute {
            role: rx,
            template: LeaderUrlTemplate::default(),
            namespace: "dra-ledger".to_owned(),
            port: 8080,
        };
        (tx, route)
    }

    #[test]
    fn each_role_answers_from_the_leader_or_not_at_all() {
        let (tx, route) = route(Role::Standby { holder: None });
        assert!(matches!(route.serving(), Serving::NoLeader));
        tx.send_replace(Role::Standby {
            holder: Some("dra-ledger-1_0000abcd".to_owned()),
        });
        let Serving::Leader { identity, url } = route.serving() else {
            panic!("{:?}", route.serving());
        };
        assert_eq!(identity, "dra-ledger-1_0000abcd");
        assert_eq!(
            url.unwrap().to_string(),
            "http://dra-ledger-1.dra-ledger-peers.dra-ledger.svc:8080/"
        );
        tx.send_replace(Role::Leader {
            previous: Some("dra-ledger-1_0000abcd".to_owned()),
            takeover: true,
            transitions: 4,
        });
        assert!(matches!(route.serving(), Serving::Local { term: 4 }));
        tx.send_replace(Role::Lost {
            reason: "taken".to_owned(),
        });
        assert!(matches!(route.serving(), Serving::Lost));
    }
}
