//! The JSON shapes of the `/v1` endpoints (camelCase), each mapped from a ledger view. These are
//! the API's contract, the source of the OpenAPI schemas and what `dra-ledger admin` decodes;
//! the ledger's own types stay free to change. Depends on the ledger's view types only.

mod admin_access;
mod capacity;
mod claims;
mod grid;
mod history;
mod idle;
mod inventory;

pub use admin_access::*;
pub use capacity::*;
pub use claims::*;
pub use grid::*;
pub use history::*;
pub use idle::*;
pub use inventory::*;
