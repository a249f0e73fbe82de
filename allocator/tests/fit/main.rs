//! The pure allocation logic's property tests (the gang check against a brute-force reference,
//! node choice by policy) and the parsers of quantities, versions and requirements.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod gang_props;
mod parsers;
mod policy_props;
