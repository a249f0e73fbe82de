//! Ledger schema versions and the frozen steps between them.
//!
//! This crate owns the on-disk identity of a dra-ledger file: the `meta` table (schema version and
//! driver name), the frozen table definitions of every released schema version, and the steps that
//! carry a file from one version to the next. It works on raw tables and bytes only and must not
//! depend on `dra-allocator` (the allocator depends on this crate, never the other way round).
//!
//! Opening rules, applied by [`migrate`] before the allocator opens a file:
//! - a file of the current version is left alone;
//! - an older file is first copied to `<file>.bak-v<N>`, then migrated in one write transaction
//!   that also bumps the recorded version;
//! - a newer file is refused with [`MigrationError::NewerSchema`] and stays byte-for-byte unchanged;
//! - an empty, corrupt or non-redb file gives a clear error.

mod backend;
mod error;
mod meta;
mod migrate;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v5;

pub use error::{MigrationError, Result};
pub use meta::{initialize, read_meta, FileInfo, DRIVER_NAME_KEY, META, SCHEMA_VERSION_KEY};
pub use migrate::{backup_path, copy_current_tables, inspect, migrate, MigrateOutcome};

/// The schema version written by this release. Files of an older version are migrated to it.
pub const CURRENT_SCHEMA_VERSION: u32 = 5;

/// The oldest schema version this release can migrate from.
pub const OLDEST_SUPPORTED_SCHEMA_VERSION: u32 = 1;
