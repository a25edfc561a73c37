//! MQL for SiltDB: filters (`matcher`), update operators (`update`), projections
//! (`projection`), aggregation (`agg`, `expr`). It works on `bson::Document`s and knows
//! nothing of storage, the network or the wire format.

pub mod agg;
pub mod error;
pub mod expr;
pub mod matcher;
pub mod plan;
pub mod projection;
pub mod update;

pub use error::{QResult, QueryError};
