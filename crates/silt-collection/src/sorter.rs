//! External sort for index builds: entries are collected up to a memory budget, sorted and
//! spilled to run files, and merged back in key order. An index build over a collection much
//! larger than memory therefore holds at most the budget, not every key.
//!
//! Run files live in a temporary directory (the data directory's `_tmp`, as mongod's external
//! sorter) and are deleted when the sorter or its merge is dropped. Keys are unique (an index
//! entry ends with the document's `_id`), so the merge needs no tie-breaking.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Most runs merged at once: more would mean more open files than a default descriptor
/// limit allows next to the server's sockets. Beyond it, runs are merged in passes.
const FAN_IN: usize = 128;

static NEXT_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A fresh run file name in `dir`, unique within the process (and across processes by pid).
fn run_path(dir: &Path) -> PathBuf {
    let n = NEXT_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("sort-{}-{n}.run", std::process::id()))
}

/// A key and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// What one in-memory entry is charged: its bytes plus the vector headers.
fn cost(k: &[u8], v: &[u8]) -> usize {
    k.len() + v.len() + 2 * std::mem::size_of::<Vec<u8>>()
}

/// Collects `(key, value)` pairs, spilling sorted runs to disk past the memory budget.
pub struct Sorter {
    dir: PathBuf,
    budget: usize,
    mem: Vec<Entry>,
    mem_bytes: usize,
    runs: Vec<PathBuf>,
    len: u64,
}

impl Sorter {
    /// A sorter that keeps at most about `budget` bytes of entries in memory and spills to
    /// files under `dir` (created if missing).
    pub fn new(dir: &Path, budget: usize) -> std::io::Result<Sorter> {
        std::fs::create_dir_all(dir)?;
        Ok(Sorter {
            dir: dir.to_path_buf(),
            budget: budget.max(1),
            mem: Vec::new(),
            mem_bytes: 0,
            runs: Vec::new(),
            len: 0,
        })
    }

    /// Entries pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Run files written so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    pub fn push(&mut self, key: Vec<u8>, val: Vec<u8>) -> std::io::Result<()> {
        self.mem_bytes += cost(&key, &val);
        self.mem.push((key, val));
        self.len += 1;
        if self.mem_bytes >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> std::io::Result<()> {
        if self.mem.is_empty() {
            return Ok(());
        }
        self.mem.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let path = run_path(&self.dir);
        // Registered before writing, so a failed write still gets cleaned up.
        self.runs.push(path.clone());
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
        for (k, v) in self.mem.drain(..) {
            write_entry(&mut w, &k, &v)?;
        }
        w.into_inner().map_err(|e| e.into_error())?;
        self.mem = Vec::new();
        self.mem_bytes = 0;
        Ok(())
    }

    /// Every entry in key order.
    pub fn finish(mut self) -> std::io::Result<Merge> {
        if self.runs.is_empty() {
            let mut mem = std::mem::take(&mut self.mem);
            mem.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            return Ok(Merge {
                mem: mem.into_iter(),
                readers: Vec::new(),
                heap: BinaryHeap::new(),
                runs: Vec::new(),
            });
        }
        self.spill()?;
        let mut runs = std::mem::take(&mut self.runs);
        // Too many runs for one merge: merge the oldest ones into a new run until few remain.
        while runs.len() > FAN_IN {
            let group: Vec<PathBuf> = runs.drain(..FAN_IN).collect();
            let out = run_path(&self.dir);
            // Registered first, so that a failure below still removes it.
            self.runs.push(out.clone());
            let merged = open_merge(group, self.budget)?;
            let mut w = BufWriter::with_capacity(1 << 20, File::create(&out)?);
            for e in merged {
                let (k, v) = e?;
                write_entry(&mut w, &k, &v)?;
            }
            w.into_inner().map_err(|e| e.into_error())?;
            self.runs.pop();
            runs.push(out);
        }
        open_merge(runs, self.budget)
    }
}

/// A merge over `runs`, which it deletes when dropped.
fn open_merge(runs: Vec<PathBuf>, budget: usize) -> std::io::Result<Merge> {
    let mut m = Merge {
        mem: Vec::new().into_iter(),
        readers: Vec::with_capacity(runs.len()),
        heap: BinaryHeap::with_capacity(runs.len()),
        runs,
    };
    // Small read buffers: the runs share the memory the budget allowed for one.
    let buf = (budget / m.runs.len().max(1)).clamp(16 << 10, 1 << 20);
    for i in 0..m.runs.len() {
        let f = File::open(&m.runs[i])?;
        m.readers.push(BufReader::with_capacity(buf, f));
        if let Some(e) = read_entry(&mut m.readers[i])? {
            m.heap.push(Reverse((e.0, i, e.1)));
        }
    }
    Ok(m)
}

fn write_entry(w: &mut impl Write, k: &[u8], v: &[u8]) -> std::io::Result<()> {
    // A run stores u32 lengths; keys and values are storage-engine sized (far below 4 GiB),
    // but a truncated length would misread the run, so refuse rather than wrap.
    let len = |b: &[u8]| u32::try_from(b.len()).map_err(std::io::Error::other);
    w.write_all(&len(k)?.to_le_bytes())?;
    w.write_all(&len(v)?.to_le_bytes())?;
    w.write_all(k)?;
    w.write_all(v)
}

impl Drop for Sorter {
    fn drop(&mut self) {
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn read_entry(r: &mut BufReader<File>) -> std::io::Result<Option<Entry>> {
    let mut lens = [0u8; 8];
    match r.read_exact(&mut lens) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let kl = u32::from_le_bytes(lens[..4].try_into().unwrap_or_default()) as usize;
    let vl = u32::from_le_bytes(lens[4..].try_into().unwrap_or_default()) as usize;
    let mut k = vec![0u8; kl];
    r.read_exact(&mut k)?;
    let mut v = vec![0u8; vl];
    r.read_exact(&mut v)?;
    Ok(Some((k, v)))
}

/// A run's next entry in the merge heap: key, run number, value (smallest key on top).
type Head = Reverse<(Vec<u8>, usize, Vec<u8>)>;

/// The sorted entries: from memory when nothing was spilled, else a k-way merge of the runs.
pub struct Merge {
    mem: std::vec::IntoIter<Entry>,
    readers: Vec<BufReader<File>>,
    heap: BinaryHeap<Head>,
    runs: Vec<PathBuf>,
}

impl Iterator for Merge {
    type Item = std::io::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.readers.is_empty() {
            return self.mem.next().map(Ok);
        }
        let Reverse((k, i, v)) = self.heap.pop()?;
        match read_entry(&mut self.readers[i]) {
            Ok(Some(e)) => self.heap.push(Reverse((e.0, i, e.1))),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok((k, v)))
    }
}

impl Drop for Merge {
    fn drop(&mut self) {
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(entries: &[Entry], budget: usize) -> (Vec<Entry>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sorter::new(dir.path(), budget).unwrap();
        for (k, v) in entries {
            s.push(k.clone(), v.clone()).unwrap();
        }
        let runs = s.spilled_runs();
        let out: Vec<_> = s.finish().unwrap().map(|e| e.unwrap()).collect();
        // Every run file is gone once the merge is dropped.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        (out, runs)
    }

    #[test]
    fn spills_and_merges_in_order() {
        let entries: Vec<_> = (0..50_000u32)
            .map(|i| {
                let k = (i.wrapping_mul(2_654_435_761)).to_be_bytes().to_vec();
                (k, i.to_le_bytes().to_vec())
            })
            .collect();
        let (out, runs) = sorted(&entries, 1 << 20);
        assert!(runs > 1, "a 1 MiB budget spills 50,000 entries");
        let mut want = entries.clone();
        want.sort();
        assert_eq!(out, want);
        // More runs than one merge takes: merged in passes.
        let (out, runs) = sorted(&entries, 10_000);
        assert!(runs > FAN_IN, "{runs} runs");
        let mut want = entries.clone();
        want.sort();
        assert_eq!(out, want);
    }

    proptest! {
        #[test]
        fn matches_an_in_memory_sort(keys in prop::collection::btree_set(prop::collection::vec(any::<u8>(), 0..40), 0..400)) {
            let mut entries: Vec<_> = keys.into_iter().map(|k| (k.clone(), k.iter().rev().copied().collect::<Vec<u8>>())).collect();
            // Pushed in a scrambled order.
            entries.reverse();
            let third = entries.len() / 3;
            entries.rotate_left(third);
            // A budget of a few entries (many runs) and one that holds them all.
            let mut want = entries.clone();
            want.sort();
            for budget in [300, 1 << 30] {
                let (out, _) = sorted(&entries, budget);
                prop_assert_eq!(&out, &want);
            }
        }
    }
}
