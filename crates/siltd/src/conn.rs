//! What the server knows of one connection: its id, its peer and its authentication state.

use std::sync::Arc;

/// Per-connection facts commands may need.
#[derive(Debug, Clone)]
pub(crate) struct ConnInfo {
    pub id: u64,
    pub peer: String,
    /// Who the connection authenticated as, and its SCRAM conversation.
    pub auth: Arc<crate::auth::ConnAuth>,
    /// Set by a command that must end the connection without a reply (`failCommand`'s
    /// `closeConnection`).
    pub close: Arc<std::sync::atomic::AtomicBool>,
}

impl ConnInfo {
    pub(crate) fn new(id: u64, peer: String) -> ConnInfo {
        ConnInfo {
            id,
            peer,
            auth: crate::auth::new_conn(),
            close: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }
}
