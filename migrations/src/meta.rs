//! The `meta` table: the one table whose format never changes, so every release can read the
//! schema version of any file.

use redb::{ReadTransaction, ReadableTable, TableDefinition, TableError, WriteTransaction};

use crate::{MigrationError, Result, CURRENT_SCHEMA_VERSION};

/// Schema version and driver name of the file. Invariant: holds `SCHEMA_VERSION_KEY` (a big-endian
/// `u32`) and `DRIVER_NAME_KEY` (UTF-8) from the first commit on; its name and types never change.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// Meta key of the schema version (4 bytes, big-endian `u32`).
pub const SCHEMA_VERSION_KEY: &str = "schema_version";
/// Meta key of the driver name the file belongs to (UTF-8).
pub const DRIVER_NAME_KEY: &str = "driver_name";

/// What a ledger file says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The schema version recorded in the file.
    pub schema_version: u32,
    /// The DRA driver name the file belongs to.
    pub driver_name: String,
}

/// Writes the meta entries of a new file at [`CURRENT_SCHEMA_VERSION`].
pub fn initialize(txn: &WriteTransaction, driver_name: &str) -> Result<()> {
    let mut table = txn.open_table(META).map_err(MigrationError::storage)?;
    table
        .insert(
            SCHEMA_VERSION_KEY,
            CURRENT_SCHEMA_VERSION.to_be_bytes().as_slice(),
        )
        .map_err(MigrationError::storage)?;
    table
        .insert(DRIVER_NAME_KEY, driver_name.as_bytes())
        .map_err(MigrationError::storage)?;
    Ok(())
}

/// Reads the meta entries of a committed file.
///
/// A file without the meta table gives [`MigrationError::MetaMissing`] naming `path`.
pub fn read_meta(txn: &ReadTransaction, path: &std::path::Path) -> Result<FileInfo> {
    match txn.open_table(META) {
        Ok(table) => decode(&table),
        Err(TableError::TableDoesNotExist(_)) => Err(MigrationError::MetaMissing {
            path: path.to_path_buf(),
        }),
        Err(error) => Err(MigrationError::storage(error)),
    }
}

/// Records `version` as the file's schema version inside a migration transaction.
pub(crate) fn set_schema_version(txn: &WriteTransaction, version: u32) -> Result<()> {
    let mut table = txn.open_table(META).map_err(MigrationError::storage)?;
    table
        .insert(SCHEMA_VERSION_KEY, version.to_be_bytes().as_slice())
        .map_err(MigrationError::storage)?;
    Ok(())
}

fn decode(table: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<FileInfo> {
    let version = table
        .get(SCHEMA_VERSION_KEY)
        .map_err(MigrationError::storage)?
        .ok_or(MigrationError::MetaInvalid {
            key: SCHEMA_VERSION_KEY,
            reason: "absent".to_owned(),
        })?;
    let bytes: [u8; 4] = version
        .value()
        .try_into()
        .map_err(|_| MigrationError::MetaInvalid {
            key: SCHEMA_VERSION_KEY,
            reason: format!("expected 4 bytes, found {}", version.value().len()),
        })?;
    let driver = table
        .get(DRIVER_NAME_KEY)
        .map_err(MigrationError::storage)?
        .ok_or(MigrationError::MetaInvalid {
            key: DRIVER_NAME_KEY,
            reason: "absent".to_owned(),
        })?;
    let driver_name = String::from_utf8(driver.value().to_vec()).map_err(|error| {
        MigrationError::MetaInvalid {
            key: DRIVER_NAME_KEY,
            reason: error.to_string(),
        }
    })?;
    Ok(FileInfo {
        schema_version: u32::from_be_bytes(bytes),
        driver_name,
    })
}
