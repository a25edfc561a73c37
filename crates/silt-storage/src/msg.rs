//! Messages: what a write becomes. A message is injected at the root, waits in buffers and is
//! applied to a leaf entry in MSN order. Reads apply pending messages to what they return.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::bytes::{Dec, DecResult};
use crate::ids::{Msn, Xid};
use crate::width::len_u32;

/// What an update function decides for one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Store this value.
    Set(Vec<u8>),
    /// Remove the key.
    Delete,
    /// Leave the key as it is (absent stays absent).
    NoChange,
}

/// A deterministic update function: `(key, current value or None, argument) -> outcome`.
/// It is re-run during recovery and may run long after the write was acknowledged, so it must
/// depend on nothing but its inputs.
pub type UpdateFn = Arc<dyn Fn(&[u8], Option<&[u8]>, &[u8]) -> UpdateOutcome + Send + Sync>;

/// The update functions an environment knows, by stable numeric id. Ids are stored in
/// messages and log records, so an id must keep its meaning across releases.
#[derive(Clone, Default)]
pub struct UpdateRegistry {
    fns: HashMap<u32, UpdateFn>,
    /// Functions registered with [`UpdateRegistry::register_keeping`].
    keeping: HashSet<u32>,
    on_panic: Option<PanicHook>,
}

/// Told `(function id, panic message)` when an update function panics.
pub(crate) type PanicHook = Arc<dyn Fn(u32, &str) + Send + Sync>;

impl std::fmt::Debug for UpdateRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<_> = self.fns.keys().collect();
        ids.sort();
        f.debug_struct("UpdateRegistry").field("ids", &ids).finish()
    }
}

impl UpdateRegistry {
    /// An empty registry.
    pub fn new() -> UpdateRegistry {
        UpdateRegistry::default()
    }

    /// Register `f` under `id`, replacing any earlier function with that id.
    pub fn register(
        &mut self,
        id: u32,
        f: impl Fn(&[u8], Option<&[u8]>, &[u8]) -> UpdateOutcome + Send + Sync + 'static,
    ) {
        self.fns.insert(id, Arc::new(f));
        self.keeping.remove(&id);
    }

    /// Register `f` under `id` as a function that never changes whether a key exists: it
    /// runs only on keys that have a value, and an outcome of `Delete` is taken as
    /// `NoChange`. Its messages then have a known effect on the key count (none), so they
    /// leave subtree counts exact while they wait in buffers (`tree/count.rs`).
    pub fn register_keeping(
        &mut self,
        id: u32,
        f: impl Fn(&[u8], Option<&[u8]>, &[u8]) -> UpdateOutcome + Send + Sync + 'static,
    ) {
        self.fns.insert(id, Arc::new(f));
        self.keeping.insert(id);
    }

    /// Whether function `id` was registered with [`UpdateRegistry::register_keeping`].
    pub(crate) fn keeps(&self, id: u32) -> bool {
        self.keeping.contains(&id)
    }

    /// Call `hook` whenever an update function panics (the message then changes nothing,
    /// like an update that fails; see [`UpdateRegistry`]'s `run`).
    pub fn on_panic(&mut self, hook: impl Fn(u32, &str) + Send + Sync + 'static) {
        self.on_panic = Some(Arc::new(hook));
    }

    pub(crate) fn check(&self, id: u32) -> Result<()> {
        if self.fns.contains_key(&id) {
            Ok(())
        } else {
            Err(Error::UnknownUpdateFn(id))
        }
    }

    /// Run function `id`. An unregistered id cannot reach here for messages created in this
    /// process (checked at injection); for recovered messages it is checked at open.
    ///
    /// Update functions run under a tree's write lock, in the middle of flushes, so a panic
    /// must not unwind from here: it is caught (the function only read its inputs, so nothing
    /// is half-changed), the key is left as it was, and the panic hook is told.
    pub(crate) fn run(&self, id: u32, key: &[u8], old: Option<&[u8]>, arg: &[u8]) -> UpdateOutcome {
        let Some(f) = self.fns.get(&id) else {
            return UpdateOutcome::NoChange;
        };
        let keeping = self.keeping.contains(&id);
        if keeping && old.is_none() {
            return UpdateOutcome::NoChange;
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(key, old, arg))) {
            Ok(UpdateOutcome::Delete) if keeping => UpdateOutcome::NoChange,
            Ok(o) => o,
            Err(p) => {
                let msg = crate::poison::panic_message(&*p);
                match &self.on_panic {
                    Some(hook) => hook(id, &msg),
                    None => {
                        tracing::error!(func = id, panic = %msg, "an update function panicked; the key is unchanged")
                    }
                }
                UpdateOutcome::NoChange
            }
        }
    }
}

/// The effect of a keyed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MsgKind {
    /// Set the value.
    Insert(Box<[u8]>),
    /// Set the value of a key the writer knows exists: the same effect as `Insert`, but the
    /// row count charged at injection is 0 instead of 1.
    Replace(Box<[u8]>),
    /// Set the value only if the key is absent.
    InsertNoOverwrite(Box<[u8]>),
    /// Remove the key.
    Delete,
    /// Run an update function.
    Update { func: u32, arg: Box<[u8]> },
    /// Promote the message's transaction's provisional version of the key to committed.
    /// `rows` is the change in the row count charged when the commit was injected (the
    /// transaction's estimate of what its writes to the key did: -1, 0 or 1). `sure`: every
    /// write of the transaction to the key had a known effect on the key count, so `rows` is
    /// exact (`tree/count.rs`); stored as a second body byte only when false.
    Commit { rows: i8, sure: bool },
    /// Drop the message's transaction's provisional version of the key.
    Abort,
}

/// Type tags of messages, on disk and in the log.
pub(crate) mod tag {
    pub(crate) const INSERT: u8 = 1;
    pub(crate) const DELETE: u8 = 2;
    pub(crate) const REPLACE: u8 = 3;
    pub(crate) const INSERT_NO_OVERWRITE: u8 = 11;
    pub(crate) const UPDATE: u8 = 14;
    pub(crate) const UPDATE_BROADCAST: u8 = 15;
    pub(crate) const COMMIT: u8 = 20;
    pub(crate) const ABORT: u8 = 21;
    /// Set on the tag of a data message (insert, delete, replace, insert-no-overwrite,
    /// update) written inside a transaction: its effect is provisional.
    pub(crate) const PROVISIONAL: u8 = 0x40;

    /// The message type without the provisional flag, and the flag.
    #[inline]
    pub(crate) fn split(t: u8) -> (u8, bool) {
        (t & !PROVISIONAL, t & PROVISIONAL != 0)
    }
}

impl MsgKind {
    pub(crate) fn tag(&self) -> u8 {
        match self {
            MsgKind::Insert(_) => tag::INSERT,
            MsgKind::Replace(_) => tag::REPLACE,
            MsgKind::Delete => tag::DELETE,
            MsgKind::InsertNoOverwrite(_) => tag::INSERT_NO_OVERWRITE,
            MsgKind::Update { .. } => tag::UPDATE,
            MsgKind::Commit { .. } => tag::COMMIT,
            MsgKind::Abort => tag::ABORT,
        }
    }

    /// Whether this kind sets, removes or updates a value (as opposed to finishing a
    /// transaction's provisional version).
    pub(crate) fn is_data(&self) -> bool {
        !matches!(self, MsgKind::Commit { .. } | MsgKind::Abort)
    }

    /// Append the payload as stored in a buffer (`lp` body).
    pub(crate) fn write_payload(&self, a: &mut Vec<u8>) {
        match self {
            MsgKind::Insert(v) | MsgKind::Replace(v) | MsgKind::InsertNoOverwrite(v) => {
                a.extend_from_slice(&len_u32(v.len()).to_le_bytes());
                a.extend_from_slice(v);
            }
            MsgKind::Delete | MsgKind::Abort => a.extend_from_slice(&0u32.to_le_bytes()),
            MsgKind::Commit { rows, sure: true } => {
                a.extend_from_slice(&1u32.to_le_bytes());
                a.push(*rows as u8);
            }
            MsgKind::Commit { rows, sure: false } => {
                a.extend_from_slice(&2u32.to_le_bytes());
                a.push(*rows as u8);
                a.push(1);
            }
            MsgKind::Update { func, arg } => {
                a.extend_from_slice(&(len_u32(arg.len()) + 4).to_le_bytes());
                a.extend_from_slice(&func.to_le_bytes());
                a.extend_from_slice(arg);
            }
        }
    }

    /// The message of type `t` whose payload body (without its length) is `body`.
    /// Check, without building it, that `body` is a valid body for message type `t`.
    pub(crate) fn check_body(t: u8, body: &[u8]) -> DecResult<()> {
        let (base, prov) = tag::split(t);
        match base {
            tag::INSERT | tag::REPLACE | tag::INSERT_NO_OVERWRITE | tag::DELETE => Ok(()),
            tag::UPDATE if body.len() >= 4 => Ok(()),
            tag::UPDATE => Err("update message shorter than its function id".into()),
            tag::COMMIT
                if !prov
                    && (body.len() == 1 || (body.len() == 2 && body[1] == 1))
                    && (body[0] as i8).abs() <= 1 =>
            {
                Ok(())
            }
            tag::ABORT if !prov && body.is_empty() => Ok(()),
            _ => Err(format!("unknown message type {t}")),
        }
    }

    pub(crate) fn from_body(t: u8, body: &[u8]) -> DecResult<MsgKind> {
        Ok(match tag::split(t).0 {
            tag::COMMIT => MsgKind::Commit {
                rows: body.first().map_or(0, |b| *b as i8),
                sure: body.len() < 2,
            },
            tag::ABORT => MsgKind::Abort,
            tag::INSERT => MsgKind::Insert(body.into()),
            tag::REPLACE => MsgKind::Replace(body.into()),
            tag::INSERT_NO_OVERWRITE => MsgKind::InsertNoOverwrite(body.into()),
            tag::DELETE => MsgKind::Delete,
            tag::UPDATE => {
                let mut b = Dec::new(body);
                let func = b.u32()?;
                let arg = b.take(b.remaining())?;
                MsgKind::Update {
                    func,
                    arg: arg.into(),
                }
            }
            t => return Err(format!("unknown message type {t}")),
        })
    }

    /// Bytes this message adds to a serialized buffer (besides its key).
    pub(crate) fn payload_len(&self) -> usize {
        match self {
            MsgKind::Insert(v) | MsgKind::Replace(v) | MsgKind::InsertNoOverwrite(v) => v.len() + 4,
            MsgKind::Delete | MsgKind::Abort => 4,
            MsgKind::Commit { sure: true, .. } => 5,
            MsgKind::Commit { sure: false, .. } => 6,
            MsgKind::Update { arg, .. } => arg.len() + 8,
        }
    }

    /// Apply to the current value of `key`. Returns the new value (None = absent). A commit
    /// or abort changes no value (see `tree::le` for what they do to versions).
    pub(crate) fn apply(
        &self,
        fns: &UpdateRegistry,
        key: &[u8],
        old: Option<Box<[u8]>>,
    ) -> Option<Box<[u8]>> {
        match self {
            MsgKind::Insert(v) | MsgKind::Replace(v) => Some(v.clone()),
            MsgKind::InsertNoOverwrite(v) => old.or_else(|| Some(v.clone())),
            MsgKind::Delete => None,
            MsgKind::Update { func, arg } => run_update(fns, *func, key, old, arg),
            MsgKind::Commit { .. } | MsgKind::Abort => old,
        }
    }
}

pub(crate) fn run_update(
    fns: &UpdateRegistry,
    func: u32,
    key: &[u8],
    old: Option<Box<[u8]>>,
    arg: &[u8],
) -> Option<Box<[u8]>> {
    match fns.run(func, key, old.as_deref(), arg) {
        UpdateOutcome::Set(v) => Some(v.into_boxed_slice()),
        UpdateOutcome::Delete => None,
        UpdateOutcome::NoChange => old,
    }
}

/// A keyed message waiting in a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub msn: Msn,
    pub xid: Xid,
    pub kind: MsgKind,
    /// A data message written inside transaction `xid`: its effect is provisional.
    pub prov: bool,
}

impl Pending {
    /// The type tag as stored (with the provisional flag).
    pub(crate) fn stored_tag(&self) -> u8 {
        self.kind.tag() | if self.prov { tag::PROVISIONAL } else { 0 }
    }
}

/// A broadcast update waiting in a buffer: applies `func` to every key below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Broadcast {
    pub msn: Msn,
    pub xid: Xid,
    pub func: u32,
    pub arg: Box<[u8]>,
}

/// Fixed bytes a message costs in a serialized buffer besides key and payload:
/// type (1) + msn (8) + xid (8) + key length (4).
pub(crate) const MSG_HEADER_BYTES: usize = 21;
