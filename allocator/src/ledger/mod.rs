//! The durable ledger (redb).
