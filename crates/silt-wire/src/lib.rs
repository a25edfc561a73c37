//! The MongoDB wire protocol, without I/O.
