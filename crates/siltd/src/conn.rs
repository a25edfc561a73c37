//! What the server knows of one connection: its id, its peer and its authentication state.

use std::sync::Arc;

/// Per-connection facts commands may need.
#[derive(Debug, Clone)]
pub(crate) struct ConnInfo {
    pub id: u64,
    pub peer: String,
    /// Who the connection authenticated as, and its SCRAM conversation.
    pub auth: Arc<crate::auth::ConnAuth>,
}

impl ConnInfo {
    pub(crate) fn new(id: u64, peer: String) -> ConnInfo {
        ConnInfo {
            id,
            peer,
            auth: crate::auth::new_conn(),
        }
    }
}
