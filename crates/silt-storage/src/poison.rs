//! The environment's poison state, and the guards that set it.
//!
//! Some failures leave memory and disk in states that must not be built on: a log write that
//! failed (records after it can no longer be made durable in order), a background write-back
//! or checkpoint that failed, or a thread that unwound while it was changing a tree (the tree
//! may be half-built and must never be written). Any of them poisons the environment once,
//! with a typed [`PoisonCause`]. From then on every write, the log and every checkpoint refuse
//! to proceed with [`Error::Poisoned`] naming the cause; reads of resident and on-disk data go
//! on; reopening the directory recovers from the last checkpoint and the log.
//!
//! [`TreeLock`] is the per-dictionary tree lock: its write guard poisons the environment if it
//! is dropped while its thread is unwinding, so a half-mutated tree is never flushed, evicted
//! or checkpointed. [`spawn_worker`] runs an engine thread under a guard that poisons the
//! environment and logs the cause if the thread panics.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use parking_lot::Mutex;

use crate::error::{Error, PoisonCause, Result};

/// The shared poison flag of one environment.
#[derive(Debug, Default)]
pub(crate) struct PoisonState {
    set: AtomicBool,
    cause: Mutex<Option<PoisonCause>>,
}

impl PoisonState {
    /// `Err(Poisoned)` once poisoned.
    pub(crate) fn check(&self) -> Result<()> {
        if !self.set.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self.cause.lock() {
            Some(c) => Err(Error::Poisoned(c.clone())),
            None => Ok(()),
        }
    }

    /// Poison with `cause` (the first cause wins) and log it.
    pub(crate) fn poison(&self, cause: PoisonCause) {
        let mut g = self.cause.lock();
        if g.is_none() {
            tracing::error!(cause = %cause, "the storage environment is poisoned; writes are refused until it is reopened");
            *g = Some(cause);
            self.set.store(true, Ordering::Release);
        }
    }

    /// The cause, if poisoned.
    pub(crate) fn cause(&self) -> Option<PoisonCause> {
        self.cause.lock().clone()
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a non-text panic payload)".to_string()
    }
}

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(unnamed)")
        .to_string()
}

/// A dictionary's tree lock. Reading is plain; the write guard poisons the environment if it
/// is dropped during an unwind.
///
/// It is the standard library's futex lock rather than `parking_lot`'s: with many more
/// threads than cores, `parking_lot`'s waiters spin through `sched_yield` while the holder is
/// descheduled, and that spinning cost writers a third of the server's time at 64 clients
/// on two cores; the futex lock sleeps instead. (The standard lock's own poisoning is not
/// used: the environment's poison state is.)
pub(crate) struct TreeLock<T> {
    lock: RwLock<T>,
    poison: Arc<PoisonState>,
}

impl<T> TreeLock<T> {
    pub(crate) fn new(t: T, poison: Arc<PoisonState>) -> TreeLock<T> {
        TreeLock {
            lock: RwLock::new(t),
            poison,
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        self.lock.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> TreeMut<'_, T> {
        TreeMut {
            guard: self.lock.write().unwrap_or_else(|e| e.into_inner()),
            poison: &self.poison,
        }
    }
}

/// Write access to a tree; see [`TreeLock`].
pub(crate) struct TreeMut<'a, T> {
    guard: RwLockWriteGuard<'a, T>,
    poison: &'a PoisonState,
}

impl<T> Deref for TreeMut<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for TreeMut<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for TreeMut<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.poison.poison(PoisonCause::Panic {
                thread: thread_name(),
                message: "unwound while holding a tree for writing".into(),
            });
        }
    }
}

/// Start an engine worker thread named `name` running `body`. If it panics, the environment
/// is poisoned with the panic's message (and logged), instead of the thread vanishing.
pub(crate) fn spawn_worker(
    name: String,
    poison: Arc<PoisonState>,
    body: impl FnOnce() + Send + 'static,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
                poison.poison(PoisonCause::Panic {
                    thread: name,
                    message: panic_message(&*p),
                });
            }
        })
        .expect("spawning an engine worker thread")
}

/// Test hooks that make engine workers fail on purpose, to exercise the poison path from the
/// outside (a server's `configureFailPoint`). Off unless set.
#[derive(Debug, Default)]
pub struct FailPoints {
    /// The next background worker iteration panics.
    pub worker_panic: AtomicBool,
}
