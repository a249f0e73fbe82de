//! Unit tests of the fitting logic.
