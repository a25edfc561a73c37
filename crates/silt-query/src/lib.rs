//! MQL for SiltDB: filters (`matcher`), update operators (`update`), projections
//! (`projection`), aggregation (`agg`, `expr`), query planning (`plan`: index bounds in value
//! space, plan choice, covered queries, `explain`), collations (`collation`, ICU4X), and
//! MongoDB's error codes (`error`).
//!
//! It works on `bson::Document`s and sees indexes only as specs (`plan::IndexInfo`). It must
//! not know storage, dictionaries, the byte layout of keys, the network or the wire format:
//! turning a plan into key ranges and reading them is `silt-collection`'s.

pub mod agg;
pub mod collation;
pub mod error;
pub mod expr;
pub mod matcher;
pub mod memory;
pub mod plan;
pub mod projection;
pub mod text;
pub mod update;
pub mod validator;

pub use error::{QResult, QueryError};
