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
use openraft::{OptionalSend, RPCTypes};
use serde::{Deserialize, Serialize};

use crate::snapshots::Snapshots;
use crate::state::Sm;
use crate::types::{
    decode, encode, MemberInfo, NodeId, Snapshot, SnapshotData, SnapshotMeta, TypeConfig, Vote,
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
    /// A piece of a snapshot's data file at `offset`; the last (`done`) asks the member to
    /// install it and answers `Some` response (the others `None`).
    SnapshotChunk {
        vote: Vote,
        meta: SnapshotMeta,
        offset: u64,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
        done: bool,
    },
    TransferLeader(TransferLeaderRequest<TypeConfig>),
}

/// The answer to an [`Rpc::Append`]: openraft's, and whether the member is empty (no log, no
/// snapshot, nothing applied) while the leader's request assumes it holds entries: a member
/// that restarted without its data (see [`rejoin`]).
#[derive(Serialize, Deserialize)]
struct AppendAnswer {
    answer: Result<AppendEntriesResponse<TypeConfig>, RaftError<TypeConfig>>,
    empty: bool,
}

/// This member's Raft while it runs (the clients need it to let an emptied member rejoin);
/// emptied at shutdown, since the Raft holds the clients.
pub(crate) type RaftCell = Arc<parking_lot::Mutex<Option<openraft::Raft<TypeConfig, Sm>>>>;

/// Makes a client per target member.
#[derive(Clone)]
pub(crate) struct Network {
    pub(crate) me: NodeId,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) raft: RaftCell,
}

pub(crate) struct Client {
    me: NodeId,
    target: NodeId,
    addr: String,
    transport: Arc<dyn Transport>,
    raft: RaftCell,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, node: &MemberInfo) -> Client {
        Client {
            me: self.me,
            target,
            addr: node.addr.clone(),
            transport: self.transport.clone(),
            raft: self.raft.clone(),
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
        let r: Result<R, RaftError<TypeConfig>> = self.call_raw(rpc, action, ttl).await?;
        // The other member's Raft stopped: as good as unreachable.
        r.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
    }

    /// Send `rpc` and decode its answer as an `A`.
    async fn call_raw<A: for<'de> Deserialize<'de> + Send + 'static>(
        &self,
        rpc: Rpc,
        action: RPCTypes,
        ttl: Duration,
    ) -> Result<A, RPCError<TypeConfig>> {
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
        decode(&answer).map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }
}

impl RaftNetworkV2<TypeConfig> for Client {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let a: AppendAnswer = self
            .call_raw(Rpc::Append(rpc), RPCTypes::AppendEntries, option.soft_ttl())
            .await?;
        if a.empty {
            let raft = self.raft.lock().clone();
            if let Some(raft) = raft {
                rejoin(&raft, self.target).await;
            }
        }
        a.answer
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
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
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            r = self.send_snapshot(vote, snapshot, option.hard_ttl()) => r,
        }
    }
}

/// Bytes of a snapshot per request.
const CHUNK: usize = 1 << 20;

impl Client {
    /// Send a snapshot's file in chunks, each within `ttl` (the last includes its install).
    async fn send_snapshot(
        &self,
        vote: Vote,
        snapshot: Snapshot,
        ttl: Duration,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let unreachable = |e: io::Error| StreamingError::Unreachable(Unreachable::new(&e));
        let path = snapshot.snapshot.path.clone();
        let mut file =
            tokio::task::block_in_place(|| std::fs::File::open(&path)).map_err(unreachable)?;
        let total = tokio::task::block_in_place(|| file.metadata())
            .map_err(unreachable)?
            .len();
        tracing::info!(
            target = self.target,
            index = snapshot.meta.last_log_id.as_ref().map(|l| l.index),
            bytes = total,
            "sending a snapshot"
        );
        let mut offset = 0u64;
        loop {
            let data = tokio::task::block_in_place(|| -> io::Result<Vec<u8>> {
                use std::io::Read;
                let mut b = Vec::with_capacity(CHUNK);
                (&mut file).take(CHUNK as u64).read_to_end(&mut b)?;
                Ok(b)
            })
            .map_err(unreachable)?;
            let n = data.len() as u64;
            let done = offset + n >= total;
            let rpc = Rpc::SnapshotChunk {
                vote,
                meta: snapshot.meta.clone(),
                offset,
                data,
                done,
            };
            let answer: Option<SnapshotResponse<TypeConfig>> =
                self.call(rpc, RPCTypes::InstallSnapshot, ttl).await?;
            offset += n;
            if done {
                return answer.ok_or_else(|| {
                    unreachable(io::Error::other("the snapshot was not installed"))
                });
            }
        }
    }
}

/// Member `target` answered that it is empty although this leader's replication assumes it
/// holds entries: it restarted without its data (a wiped data directory). Raft assumes a
/// member never loses what it acknowledged, so openraft stops replicating to it. Let it
/// start again from nothing (a snapshot, then the log) only when that loses nothing: every
/// committed entry is held by a majority of the voters without it. Otherwise it must be
/// removed and added again, and the log says so.
async fn rejoin(raft: &openraft::Raft<TypeConfig, Sm>, target: NodeId) {
    use openraft::async_runtime::WatchReceiver;
    let m = raft.metrics().borrow_watched().clone();
    let Some(replication) = m.replication.as_ref() else {
        return;
    };
    if replication.get(&target).cloned().flatten().is_none() {
        // A member being added: nothing is known of its log, so nothing reverted.
        return;
    }
    let committed = m.local_committed.map(|l| l.index);
    let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
    let holding = voters
        .iter()
        .filter(|v| **v != target)
        .filter(|v| {
            let matched = if **v == m.id {
                m.last_log_index
            } else {
                replication.get(*v).cloned().flatten().map(|l| l.index)
            };
            matched >= committed
        })
        .count();
    if holding < voters.len() / 2 + 1 {
        tracing::warn!(
            member = target,
            "a member restarted without its data, and the others do not hold every committed \
             entry without it: remove it from the set and add it again"
        );
        return;
    }
    match raft.trigger().allow_next_revert(&target, true).await {
        Ok(Ok(())) => tracing::info!(
            member = target,
            "a member restarted without its data: it catches up from nothing"
        ),
        Ok(Err(e)) => tracing::debug!(member = target, error = %e, "no rejoin"),
        Err(e) => tracing::debug!(member = target, error = %e, "no rejoin"),
    }
}

/// Answer a request from another member (its bytes), on the runtime behind `handle`.
pub(crate) fn handle(
    raft: &openraft::Raft<TypeConfig, Sm>,
    rt: &tokio::runtime::Handle,
    snapshots: &Snapshots,
    request: &[u8],
) -> io::Result<Vec<u8>> {
    let rpc: Rpc = decode(request)?;
    use openraft::async_runtime::WatchReceiver;
    rt.block_on(async {
        match rpc {
            Rpc::Append(r) => {
                let m = raft.metrics().borrow_watched().clone();
                let empty = r.prev_log_id.is_some()
                    && m.last_log_index.is_none()
                    && m.snapshot.is_none()
                    && m.last_applied.is_none();
                let answer = raft.append_entries(r).await;
                encode(&AppendAnswer { answer, empty })
            }
            Rpc::Vote(r) => encode(&raft.vote(r).await),
            Rpc::PreVote(r) => encode(&raft.pre_vote(r).await),
            Rpc::SnapshotChunk {
                vote,
                meta,
                offset,
                data,
                done,
            } => {
                snapshots.receive(meta.last_log_id.as_ref(), offset, &data)?;
                if !done {
                    return encode(&Ok::<_, RaftError<TypeConfig>>(
                        None::<SnapshotResponse<TypeConfig>>,
                    ));
                }
                let snapshot = Snapshot {
                    snapshot: snapshots.received(&meta)?,
                    meta,
                };
                let r: Result<Option<SnapshotResponse<TypeConfig>>, RaftError<TypeConfig>> = raft
                    .install_full_snapshot(vote, snapshot)
                    .await
                    .map(Some)
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
