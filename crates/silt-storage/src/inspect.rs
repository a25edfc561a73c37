//! Offline inspection of an environment's files, for `siltctl`: headers, block tables, nodes,
//! tree shape, and a verification pass that checks every checksum. Reads only; safe to run on
//! a copy of a live directory.

use std::collections::{HashSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::catalog::{dict_file_name, Catalog};
use crate::error::{corruption, IoContext, Result};
use crate::file::read_table;
use crate::format::btt::Extent;
use crate::format::header::{FileHeader, HEADER_SLOT_BYTES};
use crate::format::node::{decode_header, decode_part, BlockHeader};
use crate::ids::BlockNum;
use crate::tree::node::PartData;
use crate::vfs::{OpenMode, RealFs, VFile, Vfs};
use crate::width::usize_of;

type File = Box<dyn VFile>;

fn open(vfs: &dyn Vfs, path: &Path) -> Result<File> {
    vfs.open(path, OpenMode::Existing, false).ctx(path)
}

fn read_at(f: &File, path: &Path, off: u64, len: usize) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, off).ctx(path)?;
    Ok(b)
}

/// Both header slots of a dictionary file, each decoded or with the reason it is invalid.
pub fn headers(path: &Path) -> Result<[std::result::Result<FileHeader, String>; 2]> {
    headers_on(&RealFs, path)
}

fn headers_on(vfs: &dyn Vfs, path: &Path) -> Result<[std::result::Result<FileHeader, String>; 2]> {
    let f = open(vfs, path)?;
    let slot = |i: u64| match read_at(&f, path, i * HEADER_SLOT_BYTES, usize_of(HEADER_SLOT_BYTES))
    {
        Ok(b) => FileHeader::decode(&b),
        Err(e) => Err(e.to_string()),
    };
    Ok([slot(0), slot(1)])
}

fn best(vfs: &dyn Vfs, path: &Path) -> Result<(File, FileHeader)> {
    let f = open(vfs, path)?;
    let h = crate::file::read_best_header(&*f, path)?;
    Ok((f, h))
}

/// The block translation table of the newest valid checkpoint, sorted by block number.
pub fn block_table(path: &Path) -> Result<Vec<(BlockNum, Extent)>> {
    let (f, h) = best(&RealFs, path)?;
    let mut t: Vec<_> = read_table(&*f, path, &h)?.into_iter().collect();
    t.sort_by_key(|(b, _)| *b);
    Ok(t)
}

/// A node as stored: its header, and for each partition a one-line summary.
#[derive(Debug)]
pub struct NodeReport {
    /// Decoded header and info.
    pub header: String,
    /// Per partition: sizes, compression and contents.
    pub parts: Vec<String>,
    /// Child block numbers (internal nodes).
    pub children: Vec<BlockNum>,
    /// Height (0 = leaf).
    pub height: u32,
    /// Uncompressed bytes.
    pub raw_bytes: u64,
    /// Stored bytes.
    pub disk_bytes: u64,
    /// Leaf entries or buffered messages.
    pub items: u64,
}

fn hexs(k: &[u8]) -> String {
    let s: String = k.iter().take(24).map(|b| format!("{b:02x}")).collect();
    if k.len() > 24 {
        format!("{s}..({} bytes)", k.len())
    } else {
        s
    }
}

fn read_node(f: &File, path: &Path, b: BlockNum, x: Extent) -> Result<(BlockHeader, Vec<u8>)> {
    let buf = read_at(f, path, x.offset, usize_of(x.len))?;
    let h = decode_header(&buf)
        .map_err(|e| corruption(path, format!("block {b} at offset {}", x.offset), e))?;
    if h.blocknum != b {
        return Err(corruption(
            path,
            format!("block {b}"),
            format!("holds block {}", h.blocknum),
        ));
    }
    Ok((h, buf))
}

/// Decode node `b` of the newest checkpoint, verifying every checksum.
pub fn node(path: &Path, b: BlockNum) -> Result<NodeReport> {
    let (f, h) = best(&RealFs, path)?;
    let t = read_table(&*f, path, &h)?;
    let x = *t
        .get(&b)
        .ok_or_else(|| corruption(path, "block table", format!("no block {b}")))?;
    node_at(&f, path, b, x)
}

fn node_at(f: &File, path: &Path, b: BlockNum, x: Extent) -> Result<NodeReport> {
    let (h, buf) = read_node(f, path, b, x)?;
    let mut header = format!(
        "block {b} offset {} len {} height {} partitions {} max_msn {}",
        x.offset,
        x.len,
        h.height,
        h.parts.len(),
        h.max_msn.0
    );
    for (i, p) in h.pivots.iter().enumerate() {
        let _ = write!(header, "\n  pivot {i}: {}", hexs(p));
    }
    let mut parts = Vec::new();
    let (mut raw, mut disk, mut items) = (0u64, 0u64, 0u64);
    for (i, loc) in h.parts.iter().enumerate() {
        let end = usize_of(loc.offset + u64::from(loc.disk_len));
        let s = buf.get(usize_of(loc.offset)..end).ok_or_else(|| {
            corruption(path, format!("block {b} partition {i}"), "beyond block end")
        })?;
        let d = decode_part(s, loc, h.height == 0)
            .map_err(|e| corruption(path, format!("block {b} partition {i}"), e))?;
        let method = match s.first() {
            Some(0) => "none",
            Some(1) => "lz4",
            Some(2) => "zstd",
            _ => "?",
        };
        let what = match &d {
            PartData::Leaf(bm) => {
                items += bm.len() as u64;
                format!("{} entries", bm.len())
            }
            PartData::Buf(cb) => {
                items += cb.count as u64;
                format!(
                    "child {} buffer: {} messages on {} keys, {} broadcasts",
                    h.children[i],
                    cb.count,
                    cb.distinct_keys(),
                    cb.bcasts.len()
                )
            }
        };
        raw += u64::from(loc.raw_len);
        disk += u64::from(loc.disk_len);
        parts.push(format!(
            "partition {i}: {} -> {} bytes ({method}), crc {:08x}, {what}",
            loc.raw_len, loc.disk_len, loc.crc
        ));
    }
    Ok(NodeReport {
        header,
        parts,
        children: h.children.clone(),
        height: h.height,
        raw_bytes: raw,
        disk_bytes: disk,
        items,
    })
}

/// One line per level of the checkpointed tree: nodes, items, bytes and fill.
pub fn shape(path: &Path) -> Result<String> {
    let (f, h) = best(&RealFs, path)?;
    let t = read_table(&*f, path, &h)?;
    let mut levels: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut q = VecDeque::from([h.root]);
    while let Some(b) = q.pop_front() {
        let x = *t.get(&b).ok_or_else(|| {
            corruption(
                path,
                "tree",
                format!("block {b} is referenced but not in the table"),
            )
        })?;
        let r = node_at(&f, path, b, x)?;
        let lvl = r.height as usize;
        if levels.len() <= lvl {
            levels.resize(lvl + 1, (0, 0, 0, 0));
        }
        let e = &mut levels[lvl];
        e.0 += 1;
        e.1 += r.items;
        e.2 += r.raw_bytes;
        e.3 += r.disk_bytes;
        q.extend(r.children);
    }
    let mut out = format!(
        "root {} node size {} basement {} fanout {}\n",
        h.root, h.node_bytes, h.basement_bytes, h.fanout
    );
    for (i, (n, items, raw, disk)) in levels.iter().enumerate().rev() {
        let fill = *raw as f64 / (*n as f64 * h.node_bytes as f64) * 100.0;
        let _ = writeln!(
            out,
            "height {i}: {n} nodes, {items} {}, {raw} bytes raw, {disk} on disk, {fill:.0}% full",
            if i == 0 { "entries" } else { "messages" }
        );
    }
    Ok(out)
}

/// What a verification found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Files checked.
    pub files: u64,
    /// Node blocks checked.
    pub blocks: u64,
    /// Log records checked.
    pub log_records: u64,
    /// Problems that mean data is damaged.
    pub errors: Vec<String>,
    /// Notes that need no action (a torn log tail, which recovery truncates).
    pub warnings: Vec<String>,
}

/// Verify one dictionary file: both headers, the block table, every reachable node and
/// partition, and that the table holds no unreachable blocks.
pub fn verify_file(path: &Path, report: &mut VerifyReport) {
    verify_file_on(&RealFs, path, report)
}

/// [`verify_file`] on the given storage.
pub fn verify_file_on(vfs: &dyn Vfs, path: &Path, report: &mut VerifyReport) {
    report.files += 1;
    match headers_on(vfs, path) {
        Ok(hs) => {
            for (i, h) in hs.iter().enumerate() {
                if let Err(e) = h {
                    report
                        .warnings
                        .push(format!("{}: header slot {i}: {e}", path.display()));
                }
            }
        }
        Err(e) => {
            report.errors.push(e.to_string());
            return;
        }
    }
    let (f, h) = match best(vfs, path) {
        Ok(x) => x,
        Err(e) => {
            report.errors.push(e.to_string());
            return;
        }
    };
    let t = match read_table(&*f, path, &h) {
        Ok(t) => t,
        Err(e) => {
            report.errors.push(e.to_string());
            return;
        }
    };
    let mut seen = HashSet::new();
    let mut q = VecDeque::from([h.root]);
    while let Some(b) = q.pop_front() {
        if !seen.insert(b) {
            report
                .errors
                .push(format!("{}: block {b} reachable twice", path.display()));
            continue;
        }
        let Some(&x) = t.get(&b) else {
            report.errors.push(format!(
                "{}: block {b} referenced but not in the table",
                path.display()
            ));
            continue;
        };
        report.blocks += 1;
        match node_at(&f, path, b, x) {
            Ok(r) => q.extend(r.children),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    for b in t.keys() {
        if !seen.contains(b) {
            report.warnings.push(format!(
                "{}: block {b} in the table but unreachable",
                path.display()
            ));
        }
    }
}

/// Verify an environment directory: catalog, every dictionary file, every log file.
pub fn verify_dir(dir: &Path) -> Result<VerifyReport> {
    verify_dir_on(&RealFs, dir)
}

/// [`verify_dir`] on the given storage.
pub fn verify_dir_on(vfs: &dyn Vfs, dir: &Path) -> Result<VerifyReport> {
    let mut r = VerifyReport::default();
    let cat = Catalog::load(vfs, dir)?;
    for (name, id) in &cat.by_name {
        let p: PathBuf = dir.join(dict_file_name(*id));
        if vfs.open(&p, OpenMode::Existing, false).is_err() {
            r.errors
                .push(format!("dictionary {name}: file {} missing", p.display()));
            continue;
        }
        verify_file_on(vfs, &p, &mut r);
    }
    let logs = crate::wal::list_files(vfs, dir)?;
    let n = logs.len();
    for (i, (_, p)) in logs.iter().enumerate() {
        r.files += 1;
        let lf = crate::wal::read_file_on(vfs, p)?;
        r.log_records += lf.records.len() as u64;
        if let Some(why) = lf.torn {
            let msg = format!("{}: {why} (valid up to byte {})", p.display(), lf.valid_len);
            if i + 1 == n {
                r.warnings.push(msg);
            } else {
                r.errors.push(msg);
            }
        }
    }
    Ok(r)
}
