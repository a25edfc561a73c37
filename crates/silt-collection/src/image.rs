//! A store's image: every dictionary of its data as of one read view, written as one stream,
//! and the installing of such a stream in place of a store's data. A replica-set member too
//! far behind the set's log (a new or wiped one, or one behind the purged log) catches up by
//! installing another member's image, then the log after it.
//!
//! The image is the engine's content, not documents: the catalog (less the replication
//! position, which the installer stores) and every collection, index and oplog dictionary,
//! pair by pair in key order. So an installed member holds exactly what the member that
//! wrote it held, indexes and oplog included, and needs no index builds.
//!
//! Format (version 1): the magic `SILTIMG\0`, a little-endian `u32` version, then one zstd
//! frame (with its content checksum) of records, each a tag byte and its fields:
//! - `1` a dictionary begins: `u16` name length, the name, `u8` 1 when it keeps subtree
//!   counts;
//! - `2` a pair of the dictionary begun last, in strictly increasing key order: `u32` key
//!   length, the key, `u32` value length, the value;
//! - `3` the end: `u64` dictionaries, `u64` pairs (a truncated image is refused).
//!
//! Installing is redone after a crash: the installer first stores a marker naming the image
//! file and the position (`image-install` in the store's directory); a store that opens with
//! the marker present loads the image again before anything reads the catalog.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use silt_storage::{Dict, DropDeferral, Env};

use crate::catalog::{dict_number, load_collections, sweep_orphans, CATALOG};
use crate::oplog::proposal::POSITION_KEY;
use crate::{CollError, Result, Store};

const MAGIC: &[u8; 8] = b"SILTIMG\0";
const VERSION: u32 = 1;
const MARKER: &str = "image-install";
const MARKER_MAGIC: &[u8; 8] = b"SILTIMK1";

const DICT: u8 = 1;
const PAIR: u8 = 2;
const END: u8 = 3;

/// What writing or installing an image covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageStats {
    /// Dictionaries, the catalog among them.
    pub dicts: u64,
    /// Key-value pairs.
    pub pairs: u64,
    /// Bytes of the image (compressed, as written or read).
    pub bytes: u64,
}

/// Every dictionary of a store as of one moment, ready to be written
/// ([`Store::image_view`]). While it lives, dictionaries dropped by others are held back.
pub struct ImageView {
    snap: silt_storage::Snapshot,
    catalog: Dict,
    dicts: Vec<(Dict, bool)>,
    position: Vec<u8>,
    _held: DropDeferral,
}

impl std::fmt::Debug for ImageView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageView")
            .field("dicts", &self.dicts.len())
            .finish()
    }
}

fn bad_image(detail: impl Into<String>) -> CollError {
    CollError::BadStoredDocument {
        ns: "store image".into(),
        detail: detail.into(),
    }
}

fn io(e: std::io::Error) -> CollError {
    bad_image(format!("i/o: {e}"))
}

impl Store {
    /// A view of every dictionary as of now, with the replication position stored with
    /// that state (empty before any), its log made durable. Cheap: the data is read when
    /// the view is written.
    pub fn image_view(&self) -> Result<ImageView> {
        // Drops held back first: a dictionary the view's catalog names stays readable.
        let held = self.env.defer_drops();
        let snap = self.env.snapshot();
        let position = self
            .catalog
            .get_at(POSITION_KEY, &snap)?
            .unwrap_or_default();
        let mut dicts = Vec::new();
        for name in self.env.list_dicts() {
            if dict_number(&name).is_some() {
                let d = self.env.open_dict(&name)?;
                let counted = d.stats().counted;
                dicts.push((d, counted));
            }
        }
        self.env.sync_log()?;
        Ok(ImageView {
            snap,
            catalog: self.catalog.clone(),
            dicts,
            position,
            _held: held,
        })
    }

    /// Replace every collection, index and the oplog with the image in `path` (another
    /// member's [`ImageView::write_to`]), storing `position` with it. Open cursors of the
    /// old collections fail; the catalog in memory is read again from the image's.
    pub fn install_image(&self, position: &[u8], path: &Path) -> Result<ImageStats> {
        let _swap = self.swap.lock();
        let _ddl = self.ddl.lock();
        // An image of this store being written finishes first (its held-back drops would
        // keep names the image may use).
        let mut waited = false;
        while self.env.drops_deferred() {
            if !waited {
                tracing::info!("waiting for an image of this member to be written");
                waited = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        write_marker(self.env.dir(), path, position)?;
        let old = std::mem::take(&mut *self.colls.write());
        for c in old.values() {
            c.live.store(false, Ordering::Release);
        }
        drop(old);
        let stats = load_image(&self.env, &self.catalog, path, position)?;
        let name = |kind: &str| self.new_dict_name(kind);
        let mut next = 0;
        let mut known = Vec::new();
        for n in self.env.list_dicts() {
            if let Some(k) = dict_number(&n) {
                next = next.max(k + 1);
            }
        }
        self.next_dict.fetch_max(next, Ordering::AcqRel);
        if let Some(log) = &self.oplog {
            log.reload(&self.env, &|| name("oplog"))?;
            known = crate::oplog::Oplog::dicts_named(&self.catalog)?;
        }
        let mut next = self.next_dict.load(Ordering::Acquire);
        let colls = load_collections(
            &self.env,
            &self.catalog,
            self.oplog.as_ref(),
            &mut next,
            &mut known,
        )?;
        self.next_dict.fetch_max(next, Ordering::AcqRel);
        sweep_orphans(&self.env, &known)?;
        *self.colls.write() = colls;
        remove_marker(self.env.dir())?;
        tracing::info!(
            dicts = stats.dicts,
            pairs = stats.pairs,
            bytes = stats.bytes,
            "installed a store image"
        );
        Ok(stats)
    }
}

/// Finish an install a crash interrupted, if the store's directory holds its marker
/// (called as the store opens, before the catalog is read).
pub(crate) fn redo_install(env: &Env, catalog: &Dict) -> Result<()> {
    let Some((path, position)) = read_marker(env.dir())? else {
        return Ok(());
    };
    tracing::info!(image = %path.display(), "redoing an interrupted image install");
    load_image(env, catalog, &path, &position)?;
    remove_marker(env.dir())
}

impl ImageView {
    /// The replication position stored with the viewed state.
    pub fn position(&self) -> &[u8] {
        &self.position
    }

    /// Write the image to `out` (see the module comment for the format).
    pub fn write_to(self, out: impl Write) -> Result<ImageStats> {
        let mut counter = Counting { inner: out, n: 0 };
        counter.write_all(MAGIC).map_err(io)?;
        counter.write_all(&VERSION.to_le_bytes()).map_err(io)?;
        let mut z = zstd::Encoder::new(&mut counter, 3).map_err(io)?;
        z.include_checksum(true).map_err(io)?;
        let mut w = BufWriter::with_capacity(1 << 20, z);
        let mut stats = ImageStats::default();
        write_dict(
            &mut w,
            &self.snap,
            &self.catalog,
            CATALOG,
            false,
            &mut stats,
        )?;
        for (d, counted) in &self.dicts {
            write_dict(&mut w, &self.snap, d, &d.name(), *counted, &mut stats)?;
        }
        w.write_all(&[END]).map_err(io)?;
        w.write_all(&stats.dicts.to_le_bytes()).map_err(io)?;
        w.write_all(&stats.pairs.to_le_bytes()).map_err(io)?;
        let z = w.into_inner().map_err(|e| io(e.into_error()))?;
        z.finish().map_err(io)?;
        counter.flush().map_err(io)?;
        stats.bytes = counter.n;
        Ok(stats)
    }
}

/// Write dictionary `d` (named `name`) as of `snap`.
fn write_dict(
    w: &mut impl Write,
    snap: &silt_storage::Snapshot,
    d: &Dict,
    name: &str,
    counted: bool,
    stats: &mut ImageStats,
) -> Result<()> {
    let name_len = u16::try_from(name.len()).map_err(|_| bad_image("a long name"))?;
    w.write_all(&[DICT]).map_err(io)?;
    w.write_all(&name_len.to_le_bytes()).map_err(io)?;
    w.write_all(name.as_bytes()).map_err(io)?;
    w.write_all(&[u8::from(counted)]).map_err(io)?;
    stats.dicts += 1;
    // Cold: an image reads every dictionary once, and must not evict the working set.
    let mut c = d.cursor_at(Bound::Unbounded, Bound::Unbounded, snap).cold();
    while let Some((k, v)) = c.next()? {
        if name == CATALOG && k == POSITION_KEY {
            continue;
        }
        w.write_all(&[PAIR]).map_err(io)?;
        for part in [&k, &v] {
            let n = u32::try_from(part.len()).map_err(|_| bad_image("a long value"))?;
            w.write_all(&n.to_le_bytes()).map_err(io)?;
            w.write_all(part).map_err(io)?;
        }
        stats.pairs += 1;
    }
    Ok(())
}

/// A writer that counts what passes.
struct Counting<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One record of an image.
enum Record {
    Dict { name: String, counted: bool },
    Pair(Vec<u8>, Vec<u8>),
    End { dicts: u64, pairs: u64 },
}

/// Reads an image's records, one ahead.
struct Reader<R> {
    r: R,
    ahead: Option<Record>,
    failed: Option<CollError>,
}

impl<R: Read> Reader<R> {
    fn exact(&mut self, n: usize) -> Result<Vec<u8>> {
        let mut b = vec![0; n];
        self.r
            .read_exact(&mut b)
            .map_err(|_| bad_image("the image ends early"))?;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.exact(4)?;
        Ok(u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.exact(8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    fn record(&mut self) -> Result<Record> {
        if let Some(r) = self.ahead.take() {
            return Ok(r);
        }
        let tag = self.exact(1)?[0];
        Ok(match tag {
            DICT => {
                let b = self.exact(2)?;
                let n = u16::from_le_bytes([b[0], b[1]]) as usize;
                let name = String::from_utf8(self.exact(n)?)
                    .map_err(|_| bad_image("a dictionary name is not UTF-8"))?;
                let counted = self.exact(1)?[0] == 1;
                Record::Dict { name, counted }
            }
            PAIR => {
                let n = self.u32()? as usize;
                let k = self.exact(n)?;
                let n = self.u32()? as usize;
                Record::Pair(k, self.exact(n)?)
            }
            END => Record::End {
                dicts: self.u64()?,
                pairs: self.u64()?,
            },
            t => return Err(bad_image(format!("unknown record {t}"))),
        })
    }

    /// The next pair of the current dictionary (`None` at its end, or on an error, kept in
    /// `failed`).
    fn next_pair(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        match self.record() {
            Ok(Record::Pair(k, v)) => Some((k, v)),
            Ok(other) => {
                self.ahead = Some(other);
                None
            }
            Err(e) => {
                self.failed = Some(e);
                None
            }
        }
    }
}

/// Replace the store's dictionaries in `env` with the image at `path` and store `position`.
fn load_image(env: &Env, catalog: &Dict, path: &Path, position: &[u8]) -> Result<ImageStats> {
    let file = File::open(path).map_err(io)?;
    let bytes = file.metadata().map_err(io)?.len();
    let mut raw = BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; 12];
    raw.read_exact(&mut head)
        .map_err(|_| bad_image("no header"))?;
    if &head[..8] != MAGIC {
        return Err(bad_image("not a store image"));
    }
    let version = u32::from_le_bytes(head[8..].try_into().unwrap_or_default());
    if version != VERSION {
        return Err(bad_image(format!(
            "image version {version} (this build reads {VERSION})"
        )));
    }
    let z = zstd::Decoder::with_buffer(raw).map_err(io)?;
    let mut r = Reader {
        r: BufReader::with_capacity(1 << 20, z),
        ahead: None,
        failed: None,
    };
    for name in env.list_dicts() {
        if dict_number(&name).is_some() {
            env.drop_dict(&name)?;
        }
    }
    for (k, _) in catalog.range(Bound::Unbounded, Bound::Unbounded)? {
        catalog.delete(&k)?;
    }
    let mut stats = ImageStats {
        bytes,
        ..ImageStats::default()
    };
    loop {
        match r.record()? {
            Record::Dict { name, .. } if name == CATALOG => {
                stats.dicts += 1;
                while let Some((k, v)) = r.next_pair() {
                    catalog.put(&k, &v)?;
                    stats.pairs += 1;
                }
            }
            Record::Dict { name, counted } => {
                if dict_number(&name).is_none() {
                    return Err(bad_image(format!("a dictionary named {name}")));
                }
                stats.dicts += 1;
                let d = if counted {
                    env.create_counted_dict(&name)?
                } else {
                    env.create_dict(&name)?
                };
                let mut n = 0u64;
                let pairs = std::iter::from_fn(|| {
                    let p = r.next_pair();
                    n += u64::from(p.is_some());
                    p
                });
                d.bulk_load(pairs)?;
                stats.pairs += n;
            }
            Record::Pair(..) => return Err(bad_image("a pair outside a dictionary")),
            Record::End { dicts, pairs } => {
                if (dicts, pairs) != (stats.dicts, stats.pairs) {
                    return Err(bad_image(format!(
                        "the image ends with {dicts} dictionaries and {pairs} pairs, \
                         but holds {} and {}",
                        stats.dicts, stats.pairs
                    )));
                }
                break;
            }
        }
        if let Some(e) = r.failed.take() {
            return Err(e);
        }
    }
    catalog.put(POSITION_KEY, position)?;
    env.sync_log()?;
    Ok(stats)
}

fn marker_path(dir: &Path) -> PathBuf {
    dir.join(MARKER)
}

/// Store, durably, that an install of `image` at `position` has begun.
pub(crate) fn write_marker(dir: &Path, image: &Path, position: &[u8]) -> Result<()> {
    let image = image
        .to_str()
        .ok_or_else(|| bad_image("an image path is not UTF-8"))?;
    let mut b = MARKER_MAGIC.to_vec();
    for part in [image.as_bytes(), position] {
        let n = u32::try_from(part.len()).map_err(|_| bad_image("a long marker"))?;
        b.extend_from_slice(&n.to_le_bytes());
        b.extend_from_slice(part);
    }
    let tmp = dir.join(format!("{MARKER}.tmp"));
    let mut f = File::create(&tmp).map_err(io)?;
    f.write_all(&b).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, marker_path(dir)).map_err(io)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}

fn read_marker(dir: &Path) -> Result<Option<(PathBuf, Vec<u8>)>> {
    let b = match std::fs::read(marker_path(dir)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut rest = b
        .strip_prefix(MARKER_MAGIC.as_slice())
        .ok_or_else(|| bad_image("a damaged install marker"))?;
    let mut parts = Vec::new();
    for _ in 0..2 {
        let n = rest
            .get(..4)
            .map(|n| u32::from_le_bytes(n.try_into().unwrap_or_default()) as usize)
            .ok_or_else(|| bad_image("a damaged install marker"))?;
        let part = rest
            .get(4..4 + n)
            .ok_or_else(|| bad_image("a damaged install marker"))?;
        parts.push(part.to_vec());
        rest = &rest[4 + n..];
    }
    let position = parts.pop().unwrap_or_default();
    let image = String::from_utf8(parts.pop().unwrap_or_default())
        .map_err(|_| bad_image("a damaged install marker"))?;
    Ok(Some((PathBuf::from(image), position)))
}

fn remove_marker(dir: &Path) -> Result<()> {
    std::fs::remove_file(marker_path(dir)).map_err(io)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}
