//! Open cursors: the server-side state behind `find`/`aggregate` batches, `getMore` and
//! `killCursors`, with an idle timeout.
//!
//! As in mongod, a cursor belongs to the logical session and the user that opened it
//! ([`Owner`]): a `getMore` or `killCursors` from another session or user is refused (13).
//! Dropping or renaming its collection, or dropping its database, kills it
//! ([`Cursors::kill_namespace`]): the next `getMore` answers 175 QueryPlanKilled and the cursor
//! is gone.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, Document};
use parking_lot::Mutex;
use silt_bson::compare::{current_collation, CollationScope, StringOrder};
use silt_collection::MatchSource;
use silt_query::matcher::Matcher;
use silt_query::projection::Projection;
use silt_query::{QResult, QueryError};

use crate::errors::coll_err;

/// A stream of result documents.
pub(crate) trait DocSource: Send {
    /// The next document, or `None` at the end (for now, if tailable).
    fn next_doc(&mut self) -> QResult<Option<Document>>;

    /// A tailable cursor's source: reaching the end does not close the cursor, later
    /// documents are returned by later `getMore`s.
    fn tailable(&self) -> bool {
        false
    }

    /// A tailable `awaitData` cursor: an empty `getMore` waits for new documents.
    fn await_data(&self) -> bool {
        false
    }

    /// An `awaitData` cursor with nothing to return: wait until more may have come, at most
    /// until `until`.
    fn wait(&self, until: Instant) {
        std::thread::sleep(
            Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())),
        );
    }

    /// A change stream: dropping or renaming its collection is an event it reports, not the
    /// end of the cursor.
    fn survives_drop(&self) -> bool {
        false
    }

    /// The resume token a change stream's batch ends at (`postBatchResumeToken`).
    fn resume_token(&self) -> Option<Document> {
        None
    }

    /// Move the source's `maxTimeMS` deadline (a cursor's time is spent only while working).
    fn set_deadline(&mut self, _deadline: Option<Instant>) {}

    /// Whether the source knows, without reading, that it has nothing more (a limit reached).
    /// Otherwise a batch that ends at the last document leaves the cursor open, as mongod's
    /// does, and the next `getMore` returns an empty batch and closes it.
    fn known_exhausted(&self) -> bool {
        false
    }
}

/// A tailable cursor over a capped collection: documents after the last one returned, in
/// insertion order, read afresh on every call (so documents inserted since appear).
pub(crate) struct TailSource {
    pub coll: Arc<silt_collection::Collection>,
    pub matcher: Arc<Matcher>,
    pub last_key: Option<Vec<u8>>,
    pub await_data: bool,
}

impl DocSource for TailSource {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        use std::ops::Bound;
        loop {
            let lo = match &self.last_key {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Unbounded,
            };
            let next = self
                .coll
                .scan(lo, Bound::Unbounded)
                .next_doc()
                .map_err(coll_err)?;
            let Some((k, d)) = next else { return Ok(None) };
            self.last_key = Some(k);
            if self.matcher.try_matches(&d)? {
                return Ok(Some(d));
            }
        }
    }

    fn tailable(&self) -> bool {
        true
    }

    fn await_data(&self) -> bool {
        self.await_data
    }
}

/// A change stream's error after which the driver may resume carries the
/// `ResumableChangeStreamError` label, and one it must not resume after (280, 286) the
/// `NonResumableChangeStreamError` label, as mongod 4.4+ labels them.
pub(crate) fn resumable_label(e: QueryError, change_stream: bool) -> QueryError {
    let label = match e.code {
        _ if !change_stream => return e,
        280 | 286 => "NonResumableChangeStreamError",
        c if crate::error_labels::resumable_change_stream(c) => {
            crate::error_labels::RESUMABLE_CHANGE_STREAM
        }
        _ => return e,
    };
    e.with_info(bson::doc! { "errorLabels": [label] })
}

/// A change stream batch's resume token: the source's, unless an event was held back for
/// the next batch (then the last event returned is where the batch ends).
fn batch_token(cur: &OpenCursor, batch: &[Document]) -> Option<Document> {
    if cur.held.is_some() {
        return batch
            .last()
            .and_then(|d| d.get_document("_id").ok().cloned())
            .or_else(|| cur.source.resume_token());
    }
    cur.source.resume_token()
}

/// Documents already computed (sorted results, aggregation output).
pub(crate) struct VecSource(pub VecDeque<Document>);

impl DocSource for VecSource {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        Ok(self.0.pop_front())
    }
}

impl DocSource for MatchSource {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        Ok(self.next_match().map_err(coll_err)?.map(|(_, d)| d))
    }

    fn set_deadline(&mut self, deadline: Option<Instant>) {
        MatchSource::set_deadline(self, deadline);
    }
}

/// Each document of a `$text` query with its score under `silt_query::text::SCORE_FIELD`,
/// for `{$meta: "textScore"}` sorts and projections (removed again before a client sees it).
pub(crate) struct Scored {
    pub inner: Box<dyn DocSource>,
    pub text: Arc<silt_query::text::BoundText>,
}

impl DocSource for Scored {
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.inner.set_deadline(deadline);
    }

    fn next_doc(&mut self) -> QResult<Option<Document>> {
        Ok(self.inner.next_doc()?.map(|mut d| {
            let score = self.text.score(&d);
            d.insert(silt_query::text::SCORE_FIELD, score);
            d
        }))
    }
}

/// Skip, limit and projection over another source.
pub(crate) struct Shaped {
    pub inner: Box<dyn DocSource>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub returned: u64,
    pub projection: Option<Projection>,
    pub matcher: Option<Arc<Matcher>>,
    /// Fields that get the document's `$text` score (`{$meta: "textScore"}` in the
    /// projection), added after projecting.
    pub text_meta: Vec<String>,
}

impl DocSource for Shaped {
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.inner.set_deadline(deadline);
    }

    fn tailable(&self) -> bool {
        self.inner.tailable()
    }

    fn known_exhausted(&self) -> bool {
        self.limit.is_some_and(|l| self.returned >= l) || self.inner.known_exhausted()
    }

    fn await_data(&self) -> bool {
        self.inner.await_data()
    }

    fn wait(&self, until: Instant) {
        self.inner.wait(until)
    }

    fn next_doc(&mut self) -> QResult<Option<Document>> {
        while self.skip > 0 {
            if self.inner.next_doc()?.is_none() {
                return Ok(None);
            }
            self.skip -= 1;
        }
        if self.limit.is_some_and(|l| self.returned >= l) {
            return Ok(None);
        }
        let Some(mut d) = self.inner.next_doc()? else {
            return Ok(None);
        };
        self.returned += 1;
        let score = d.remove(silt_query::text::SCORE_FIELD);
        let mut d = match &self.projection {
            Some(p) => p.apply(&d, self.matcher.as_deref())?,
            None => d,
        };
        for f in &self.text_meta {
            d.insert(f.clone(), score.clone().unwrap_or(Bson::Double(0.0)));
        }
        Ok(Some(d))
    }
}

/// What a `getMore` asks for.
pub(crate) struct GetMore<'a> {
    pub id: i64,
    pub ns: &'a str,
    pub batch_size: Option<usize>,
    /// The getMore's own maxTimeMS: how long an awaitData cursor waits for new documents (a
    /// second without it); refused for any other cursor.
    pub max_time: Option<Duration>,
    /// `failGetMoreAfterCursorCheckout`, when test commands are on.
    pub test_failure: Option<&'a crate::fail_command::GetMoreFailure>,
}

/// Who opened a cursor: the `lsid` of the command's session (none outside a session) and the
/// user the connection was authenticated as. Only the same owner may continue or kill it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Owner {
    pub session: Option<Document>,
    pub user: Option<(String, String)>,
}

impl Owner {
    /// The session as mongod prints a logical session id: `<id> - <uid> -  - `, where the uid
    /// is the base64 SHA-256 of the user's name (of the empty string without a user).
    fn session_text(&self) -> String {
        use base64::Engine;
        use sha2::Digest;
        let Some(lsid) = &self.session else {
            return "none".into();
        };
        let id = match lsid.get("id") {
            Some(Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice())
                .map(|u| bson::Uuid::from_bytes(u).to_string())
                .unwrap_or_else(|_| format!("{b}")),
            other => format!("{other:?}"),
        };
        let who = self
            .user
            .as_ref()
            .map(|(u, d)| format!("{u}@{d}"))
            .unwrap_or_default();
        let uid = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(who));
        format!("{id} - {uid} -  - ")
    }

    /// `Ok` if `self` (a getMore's) may continue cursor `id`, which `owner` opened. With
    /// `--auth`, a different session is 13; without, mongod's 50736-50738 say which side
    /// lacks a session or that they differ. Then a different user is 13.
    fn may_continue(&self, id: i64, owner: &Owner, auth: bool) -> QResult<()> {
        if self.session != owner.session {
            if auth {
                return Err(QueryError::unauthorized(format!(
                    "Cursor session id ({}) is not the same as the operation context's session id ({})",
                    owner.session_text(),
                    self.session_text()
                )));
            }
            let mine = self.session_text();
            let theirs = owner.session_text();
            return Err(match (&owner.session, &self.session) {
                (None, _) => QueryError::located(
                    50736,
                    format!("Cannot run getMore on cursor {id}, which was not created in a session, in session {mine}"),
                ),
                (_, None) => QueryError::located(
                    50737,
                    format!("Cannot run getMore on cursor {id}, which was created in session {theirs}, without an lsid"),
                ),
                _ => QueryError::located(
                    50738,
                    format!("Cannot run getMore on cursor {id}, which was created in session {theirs}, in session {mine}"),
                ),
            });
        }
        if !self.may_kill(owner) {
            return Err(QueryError::unauthorized(format!(
                "cursor id {id} was not created by the authenticated user"
            )));
        }
        Ok(())
    }

    /// Whether `self` (a killCursors') may kill a cursor `owner` opened: the same user (the
    /// session does not matter, as in mongod).
    fn may_kill(&self, owner: &Owner) -> bool {
        self.user == owner.user
    }
}

/// A cursor between batches.
pub(crate) struct OpenCursor {
    pub ns: String,
    owner: Owner,
    /// Set when its collection or database was dropped or renamed: why it was killed.
    killed: Option<String>,
    pub source: Box<dyn DocSource>,
    /// A document read past the end of the last batch (it did not fit).
    pub held: Option<Document>,
    last_used: Instant,
    /// `noCursorTimeout`: never closed for being idle.
    no_timeout: bool,
    /// The collation of the command that opened the cursor (the scope current then), entered
    /// again for every `getMore` so that its filter, sort and groups keep comparing the same.
    collation: Option<Arc<dyn StringOrder>>,
    /// What is left of the opening command's `maxTimeMS`: spent only while a batch is being
    /// produced, not while the client is away between `getMore`s (mongod's rule).
    budget: Option<Duration>,
}

impl OpenCursor {
    /// A cursor of `owner` over `source`, under the collation the command runs with.
    fn new(owner: Owner, ns: &str, source: Box<dyn DocSource>) -> OpenCursor {
        OpenCursor {
            ns: ns.to_string(),
            owner,
            killed: None,
            source,
            held: None,
            last_used: Instant::now(),
            no_timeout: false,
            collation: current_collation(),
            budget: None,
        }
    }
}

/// Largest reply batch in bytes (MongoDB's 16 MiB less room for the envelope).
pub(crate) const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024 - 16 * 1024;
/// Documents in a first batch when the client does not say (MongoDB's default).
pub(crate) const DEFAULT_FIRST_BATCH: usize = 101;

/// Every open cursor of the server. Lock order: the map, then one cursor; a `getMore` holds
/// its cursor with the map released and drops it before taking the map again.
pub(crate) struct Cursors {
    map: Mutex<HashMap<i64, Arc<Mutex<OpenCursor>>>>,
    next: AtomicI64,
    pub timeout: Duration,
}

impl Cursors {
    pub(crate) fn new(timeout: Duration) -> Cursors {
        // Start ids at a time-derived value so that ids from before a restart are unlikely
        // to be reused.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_nanos() & 0x0000_ffff_ffff_ffff).ok())
            .unwrap_or(1);
        Cursors {
            map: Mutex::new(HashMap::new()),
            next: AtomicI64::new(seed.max(1) << 8),
            timeout,
        }
    }

    /// Fill one batch from `cur`: up to `limit` documents (0: no document limit) and
    /// `MAX_BATCH_BYTES`. Returns the batch and whether the source is exhausted.
    pub(crate) fn fill(cur: &mut OpenCursor, limit: usize) -> QResult<(Vec<Document>, bool)> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        loop {
            if limit > 0 && out.len() >= limit {
                break;
            }
            let d = match cur.held.take() {
                Some(d) => d,
                None => match cur.source.next_doc()? {
                    Some(d) => d,
                    None => return Ok((out, !cur.source.tailable())),
                },
            };
            // As an element of the reply's batch array: its type byte, its index as a
            // string with a terminating NUL, and the document.
            let len = doc_len(&d) + 2 + out.len().checked_ilog10().unwrap_or(0) as usize + 1;
            if !out.is_empty() && bytes + len > MAX_BATCH_BYTES {
                cur.held = Some(d);
                break;
            }
            bytes += len;
            out.push(d);
        }
        // A full batch does not read ahead: the cursor closes once its source has said it is
        // done (mongod's rule), unless the source knows it already.
        let done = cur.held.is_none() && cur.source.known_exhausted() && !cur.source.tailable();
        Ok((out, done))
    }

    /// Register a cursor; returns its id.
    fn register(&self, cur: OpenCursor) -> i64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.map.lock().insert(id, Arc::new(Mutex::new(cur)));
        id
    }

    /// Start a cursor: compute the first batch, register the rest if anything remains.
    /// `deadline` is the command's `maxTimeMS` deadline: what remains of it after this batch
    /// is the cursor's budget for its `getMore`s.
    pub(crate) fn first_batch(
        &self,
        owner: Owner,
        ns: &str,
        source: Box<dyn DocSource>,
        batch_size: Option<usize>,
        single_batch: bool,
        deadline: Option<Instant>,
    ) -> QResult<(Vec<Document>, i64)> {
        let mut cur = OpenCursor::new(owner, ns, source);
        if batch_size == Some(0) && !single_batch {
            // An empty first batch: the client will ask with getMore.
            cur.budget = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            return Ok((Vec::new(), self.register(cur)));
        }
        let (batch, done) = Cursors::fill(&mut cur, batch_size.unwrap_or(DEFAULT_FIRST_BATCH))?;
        if done || single_batch {
            return Ok((batch, 0));
        }
        cur.budget = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        Ok((batch, self.register(cur)))
    }

    /// A change stream's first batch (`change_stream.rs`): its events, the cursor id and the
    /// batch's resume token. The cursor stays open (until invalidated) even when empty.
    pub(crate) fn first_events(
        &self,
        owner: Owner,
        ns: &str,
        source: Box<dyn DocSource>,
        batch_size: Option<usize>,
    ) -> QResult<(Vec<Document>, i64, Option<Document>)> {
        let mut cur = OpenCursor::new(owner, ns, source);
        let (batch, done) = if batch_size == Some(0) {
            (Vec::new(), false)
        } else {
            Cursors::fill(&mut cur, batch_size.unwrap_or(DEFAULT_FIRST_BATCH))?
        };
        let token = batch_token(&cur, &batch);
        if done {
            return Ok((batch, 0, token));
        }
        Ok((batch, self.register(cur), token))
    }

    /// The next batch of a cursor for a getMore by `owner` (`auth`: whether `--auth` is on).
    pub(crate) fn get_more(
        &self,
        owner: &Owner,
        auth: bool,
        ask: GetMore<'_>,
    ) -> QResult<(Vec<Document>, i64, Option<Document>)> {
        let GetMore {
            id,
            ns,
            batch_size,
            max_time,
            test_failure,
        } = ask;
        let await_for = max_time.unwrap_or(Duration::from_secs(1));
        let c = self
            .map
            .lock()
            .get(&id)
            .cloned()
            .ok_or_else(|| QueryError::cursor_not_found(format!("cursor id {id} not found")))?;
        let mut cur = c.try_lock().ok_or_else(|| {
            QueryError::cursor_in_use(format!("cursor id {id} is already in use"))
        })?;
        // mongod's order: a killed cursor is reported (and erased) first, then who asks, then
        // the namespace and maxTimeMS; those refusals leave the cursor as it was.
        if let Some(why) = cur.killed.clone() {
            drop(cur);
            self.map.lock().remove(&id);
            return Err(QueryError::query_plan_killed(why));
        }
        owner.may_continue(id, &cur.owner, auth)?;
        if cur.ns != ns {
            return Err(QueryError::unauthorized(format!(
                "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}",
                cur.ns
            )));
        }
        if max_time.is_some() && !cur.source.await_data() {
            return Err(QueryError::bad_value(
                "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
            ));
        }
        // Drivers' tests (`failGetMoreAfterCursorCheckout`): the getMore fails once the cursor
        // is checked out, and the cursor is gone, as after any getMore error.
        let change_stream = cur.source.survives_drop();
        if let Some(e) = test_failure.and_then(|f| f.check()) {
            drop(cur);
            self.map.lock().remove(&id);
            return Err(resumable_label(e, change_stream));
        }
        // Without a batchSize, as in mongod, the rest of the results up to the reply limit
        // (16 MiB): the first batch's size does not carry over.
        let limit = batch_size.unwrap_or(0);
        let _collation = CollationScope::enter(cur.collation.clone());
        let started = Instant::now();
        if let Some(b) = cur.budget {
            cur.source.set_deadline(Some(started + b));
        }
        let mut r = Cursors::fill(&mut cur, limit);
        // awaitData: an empty batch waits (up to the getMore's maxTimeMS) for new documents.
        let until = Instant::now() + await_for;
        while cur.source.await_data()
            && matches!(&r, Ok((b, false)) if b.is_empty())
            && Instant::now() < until
        {
            cur.source.wait(until);
            r = Cursors::fill(&mut cur, limit);
        }
        cur.last_used = Instant::now();
        cur.budget = cur.budget.map(|b| b.saturating_sub(started.elapsed()));
        let (batch, done) = match r {
            Ok(x) => x,
            Err(e) => {
                drop(cur);
                self.map.lock().remove(&id);
                return Err(resumable_label(
                    e.context("Executor error during getMore"),
                    change_stream,
                ));
            }
        };
        let token = batch_token(&cur, &batch);
        drop(cur);
        if done {
            self.map.lock().remove(&id);
            return Ok((batch, 0, token));
        }
        Ok((batch, id, token))
    }

    /// `killCursors` by `owner`: closes each of `ids` and returns those killed and those not
    /// found. If another user opened one of them, nothing is killed: 13, as in mongod (the
    /// session does not matter here).
    pub(crate) fn kill_as(
        &self,
        owner: &Owner,
        ns: &str,
        ids: &[i64],
    ) -> QResult<(Vec<i64>, Vec<i64>)> {
        let mut m = self.map.lock();
        for id in ids {
            let foreign = m
                .get(id)
                .is_some_and(|c| c.try_lock().is_some_and(|cur| !owner.may_kill(&cur.owner)));
            if foreign {
                return Err(QueryError::unauthorized(format!(
                    "not authorized to kill cursor on {ns}"
                )));
            }
        }
        Ok(ids.iter().partition(|id| m.remove(id).is_some()))
    }

    /// Close cursor `id` (one the server opened and closes itself).
    pub(crate) fn kill(&self, id: i64) -> bool {
        self.map.lock().remove(&id).is_some()
    }

    /// Kill every cursor over namespaces `dead` says are gone, with `why` as the error their
    /// next `getMore` returns (175 QueryPlanKilled). Called by drop, rename and
    /// `dropDatabase`, after the change.
    pub(crate) fn kill_namespace(&self, dead: impl Fn(&str) -> bool, why: impl Fn(&str) -> String) {
        for c in self.map.lock().values() {
            let mut cur = c.lock();
            if cur.killed.is_none() && dead(&cur.ns) && !cur.source.survives_drop() {
                cur.killed = Some(why(&cur.ns));
            }
        }
    }

    /// Number of open cursors.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Exempt cursor `id` from the idle timeout (`noCursorTimeout`).
    pub(crate) fn keep_alive(&self, id: i64) {
        if let Some(c) = self.map.lock().get(&id) {
            c.lock().no_timeout = true;
        }
    }

    /// Close every cursor idle for longer than the timeout; returns how many.
    pub(crate) fn reap(&self) -> usize {
        let now = Instant::now();
        let mut m = self.map.lock();
        let before = m.len();
        m.retain(|_, c| match c.try_lock() {
            Some(c) => c.no_timeout || now.duration_since(c.last_used) < self.timeout,
            None => true,
        });
        before - m.len()
    }
}

/// Serialized size of a document.
pub(crate) fn doc_len(d: &Document) -> usize {
    let mut v = Vec::new();
    let _ = d.to_writer(&mut v);
    v.len()
}
