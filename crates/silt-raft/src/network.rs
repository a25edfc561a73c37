//! Messages between members: openraft's `RaftNetworkV2` over the [`Transport`] the server
//! implements, and the handling of a request that arrived ([`handle`]).
//!
//! A request is one [`Rpc`] (`types::encode`); its answer is the handler's `Result`, encoded
//! the same way. The transport only carries bytes: it owns connections, authentication and
//! timeouts on the wire.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, OptionalSend, RPCTypes};
use serde::{Deserialize, Serialize};

use crate::state::Sm;
use crate::types::{
    decode, encode, NodeId, Snapshot, SnapshotData, SnapshotMeta, TypeConfig, Vote,
};

/// Carries requests between members.
pub trait Transport: Send + Sync + 'static {
    /// Send `request` to member `target` at `addr` and wait at most `timeout` for its
    /// answer. Blocking; called on threads set aside for it. An `Err` means the member could
    /// not be reached (or did not answer in time).
    fn call(
        &self,
        target: NodeId,
        addr: &str,
        request: &[u8],
        timeout: Duration,
    ) -> io::Result<Vec<u8>>;
}

/// A request between members.
#[derive(Serialize, Deserialize)]
pub(crate) enum Rpc {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<TypeConfig>),
    PreVote(VoteRequest<TypeConfig>),
    Snapshot {
        vote: Vote,
        meta: SnapshotMeta,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    TransferLeader(TransferLeaderRequest<TypeConfig>),
}

/// Makes a client per target member.
#[derive(Clone)]
pub(crate) struct Network {
    pub(crate) me: NodeId,
    pub(crate) transport: Arc<dyn Transport>,
}

pub(crate) struct Client {
    me: NodeId,
    target: NodeId,
    addr: String,
    transport: Arc<dyn Transport>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Client {
        Client {
            me: self.me,
            target,
            addr: node.addr.clone(),
            transport: self.transport.clone(),
        }
    }
}

impl Client {
    async fn call<R: for<'de> Deserialize<'de> + Send + 'static>(
        &self,
        rpc: Rpc,
        action: RPCTypes,
        ttl: Duration,
    ) -> Result<R, RPCError<TypeConfig>> {
        let request = encode(&rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let (t, target, addr) = (self.transport.clone(), self.target, self.addr.clone());
        let job = tokio::task::spawn_blocking(move || t.call(target, &addr, &request, ttl));
        let answer = match tokio::time::timeout(ttl, job).await {
            Err(_) => {
                return Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.me,
                    target: self.target,
                    timeout: ttl,
                }))
            }
            Ok(Err(join)) => return Err(RPCError::Network(NetworkError::new(&join))),
            Ok(Ok(Err(e))) => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Ok(Ok(Ok(b))) => b,
        };
        let r: Result<R, RaftError<TypeConfig>> =
            decode(&answer).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        // The other member's Raft stopped: as good as unreachable.
        r.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
    }
}

impl RaftNetworkV2<TypeConfig> for Client {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(Rpc::Append(rpc), RPCTypes::AppendEntries, option.soft_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(Rpc::Vote(rpc), RPCTypes::Vote, option.soft_ttl())
            .await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(Rpc::PreVote(rpc), RPCTypes::Vote, option.soft_ttl())
            .await
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(
            Rpc::TransferLeader(req),
            RPCTypes::TransferLeader,
            option.soft_ttl(),
        )
        .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let rpc = Rpc::Snapshot {
            vote,
            meta: snapshot.meta,
            data: snapshot.snapshot.into_inner(),
        };
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            r = self.call::<SnapshotResponse<TypeConfig>>(rpc, RPCTypes::InstallSnapshot, option.hard_ttl()) => Ok(r?),
        }
    }
}

/// Answer a request from another member (its bytes), on the runtime behind `handle`.
pub(crate) fn handle(
    raft: &openraft::Raft<TypeConfig, Sm>,
    rt: &tokio::runtime::Handle,
    request: &[u8],
) -> io::Result<Vec<u8>> {
    let rpc: Rpc = decode(request)?;
    rt.block_on(async {
        match rpc {
            Rpc::Append(r) => encode(&raft.append_entries(r).await),
            Rpc::Vote(r) => encode(&raft.vote(r).await),
            Rpc::PreVote(r) => encode(&raft.pre_vote(r).await),
            Rpc::Snapshot { vote, meta, data } => {
                let snapshot = Snapshot {
                    meta,
                    snapshot: SnapshotData::new(data),
                };
                let r: Result<SnapshotResponse<TypeConfig>, RaftError<TypeConfig>> = raft
                    .install_full_snapshot(vote, snapshot)
                    .await
                    .map_err(RaftError::Fatal);
                encode(&r)
            }
            Rpc::TransferLeader(r) => {
                let r: Result<TransferLeaderResponse<TypeConfig>, RaftError<TypeConfig>> = raft
                    .handle_transfer_leader(r)
                    .await
                    .map_err(RaftError::Fatal);
                encode(&r)
            }
        }
    })
}
