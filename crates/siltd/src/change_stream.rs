//! Change streams: the `$changeStream` stage, read from the oplog (`silt_collection::oplog`).
//!
//! A change stream is a tailable, awaitData cursor over the oplog from a start time. Each
//! entry becomes zero or more events (a transaction's `applyOps` entry one per operation, in
//! order, with the transaction's `lsid` and `txnNumber`), kept when they are in the stream's
//! scope (one collection, one database, or every database but `admin`, `config` and
//! `local`), then passed through the rest of the pipeline (`$match`, `$project`,
//! `$addFields`, `$set`, `$unset`, `$replaceRoot`, `$replaceWith`). Only committed writes
//! are ever in the oplog, and the oplog is read only up to its visibility point, so each
//! event is delivered once, in commit order.
//!
//! **Resume tokens** are `{_data: <hex>}` in the layout of MongoDB's KeyString: the leading
//! byte `82` (a Timestamp) and the event's cluster time as 16 hex digits, which third-party
//! code decodes; then siltd's own position: the operation's index within its entry (8 hex
//! digits; `FFFFFFFF` for a high-water mark, "everything at this time") and flags (`01`: an
//! invalidate event). Every batch carries `postBatchResumeToken`: the last event returned,
//! or the high-water mark of what was read, which moves while the stream is idle (an idle
//! member logs a no-op every 10 s).
//!
//! **Fast updates** are logged as their update message (`{$silt: 1, fn, arg}`), without a
//! read. Their event is an `update` whose `updateDescription` holds what the operators say
//! without the document: `$set` fields in `updatedFields`, `$unset` fields in
//! `removedFields`, and every other operator under `siltOperators` (a name no MongoDB field
//! uses), as given. It never carries a value that would need a read: `$inc: {n: 1}` is
//! `siltOperators: {$inc: {n: 1}}`, not the new `n`. With `fullDocument: "updateLookup"` the
//! event carries the document as it is when the event is read, which is MongoDB's meaning
//! of `updateLookup`.
//!
//! **Pre- and post-images.** A collection with `changeStreamPreAndPostImages: {enabled:
//! true}` keeps, beside each entry that changes one of its documents, the document before
//! (`Oplog::pre_image`; trimmed with the entry's partition). `fullDocumentBeforeChange` reads
//! it; `fullDocument: "whenAvailable"`/`"required"` of an update is the pre-image with the
//! entry's diff applied. Missing: `null`, or 47 NoMatchingDocument when required. Fast
//! updates are off for such a collection (the pre-image needs the read they avoid).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Instant;

use bson::{doc, Bson, Document, Timestamp};
use silt_collection::oplog::{describe, pack, unpack, Oplog, Scan};
use silt_collection::Store;
use silt_query::agg::{NoCollections, Pipeline};
use silt_query::{QResult, QueryError};

use crate::cursors::DocSource;
use crate::errors::coll_err;

/// High-water-mark index: every event at the token's time is before it.
const HWM: u32 = u32::MAX;
const FLAG_INVALIDATE: u8 = 1;

/// A position in the stream of events: the entry's time, the operation's index in it, and
/// whether it is an invalidate event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Position {
    ts: u64,
    idx: u32,
    flags: u8,
}

impl Position {
    fn hwm(ts: u64) -> Position {
        Position {
            ts,
            idx: HWM,
            flags: 0,
        }
    }

    /// The fragment of a split event this names (1, 2, ...), 0 for a whole event.
    fn fragment(self) -> u8 {
        self.flags >> 1
    }

    /// The resume token `{_data}`.
    pub(crate) fn token(self) -> Document {
        doc! { "_data": format!("82{:016X}{:08X}{:02X}", self.ts, self.idx, self.flags) }
    }

    /// The position a token names (260 InvalidResumeToken otherwise).
    fn parse(token: &Bson) -> QResult<Position> {
        let bad = || QueryError::coded(260, "InvalidResumeToken", "Invalid resume token");
        let data = match token {
            Bson::Document(d) => d.get_str("_data").map_err(|_| bad())?,
            _ => return Err(bad()),
        };
        if data.len() != 28 || !data.starts_with("82") {
            return Err(bad());
        }
        let hex = |r: std::ops::Range<usize>| u64::from_str_radix(&data[r], 16).map_err(|_| bad());
        Ok(Position {
            ts: hex(2..18)?,
            idx: u32::try_from(hex(18..26)?).map_err(|_| bad())?,
            flags: u8::try_from(hex(26..28)?).map_err(|_| bad())?,
        })
    }
}

/// What a stream watches.
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    Collection { db: String, coll: String },
    Database(String),
    Cluster,
}

impl Scope {
    fn sees(&self, db: &str, coll: &str) -> bool {
        match self {
            Scope::Collection { db: d, coll: c } => d == db && c == coll,
            Scope::Database(d) => d == db && !coll.starts_with("system."),
            Scope::Cluster => {
                !matches!(db, "admin" | "config" | "local") && !coll.starts_with("system.")
            }
        }
    }
}

/// How `fullDocument` is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FullDocument {
    Default,
    UpdateLookup,
    /// The post-image (the pre-image with the update applied), or null.
    WhenAvailable,
    /// The post-image, or error 47.
    Required,
}

/// How `fullDocumentBeforeChange` is filled (from the pre-images of a collection with
/// `changeStreamPreAndPostImages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BeforeChange {
    Off,
    WhenAvailable,
    Required,
}

/// The `$changeStream` stage's options.
pub(crate) struct Options {
    full_document: FullDocument,
    before_change: BeforeChange,
    start: Start,
    expanded: bool,
}

enum Start {
    Now,
    /// `resumeAfter` or `startAfter` (only `startAfter` may name an invalidate event).
    After(Position),
    At(Timestamp),
}

impl Options {
    /// Parse the stage's argument.
    pub(crate) fn parse(spec: &Bson) -> QResult<(Options, bool)> {
        let Bson::Document(spec) = spec else {
            return Err(QueryError::type_mismatch(
                "the $changeStream stage specification must be an object",
            ));
        };
        let mut o = Options {
            full_document: FullDocument::Default,
            before_change: BeforeChange::Off,
            start: Start::Now,
            expanded: false,
        };
        let mut cluster = false;
        let mut starts = 0;
        for (k, v) in spec {
            match (k.as_str(), v) {
                ("fullDocument", Bson::String(s)) => {
                    o.full_document = match s.as_str() {
                        "default" => FullDocument::Default,
                        "updateLookup" => FullDocument::UpdateLookup,
                        "whenAvailable" => FullDocument::WhenAvailable,
                        "required" => FullDocument::Required,
                        other => {
                            return Err(QueryError::bad_value(format!(
                                "Enumeration value '{other}' for field 'fullDocument' is not a valid value."
                            )))
                        }
                    }
                }
                ("fullDocumentBeforeChange", Bson::String(s)) => {
                    o.before_change = match s.as_str() {
                        "off" => BeforeChange::Off,
                        "whenAvailable" => BeforeChange::WhenAvailable,
                        "required" => BeforeChange::Required,
                        other => {
                            return Err(QueryError::bad_value(format!(
                                "Enumeration value '{other}' for field 'fullDocumentBeforeChange' is not a valid value."
                            )))
                        }
                    }
                }
                ("resumeAfter", t) => {
                    starts += 1;
                    let p = Position::parse(t)?;
                    if p.flags & FLAG_INVALIDATE != 0 {
                        return Err(QueryError::coded(
                            260,
                            "InvalidResumeToken",
                            "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.",
                        ));
                    }
                    o.start = Start::After(p);
                }
                ("startAfter", t) => {
                    starts += 1;
                    o.start = Start::After(Position::parse(t)?);
                }
                ("startAtOperationTime", Bson::Timestamp(t)) => {
                    starts += 1;
                    o.start = Start::At(*t);
                }
                ("allChangesForCluster", Bson::Boolean(b)) => cluster = *b,
                ("showExpandedEvents", Bson::Boolean(b)) => o.expanded = *b,
                ("showSystemEvents" | "showMigrationEvents", Bson::Boolean(_)) => {}
                (
                    "fullDocument" | "fullDocumentBeforeChange" | "startAtOperationTime"
                    | "allChangesForCluster" | "showExpandedEvents",
                    _,
                ) => {
                    return Err(QueryError::type_mismatch(format!(
                        "BSON field '$changeStream.{k}' is the wrong type"
                    )))
                }
                _ => {
                    return Err(QueryError::located(
                        40415,
                        format!("BSON field '$changeStream.{k}' is an unknown field."),
                    ))
                }
            }
        }
        if starts > 1 {
            return Err(QueryError::located(
                40674,
                "Only one type of resume option is allowed, but multiple were found.",
            ));
        }
        Ok((o, cluster))
    }
}

/// A required image that is not there (mongod's 47 NoMatchingDocument).
fn no_image(which: &str, kinds: &str, ch: &Change<'_>) -> QueryError {
    QueryError::coded(
        47,
        "NoMatchingDocument",
        format!(
            "Change stream was configured to require a {which} for all {kinds} events, but the {which} was not found for event: {}",
            ch.pos.token()
        ),
    )
}

/// The events of a change stream, as a cursor's source.
pub(crate) struct ChangeSource {
    log: Arc<Oplog>,
    store: Weak<Store>,
    scope: Scope,
    opts: Options,
    pipeline: Pipeline,
    scan: Option<Scan>,
    /// Entries are read after this time.
    read_after: u64,
    /// Events at or before this position are not delivered (a resume point).
    skip_to: Position,
    ready: VecDeque<(Position, Document)>,
    /// The resume token of the last batch's end.
    pbrt: Position,
    /// An invalidate event was returned: the stream is over.
    invalidated: bool,
    /// `$changeStreamSplitLargeEvent` ends the pipeline: events over 16 MiB go in fragments.
    split: bool,
    /// The fragments of a split event still to return.
    fragments: VecDeque<(Position, Document)>,
}

impl ChangeSource {
    /// Open a stream of `scope` with `opts` and the stages after `$changeStream`.
    pub(crate) fn open(
        log: Arc<Oplog>,
        store: Weak<Store>,
        scope: Scope,
        opts: Options,
        rest: &[Document],
    ) -> QResult<ChangeSource> {
        // `$changeStreamSplitLargeEvent` may end the pipeline (and only end it).
        let is_split = |d: &Document| d.contains_key("$changeStreamSplitLargeEvent");
        let split = rest.last().is_some_and(is_split);
        let rest = if split { &rest[..rest.len() - 1] } else { rest };
        if rest.iter().any(is_split) {
            return Err(QueryError::located(
                7182802,
                "$changeStreamSplitLargeEvent must be the last stage in the pipeline",
            ));
        }
        // Unknown stages are 40324 as in any pipeline; known ones must be allowed here.
        let pipeline = silt_query::agg::parse_pipeline(rest)?;
        for st in rest {
            let name = st.keys().next().map(String::as_str).unwrap_or("");
            if !matches!(
                name,
                "$match"
                    | "$project"
                    | "$addFields"
                    | "$set"
                    | "$unset"
                    | "$replaceRoot"
                    | "$replaceWith"
            ) {
                return Err(QueryError::coded(
                    ILLEGAL_STAGE,
                    "IllegalOperation",
                    format!("{name} is not permitted in a $changeStream pipeline"),
                ));
            }
        }
        let visible = pack(log.visible());
        let (read_after, skip_to) = match opts.start {
            Start::Now => (visible, Position::hwm(visible)),
            Start::After(p) => (p.ts.saturating_sub(1), p),
            Start::At(t) => {
                let t = pack(t).saturating_sub(1);
                (t, Position::hwm(t))
            }
        };
        if !matches!(opts.start, Start::Now) {
            // The start must still be in the oplog: its oldest entry at or before it.
            let oldest = log.oldest().map_err(coll_err)?.map(pack);
            if oldest.is_some_and(|o| o > read_after.saturating_add(1)) {
                return Err(QueryError::coded(
                    286,
                    "ChangeStreamHistoryLost",
                    "Resume of change stream was not possible, as the resume point may no longer be in the oplog.",
                ));
            }
        }
        Ok(ChangeSource {
            log,
            store,
            scope,
            opts,
            pipeline,
            scan: None,
            read_after,
            skip_to,
            ready: VecDeque::new(),
            pbrt: skip_to,
            invalidated: false,
            split,
            fragments: VecDeque::new(),
        })
    }
}

/// The largest event a batch carries whole (MongoDB's user document limit).
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

fn bson_len(d: &Document) -> usize {
    bson::to_vec(d).map_or(0, |v| v.len())
}

/// An event over [`MAX_EVENT_BYTES`] as `$changeStreamSplitLargeEvent` returns it: fragments
/// of its top-level fields in order, each `{_id: <the fragment's token>, splitEvent:
/// {fragment, of}, ...}` and under the limit. A single field over it is 10334.
fn split_event(ev: Document, pos: Position) -> QResult<Vec<(Position, Document)>> {
    // Room for `_id` and `splitEvent` in every fragment.
    const OVERHEAD: usize = 256;
    let mut parts: Vec<Document> = Vec::new();
    let mut cur = Document::new();
    let mut size = 0;
    for (k, v) in ev {
        if k == "_id" {
            continue;
        }
        let len = bson_len(&doc! { k.clone(): v.clone() });
        if len + OVERHEAD > MAX_EVENT_BYTES {
            return Err(QueryError::coded(
                10334,
                "BSONObjectTooLarge",
                format!("The change event's field '{k}' is too large to fit in a fragment ({len} bytes)"),
            ));
        }
        if size + len + OVERHEAD > MAX_EVENT_BYTES && !cur.is_empty() {
            parts.push(std::mem::take(&mut cur));
            size = 0;
        }
        cur.insert(k, v);
        size += len;
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    let of = parts.len();
    if of > 127 {
        return Err(QueryError::coded(
            10334,
            "BSONObjectTooLarge",
            "The change event is too large to split",
        ));
    }
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(n, fields)| {
            let frag = Position {
                flags: u8::try_from((n + 1) << 1).unwrap_or(u8::MAX),
                ..pos
            };
            let mut d = doc! {
                "_id": frag.token(),
                "splitEvent": {
                    "fragment": i32::try_from(n + 1).unwrap_or(i32::MAX),
                    "of": i32::try_from(of).unwrap_or(i32::MAX),
                },
            };
            d.extend(fields);
            (frag, d)
        })
        .collect())
}

/// MongoDB's code for a stage a change stream's pipeline may not hold.
const ILLEGAL_STAGE: i32 = 20;

fn split_ns(ns: &str) -> (&str, &str) {
    ns.split_once('.').unwrap_or((ns, ""))
}

fn ns_doc(ns: &str) -> Document {
    let (db, coll) = split_ns(ns);
    doc! { "db": db, "coll": coll }
}

/// One operation of an entry, with what the event needs around it.
struct Change<'a> {
    pos: Position,
    ts: Timestamp,
    wall: Option<&'a Bson>,
    op: &'a Document,
    /// The transaction's `lsid` and `txnNumber`, for an operation of one.
    txn: Option<(&'a Bson, &'a Bson)>,
}

impl ChangeSource {
    /// The events of one entry, in order, queued when in scope and past the resume point.
    fn queue_entry(&mut self, ts: Timestamp, entry: &Document) -> QResult<()> {
        let packed = pack(ts);
        let wall = entry.get("wall");
        let mut changes = Vec::new();
        let is_txn = entry.get_str("op") == Ok("c")
            && entry
                .get_document("o")
                .is_ok_and(|o| o.contains_key("applyOps"));
        if is_txn {
            let txn = entry.get("lsid").zip(entry.get("txnNumber"));
            let ops = entry
                .get_document("o")
                .ok()
                .and_then(|o| o.get_array("applyOps").ok());
            for (n, op) in ops.into_iter().flatten().enumerate() {
                if let Bson::Document(op) = op {
                    changes.push(Change {
                        pos: Position {
                            ts: packed,
                            idx: u32::try_from(n).unwrap_or(HWM - 1),
                            flags: 0,
                        },
                        ts,
                        wall,
                        op,
                        txn,
                    });
                }
            }
        } else {
            changes.push(Change {
                pos: Position {
                    ts: packed,
                    idx: 0,
                    flags: 0,
                },
                ts,
                wall,
                op: entry,
                txn: None,
            });
        }
        for ch in changes {
            let (event, invalidates) = self.event(&ch)?;
            if let Some(ev) = event {
                // Resuming from a fragment of this event: its later fragments are still due.
                let fragment_of_it = self.skip_to.fragment() > 0
                    && (self.skip_to.ts, self.skip_to.idx) == (ch.pos.ts, ch.pos.idx);
                if ch.pos > self.skip_to || fragment_of_it {
                    self.ready.push_back((ch.pos, ev));
                }
            }
            if invalidates {
                let pos = Position {
                    flags: FLAG_INVALIDATE,
                    ..ch.pos
                };
                if pos > self.skip_to {
                    let mut ev = doc! {
                        "_id": pos.token(),
                        "operationType": "invalidate",
                        "clusterTime": ch.ts,
                    };
                    if let Some(w) = ch.wall {
                        ev.insert("wallTime", w.clone());
                    }
                    self.ready.push_back((pos, ev));
                } else {
                    // Started after this invalidate (`startAfter`): the stream goes on.
                }
            }
        }
        Ok(())
    }

    /// The event of one operation (before the pipeline), if the stream shows it, and
    /// whether it invalidates the stream.
    fn event(&self, ch: &Change<'_>) -> QResult<(Option<Document>, bool)> {
        let op = ch.op;
        let kind = op.get_str("op").unwrap_or("");
        let ns = op.get_str("ns").unwrap_or("");
        let o = op.get_document("o").ok();
        let mut ev = doc! { "_id": ch.pos.token() };
        let (db, coll) = split_ns(ns);
        let key = |d: Option<&Document>| -> Document {
            d.and_then(|d| d.get("_id"))
                .map_or_else(Document::new, |id| doc! { "_id": id.clone() })
        };
        // With `showExpandedEvents`, every event of a collection names its UUID.
        let ui = op.get("ui").filter(|_| self.opts.expanded);
        let head = |ev: &mut Document, kind: &str| {
            ev.insert("operationType", kind);
            ev.insert("clusterTime", ch.ts);
            if let Some(w) = ch.wall {
                ev.insert("wallTime", w.clone());
            }
            if let Some(u) = ui {
                ev.insert("collectionUUID", u.clone());
            }
        };
        match kind {
            // A view's creation and drop are writes of `system.views`.
            "i" | "d" if coll == crate::views::SYSTEM_VIEWS => {
                let Some(o) = o else { return Ok((None, false)) };
                let view_ns = o.get_str("_id").unwrap_or("");
                let (vdb, vcoll) = split_ns(view_ns);
                if !self.scope.sees(vdb, vcoll) || (kind == "i" && !self.opts.expanded) {
                    return Ok((None, false));
                }
                head(&mut ev, if kind == "i" { "create" } else { "drop" });
                ev.remove("collectionUUID");
                ev.insert("ns", doc! { "db": vdb, "coll": vcoll });
                if kind == "i" {
                    let mut desc = doc! {
                        "viewOn": o.get("viewOn").cloned().unwrap_or(Bson::Null),
                        "pipeline": o.get("pipeline").cloned().unwrap_or(Bson::Array(Vec::new())),
                    };
                    if let Some(c) = o.get("collation") {
                        desc.insert("collation", c.clone());
                    }
                    ev.insert("operationDescription", desc);
                }
                return Ok((Some(ev), false));
            }
            "i" | "u" | "d" => {
                if !self.scope.sees(db, coll) {
                    return Ok((None, false));
                }
                let o = o.cloned().unwrap_or_default();
                let doc_key = match kind {
                    "d" => key(Some(&o)),
                    _ => op
                        .get_document("o2")
                        .ok()
                        .cloned()
                        .unwrap_or_else(|| key(Some(&o))),
                };
                match kind {
                    "i" => {
                        head(&mut ev, "insert");
                        ev.insert("fullDocument", o);
                        ev.insert("ns", ns_doc(ns));
                        ev.insert("documentKey", doc_key);
                    }
                    "d" => {
                        head(&mut ev, "delete");
                        ev.insert("ns", ns_doc(ns));
                        ev.insert("documentKey", doc_key);
                        self.before_change(&mut ev, ch)?;
                    }
                    _ if o.contains_key("$v") || o.contains_key("$silt") => {
                        head(&mut ev, "update");
                        match self.opts.full_document {
                            FullDocument::UpdateLookup => {
                                ev.insert("fullDocument", self.lookup(ns, &doc_key)?);
                            }
                            FullDocument::WhenAvailable | FullDocument::Required => {
                                let post = self.post_image(ch, &o)?;
                                if post.is_none()
                                    && self.opts.full_document == FullDocument::Required
                                {
                                    return Err(no_image("post-image", "update", ch));
                                }
                                ev.insert("fullDocument", post.map_or(Bson::Null, Bson::Document));
                            }
                            FullDocument::Default => {}
                        }
                        ev.insert("ns", ns_doc(ns));
                        ev.insert("documentKey", doc_key);
                        ev.insert("updateDescription", update_description(&o));
                        self.before_change(&mut ev, ch)?;
                    }
                    _ => {
                        head(&mut ev, "replace");
                        ev.insert("fullDocument", o);
                        ev.insert("ns", ns_doc(ns));
                        ev.insert("documentKey", doc_key);
                        self.before_change(&mut ev, ch)?;
                    }
                }
            }
            "c" => return Ok(self.command_event(ev, ch, db, o, head)),
            _ => return Ok((None, false)),
        }
        if let Some((lsid, txn)) = ch.txn {
            ev.insert("lsid", lsid.clone());
            ev.insert("txnNumber", txn.clone());
        }
        Ok((Some(ev), false))
    }

    /// `fullDocumentBeforeChange`: the pre-image kept beside the entry, if any.
    fn before_change(&self, ev: &mut Document, ch: &Change<'_>) -> QResult<()> {
        if self.opts.before_change == BeforeChange::Off {
            return Ok(());
        }
        let pre = self.log.pre_image(ch.ts, ch.pos.idx).map_err(coll_err)?;
        if pre.is_none() && self.opts.before_change == BeforeChange::Required {
            return Err(no_image("pre-image", "update, delete and replace", ch));
        }
        ev.insert(
            "fullDocumentBeforeChange",
            pre.map_or(Bson::Null, Bson::Document),
        );
        Ok(())
    }

    /// The document after an update: its pre-image with the entry's diff applied.
    fn post_image(&self, ch: &Change<'_>, o: &Document) -> QResult<Option<Document>> {
        let Ok(diff) = o.get_document("diff") else {
            return Ok(None);
        };
        let Some(pre) = self.log.pre_image(ch.ts, ch.pos.idx).map_err(coll_err)? else {
            return Ok(None);
        };
        Ok(silt_collection::oplog::apply_diff(&pre, diff).ok())
    }

    /// The document with `key` in `ns` as it is now (`updateLookup`), or null.
    fn lookup(&self, ns: &str, key: &Document) -> QResult<Bson> {
        let Some(store) = self.store.upgrade() else {
            return Ok(Bson::Null);
        };
        let Some(coll) = store.get(ns) else {
            return Ok(Bson::Null);
        };
        let id = key.get("_id").cloned().unwrap_or(Bson::Null);
        Ok(coll
            .get(&id)
            .map_err(coll_err)?
            .map_or(Bson::Null, Bson::Document))
    }

    fn command_event(
        &self,
        mut ev: Document,
        ch: &Change<'_>,
        db: &str,
        o: Option<&Document>,
        head: impl Fn(&mut Document, &str),
    ) -> (Option<Document>, bool) {
        let Some(o) = o else { return (None, false) };
        let Some((name, arg)) = o.iter().next() else {
            return (None, false);
        };
        let target = arg.as_str().unwrap_or("");
        let scoped = |coll: &str| self.scope.sees(db, coll);
        let mine = |coll: &str| matches!(&self.scope, Scope::Collection { db: d, coll: c } if d == db && c == coll);
        match name.as_str() {
            "drop" if scoped(target) => {
                head(&mut ev, "drop");
                ev.insert("ns", doc! { "db": db, "coll": target });
                (Some(ev), mine(target))
            }
            "renameCollection" => {
                let from = o.get_str("renameCollection").unwrap_or("");
                let to = o.get_str("to").unwrap_or("");
                let (fdb, fcoll) = split_ns(from);
                if !self.scope.sees(fdb, fcoll) {
                    return (None, false);
                }
                head(&mut ev, "rename");
                ev.insert("ns", ns_doc(from));
                ev.insert("to", ns_doc(to));
                let invalidates = matches!(&self.scope, Scope::Collection { db: d, coll: c } if d == fdb && c == fcoll);
                (Some(ev), invalidates)
            }
            "dropDatabase" => match &self.scope {
                Scope::Database(d) if d == db => {
                    head(&mut ev, "dropDatabase");
                    ev.insert("ns", doc! { "db": db });
                    (Some(ev), true)
                }
                Scope::Cluster if !matches!(db, "admin" | "config" | "local") => {
                    head(&mut ev, "dropDatabase");
                    ev.insert("ns", doc! { "db": db });
                    (Some(ev), false)
                }
                _ => (None, false),
            },
            "create" | "createIndexes" | "dropIndexes" | "collMod"
                if self.opts.expanded && scoped(target) =>
            {
                let kind = match name.as_str() {
                    "collMod" => "modify",
                    n => n,
                };
                head(&mut ev, kind);
                ev.insert("ns", doc! { "db": db, "coll": target });
                let mut rest = o.clone();
                rest.remove(name);
                let description = match name.as_str() {
                    "createIndexes" => doc! { "indexes": [rest] },
                    "dropIndexes" => doc! {
                        "indexes": [ch.op.get_document("o2").cloned().unwrap_or(rest)]
                    },
                    _ => rest,
                };
                ev.insert("operationDescription", description);
                (Some(ev), false)
            }
            _ => (None, false),
        }
    }
}

/// The `updateDescription` of an update entry: from a `$v: 2` diff, or from a fast update's
/// operators (see the module's header).
fn update_description(o: &Document) -> Document {
    if let Ok(diff) = o.get_document("diff") {
        let d = describe(diff);
        return doc! {
            "updatedFields": d.updated,
            "removedFields": d.removed,
            "truncatedArrays": d.truncated,
        };
    }
    let ops = o
        .get_document("arg")
        .ok()
        .and_then(|a| a.get_document("u").ok())
        .cloned()
        .unwrap_or_default();
    let mut updated = Document::new();
    let mut removed = Vec::new();
    let mut others = Document::new();
    for (op, fields) in &ops {
        match (op.as_str(), fields) {
            ("$set", Bson::Document(f)) if f.keys().all(|k| !k.contains('$')) => {
                for (k, v) in f {
                    updated.insert(k.clone(), v.clone());
                }
            }
            ("$unset", Bson::Document(f)) if f.keys().all(|k| !k.contains('$')) => {
                removed.extend(f.keys().cloned());
            }
            _ => {
                others.insert(op.clone(), fields.clone());
            }
        }
    }
    let mut d = doc! {
        "updatedFields": updated,
        "removedFields": removed,
        "truncatedArrays": [],
    };
    if !others.is_empty() {
        d.insert("siltOperators", others);
    }
    d
}

impl DocSource for ChangeSource {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        loop {
            if let Some((pos, d)) = self.fragments.pop_front() {
                self.pbrt = pos;
                return Ok(Some(d));
            }
            if self.invalidated {
                return Ok(None);
            }
            if let Some((pos, ev)) = self.ready.pop_front() {
                self.pbrt = pos;
                if pos.flags & FLAG_INVALIDATE != 0 {
                    self.invalidated = true;
                    return Ok(Some(ev));
                }
                let token = ev.get("_id").cloned();
                let out = self
                    .pipeline
                    .run(Box::new(std::iter::once(Ok(ev))), &NoCollections)?;
                match out.into_iter().next() {
                    // The resume token must come through the pipeline as it was.
                    Some(d) if d.get("_id") != token.as_ref() => {
                        return Err(QueryError::coded(
                            280,
                            "ChangeStreamFatalError",
                            format!(
                                "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed. Expected: {} but found: {}",
                                token.map_or_else(|| "{}".into(), |t| t.to_string()),
                                d.get("_id").map_or_else(|| "{}".into(), |t| t.to_string())
                            ),
                        ))
                    }
                    Some(d) if self.split && bson_len(&d) > MAX_EVENT_BYTES => {
                        self.fragments = split_event(d, pos)?
                            .into_iter()
                            .filter(|(p, _)| *p > self.skip_to)
                            .collect();
                        continue;
                    }
                    Some(d) => return Ok(Some(d)),
                    None => continue,
                }
            }
            let scan = match &mut self.scan {
                Some(s) => s,
                None => self
                    .scan
                    .insert(self.log.read(Some(unpack(self.read_after)))),
            };
            match scan.next_entry() {
                Ok(Some((ts, entry))) => {
                    self.read_after = pack(ts);
                    self.queue_entry(ts, &entry)?;
                    if self.ready.is_empty() {
                        self.pbrt = self.pbrt.max(Position::hwm(pack(ts)));
                    }
                }
                Ok(None) => {
                    let upto = scan.upto();
                    self.scan = None;
                    self.read_after = self.read_after.max(upto);
                    self.pbrt = self.pbrt.max(Position::hwm(upto));
                    return Ok(None);
                }
                Err(silt_collection::CollError::PositionLost(_)) => {
                    return Err(QueryError::coded(
                        286,
                        "ChangeStreamHistoryLost",
                        "Resume of change stream was not possible, as the resume point may no longer be in the oplog.",
                    ))
                }
                Err(e) => return Err(coll_err(e)),
            }
        }
    }

    fn tailable(&self) -> bool {
        !self.invalidated
    }

    fn await_data(&self) -> bool {
        !self.invalidated
    }

    fn known_exhausted(&self) -> bool {
        self.invalidated
    }

    fn wait(&self, until: Instant) {
        self.log.wait_past(unpack(self.read_after), until);
    }

    fn survives_drop(&self) -> bool {
        true
    }

    fn resume_token(&self) -> Option<Document> {
        Some(self.pbrt.token())
    }
}
