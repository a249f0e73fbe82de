//! The simulated kubelet's side of the DRA plugin interfaces, for the nodes given a kubelet
//! directory, as Kubernetes 1.30 does it. The decisions are pure and tested on their own: what
//! registration accepts ([`validation`]), which claims to prepare or unprepare ([`claims`]) and
//! which slice writes match a resource message ([`slices`]).

pub mod claims;
pub mod slices;
pub mod validation;
