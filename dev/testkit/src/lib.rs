//! Helpers shared by the integration tests of every crate in the workspace, so that each concept
//! a test needs exists once: [`eventually()`] polls until a condition holds, [`tools`] finds an
//! outside program or skips (failing under CI instead), [`process`] runs the built `dra-ledger`
//! and reads its output, [`browser`] drives a headless Chromium, [`sim`] starts a
//! `dra-ledger sim`, [`ledger`] builds ledger fixtures, and [`random`] makes a run's random
//! choices repeatable by its seed.
//!
//! Only for tests (`publish = false`): no product crate depends on it. It must not depend on the
//! controller, the simulator or the admin API, whose tests use it; it reaches them as processes.

#![allow(clippy::missing_panics_doc)]

pub mod browser;
pub mod eventually;
pub mod ledger;
pub mod process;
pub mod random;
pub mod sim;
pub mod tools;

pub use eventually::{eventually, eventually_blocking, eventually_every, Reached};
pub use tools::{require_tool, under_ci};
