//! BSON helpers shared by every layer above the engine: MongoDB's cross-type comparison order
//! (`compare`, bytewise or under the collation a command installed), the order-preserving byte encoding of values used for every dictionary key
//! (`keyenc`), and dotted-path access with MongoDB's array semantics (`path`). It knows nothing
//! of storage, queries or the network.

pub mod compare;
pub mod keyenc;
pub mod path;

pub use compare::{cmp_values, type_rank, values_equal};
