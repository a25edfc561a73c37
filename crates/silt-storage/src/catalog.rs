//! The catalog: which dictionaries exist, by name and id. A small text file replaced
//! atomically (write a temporary file, fsync, rename, fsync the directory) on every change.
//!
//! ```text
//! SILTCAT1
//! next <next dictionary id>
//! dict <id> <name, hex-encoded>
//! crc <crc32c of every line above, hex>
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{corruption, IoContext, Result};
use crate::ids::DictId;
use crate::vfs::{OpenMode, Vfs};

pub(crate) const CATALOG_FILE: &str = "catalog";

#[derive(Clone, Debug, Default)]
pub(crate) struct Catalog {
    pub next_id: u64,
    pub by_name: BTreeMap<String, DictId>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Catalog {
    pub(crate) fn load(vfs: &dyn Vfs, dir: &Path) -> Result<Catalog> {
        let path = dir.join(CATALOG_FILE);
        let text = match vfs.read(&path) {
            Ok(t) => String::from_utf8(t)
                .map_err(|_| corruption(&path, "catalog", "not UTF-8".to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Catalog {
                    next_id: 1,
                    by_name: BTreeMap::new(),
                })
            }
            Err(e) => return Err(e).ctx(&path),
        };
        let bad = |d: &str| corruption(&path, "catalog", d.to_string());
        let (body, last) = text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .ok_or_else(|| bad("too short"))?;
        let crc = last
            .strip_prefix("crc ")
            .and_then(|c| u32::from_str_radix(c, 16).ok())
            .ok_or_else(|| bad("missing checksum line"))?;
        let body = format!("{body}\n");
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err(bad("checksum mismatch"));
        }
        let mut c = Catalog::default();
        for (i, line) in body.lines().enumerate() {
            let f: Vec<&str> = line.split(' ').collect();
            match (i, f.as_slice()) {
                (0, ["SILTCAT1"]) => {}
                (_, ["next", n]) => c.next_id = n.parse().map_err(|_| bad("bad next id"))?,
                (_, ["dict", id, name]) => {
                    let id = DictId(id.parse().map_err(|_| bad("bad dictionary id"))?);
                    let name = unhex(name)
                        .and_then(|n| String::from_utf8(n).ok())
                        .ok_or_else(|| bad("bad dictionary name"))?;
                    c.by_name.insert(name, id);
                }
                _ => return Err(bad(&format!("unexpected line {}", i + 1))),
            }
        }
        Ok(c)
    }

    pub(crate) fn save(&self, vfs: &dyn Vfs, dir: &Path) -> Result<()> {
        let mut body = format!("SILTCAT1\nnext {}\n", self.next_id);
        for (name, id) in &self.by_name {
            body.push_str(&format!("dict {} {}\n", id.0, hex(name.as_bytes())));
        }
        let crc = crc32c::crc32c(body.as_bytes());
        body.push_str(&format!("crc {crc:08x}\n"));
        let tmp = dir.join("catalog.tmp");
        let path = dir.join(CATALOG_FILE);
        match vfs.remove(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).ctx(&tmp),
            _ => {}
        }
        let f = vfs.open(&tmp, OpenMode::CreateNew, false).ctx(&tmp)?;
        f.write_all_at(body.as_bytes(), 0).ctx(&tmp)?;
        f.sync().ctx(&tmp)?;
        drop(f);
        vfs.rename(&tmp, &path).ctx(&path)?;
        vfs.sync_dir(dir).ctx(dir)
    }
}

pub(crate) fn dict_file_name(id: DictId) -> String {
    format!("dict-{:010}.silt", id.0)
}

pub(crate) fn parse_dict_file(name: &str) -> Option<DictId> {
    name.strip_prefix("dict-")?
        .strip_suffix(".silt")?
        .parse()
        .ok()
        .map(DictId)
}
