//! Snapshot files: the newest snapshot this member built or installed, kept on disk so that
//! it outlives a restart and can be sent to a member behind the purged log, and the one it
//! is receiving.
//!
//! A snapshot is two files in the member's `snapshots` directory, named by the last log id
//! it covers (`<index>-<term>`, the index zero-padded to 20 digits):
//! - `.data`: the state machine's bytes ([`crate::SnapshotView::write_to`]), opaque here;
//! - `.meta`: openraft's snapshot meta (the log id and the membership), `types::encode`d,
//!   written after the data is durable, so a `.meta` names a complete snapshot.
//!
//! Files being written end in `.tmp` and are removed when the member starts. Only the
//! newest complete snapshot is kept.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::state::SnapshotView;
use crate::types::{decode, encode, LogId, Snapshot, SnapshotData, SnapshotMeta};

/// A transfer being received: which snapshot, and how many bytes have arrived.
struct Receiving {
    of: Option<LogId>,
    file: File,
    bytes: u64,
    /// Bytes received when progress was last logged.
    logged: u64,
}

/// The snapshot directory of one member.
pub(crate) struct Snapshots {
    dir: PathBuf,
    current: Mutex<Option<(SnapshotMeta, PathBuf)>>,
    receiving: Mutex<Option<Receiving>>,
}

fn stem(id: Option<&LogId>) -> String {
    match id {
        Some(l) => format!("{:020}-{}", l.index, l.leader_id.term),
        None => "empty".into(),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Snapshots {
    /// Open (creating) `dir`: find the newest complete snapshot, remove everything else.
    pub(crate) fn open(dir: &Path) -> io::Result<Snapshots> {
        fs::create_dir_all(dir)?;
        for e in fs::read_dir(dir)? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "tmp") {
                fs::remove_file(&p)?;
            }
        }
        let mut newest: Option<(SnapshotMeta, PathBuf)> = None;
        for e in fs::read_dir(dir)? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "meta") {
                let meta: SnapshotMeta = match fs::read(&p).and_then(|b| decode(&b)) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(file = %p.display(), error = %e, "an unreadable snapshot meta");
                        continue;
                    }
                };
                let data = p.with_extension("data");
                if data.exists()
                    && newest
                        .as_ref()
                        .is_none_or(|(m, _)| m.last_log_id < meta.last_log_id)
                {
                    newest = Some((meta, data));
                }
            }
        }
        let s = Snapshots {
            dir: dir.to_path_buf(),
            current: Mutex::new(newest),
            receiving: Mutex::new(None),
        };
        s.remove_others()?;
        Ok(s)
    }

    /// The newest snapshot, if there is one.
    pub(crate) fn current(&self) -> Option<Snapshot> {
        self.current.lock().as_ref().map(|(meta, path)| Snapshot {
            meta: meta.clone(),
            snapshot: SnapshotData { path: path.clone() },
        })
    }

    /// Bytes of the snapshot being received, if one is.
    pub(crate) fn receiving(&self) -> Option<u64> {
        self.receiving.lock().as_ref().map(|r| r.bytes)
    }

    fn data_path(&self, meta: &SnapshotMeta) -> PathBuf {
        self.dir
            .join(format!("{}.data", stem(meta.last_log_id.as_ref())))
    }

    /// Write `view` as the snapshot `meta` describes (blocking), and make it the newest.
    pub(crate) fn build(
        &self,
        meta: SnapshotMeta,
        view: Box<dyn SnapshotView>,
    ) -> io::Result<Snapshot> {
        let data = self.data_path(&meta);
        let tmp = data.with_extension("data.building.tmp");
        let started = std::time::Instant::now();
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        view.write_to(&mut w)?;
        let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        let bytes = file.metadata()?.len();
        fs::rename(&tmp, &data)?;
        self.adopt(&meta, &data)?;
        tracing::info!(
            index = meta.last_log_id.as_ref().map(|l| l.index),
            bytes,
            ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "built a snapshot"
        );
        Ok(Snapshot {
            meta,
            snapshot: SnapshotData { path: data },
        })
    }

    /// Record `data` (complete and durable) as the snapshot `meta`, the newest unless a newer
    /// one is there; remove what is older.
    pub(crate) fn adopt(&self, meta: &SnapshotMeta, data: &Path) -> io::Result<()> {
        let meta_path = data.with_extension("meta");
        let tmp = data.with_extension("meta.tmp");
        let mut f = File::create(&tmp)?;
        f.write_all(&encode(meta)?)?;
        f.sync_all()?;
        fs::rename(&tmp, &meta_path)?;
        sync_dir(&self.dir)?;
        {
            let mut cur = self.current.lock();
            if cur
                .as_ref()
                .is_none_or(|(m, _)| m.last_log_id <= meta.last_log_id)
            {
                *cur = Some((meta.clone(), data.to_path_buf()));
            }
        }
        self.remove_others()
    }

    /// Remove every file but the newest snapshot's and those being written.
    fn remove_others(&self) -> io::Result<()> {
        let keep = self.current.lock().as_ref().map(|(_, p)| p.clone());
        for e in fs::read_dir(&self.dir)? {
            let p = e?.path();
            let mine = keep
                .as_ref()
                .is_some_and(|k| p == *k || p == k.with_extension("meta"));
            if mine || p.extension().is_some_and(|x| x == "tmp") {
                continue;
            }
            let _ = fs::remove_file(&p);
        }
        Ok(())
    }

    fn incoming_path(&self) -> PathBuf {
        self.dir.join("incoming.data.tmp")
    }

    /// Take `data` at `offset` of snapshot `of` being sent to this member. A transfer starts
    /// at offset 0 (dropping one that was under way); a chunk out of order is refused and the
    /// sender starts again.
    pub(crate) fn receive(&self, of: Option<&LogId>, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut r = self.receiving.lock();
        if offset == 0 {
            let file = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(self.incoming_path())?;
            tracing::info!(index = of.map(|l| l.index), "receiving a snapshot");
            *r = Some(Receiving {
                of: of.cloned(),
                file,
                bytes: 0,
                logged: 0,
            });
        }
        let Some(rx) = r
            .as_mut()
            .filter(|rx| rx.of.as_ref() == of && rx.bytes == offset)
        else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a snapshot chunk at {offset} is not the next one"),
            ));
        };
        rx.file.write_all(data)?;
        rx.bytes += data.len() as u64;
        if rx.bytes - rx.logged >= 64 << 20 {
            rx.logged = rx.bytes;
            tracing::info!(
                index = of.map(|l| l.index),
                mib = rx.bytes >> 20,
                "receiving a snapshot"
            );
        }
        Ok(())
    }

    /// The transfer of `meta`'s snapshot is complete: make its file durable under its name
    /// and return it, to be installed.
    pub(crate) fn received(&self, meta: &SnapshotMeta) -> io::Result<SnapshotData> {
        let rx = self.receiving.lock().take();
        let Some(rx) = rx.filter(|rx| rx.of == meta.last_log_id) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the end of a snapshot that is not being received",
            ));
        };
        rx.file.sync_all()?;
        drop(rx.file);
        let data = self.data_path(meta);
        fs::rename(self.incoming_path(), &data)?;
        sync_dir(&self.dir)?;
        tracing::info!(
            index = meta.last_log_id.as_ref().map(|l| l.index),
            bytes = rx.bytes,
            "received a snapshot"
        );
        Ok(SnapshotData { path: data })
    }
}
