//! Identifier newtypes. Block numbers, sequence numbers and transaction ids are never bare
//! integers outside this module, so that one cannot be passed where another is expected.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u64);

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A logical node number inside one dictionary file; the block translation table maps
    /// it to the extent that currently holds the node.
    BlockNum
);
id_type!(
    /// Log sequence number: the position of a record in the write-ahead log. Strictly
    /// increasing across log files.
    Lsn
);
id_type!(
    /// Message sequence number, per dictionary: the order in which messages were injected.
    /// A leaf applies messages in MSN order, each exactly once.
    Msn
);
id_type!(
    /// Transaction id carried by every message. Until transactions exist every message is
    /// stamped with [`Xid::AUTOCOMMIT`].
    Xid
);
id_type!(
    /// Dictionary id: stable for the dictionary's life, never reused, names its file.
    DictId
);

impl Xid {
    /// The id of a write that is not part of an explicit transaction.
    pub const AUTOCOMMIT: Xid = Xid(0);
}
