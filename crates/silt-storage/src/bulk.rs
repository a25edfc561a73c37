//! Bulk loading: build a dictionary's tree bottom-up from sorted input, writing each leaf and
//! internal node once, with no buffers and no log records; a checkpoint makes it durable.

use std::time::Instant;

use crate::dict::Dict;
use crate::error::{Error, Result};
use crate::format::btt::Extent;
use crate::format::node::{encode_basement, encode_block, encode_buffer, NodeImage};
use crate::ids::{BlockNum, Msn};
use crate::tree::count::{basement_count, SubCount};
use crate::tree::node::{entry_bytes, ChildBuf, Key, LeafBuilder};
use crate::tree::{missing, Need};
use crate::tree_io::load_node;

struct Built {
    first: Key,
    block: BlockNum,
    ext: Extent,
    /// Keys in its subtree.
    count: u64,
}

pub(crate) fn bulk_load<I, K, V>(d: &Dict, entries: I) -> Result<u64>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let env = &d.env;
    let core = &d.core;
    // Whether the dictionary is empty, or the read of the root partitions evicted since.
    let is_empty = |t: &crate::tree::Tree| -> std::result::Result<bool, crate::tree::Need> {
        if let Some(need) = t.root_need() {
            return Err(need);
        }
        let r = t.node(t.root);
        Ok(r.is_leaf()
            && r.parts
                .iter()
                .all(|p| p.data.as_ref().is_some_and(|x| x.bytes() == 0)))
    };
    let cfg = loop {
        let t = core.tree.read();
        let empty = match is_empty(&t) {
            Ok(e) => e,
            Err(need) => {
                drop(t);
                core.do_io(env, need)?;
                continue;
            }
        };
        if !empty {
            return Err(Error::InvalidOptions(
                "bulk load needs an empty dictionary".into(),
            ));
        }
        break t.cfg;
    };
    let started = Instant::now();
    let mut written: Vec<(BlockNum, Extent)> = Vec::new();
    let alloc_block = || {
        let mut t = core.tree.write();
        let b = BlockNum(t.next_block);
        t.next_block += 1;
        b
    };
    let write = |img: &NodeImage, written: &mut Vec<(BlockNum, Extent)>| -> Result<Extent> {
        let (bytes, _) = encode_block(img, env.opts.compression);
        let x = core.file.write_block(&bytes);
        crate::bufpool::give(bytes);
        let x = x?;
        written.push((img.blocknum, x));
        Ok(x)
    };
    let leaf_target = cfg.node_bytes * 9 / 10;
    let mut level: Vec<Built> = Vec::new();
    // The leaf being built and its first key.
    let mut cur: Option<(Key, LeafBuilder)> = None;
    let mut cur_bytes = 0usize;
    let (mut rows, mut bytes) = (0u64, 0u64);
    let flush_leaf = |cur: &mut Option<(Key, LeafBuilder)>,
                      level: &mut Vec<Built>,
                      written: &mut Vec<(BlockNum, Extent)>|
     -> Result<()> {
        let Some((first, built)) = cur.take() else {
            return Ok(());
        };
        let (bms, pivots) = built.finish();
        let block = alloc_block();
        let img = NodeImage {
            blocknum: block,
            height: 0,
            max_msn: Msn(0),
            pivots,
            children: Vec::new(),
            parts: bms.iter().map(encode_basement).collect(),
            counts: bms.iter().map(|b| Some(basement_count(b))).collect(),
            gen: 0,
        };
        let ext = write(&img, written)?;
        let count = bms.iter().map(|b| b.len() as u64).sum();
        level.push(Built {
            first,
            block,
            ext,
            count,
        });
        Ok(())
    };
    let mut prev: Option<Key> = None;
    for (k, v) in entries {
        let (k, v) = (k.as_ref(), v.as_ref());
        if prev.as_deref().is_some_and(|p| p >= k) {
            free_all(d, &written);
            return Err(Error::UnsortedBulkLoad);
        }
        let eb = entry_bytes(k, v);
        if cur_bytes + eb > leaf_target && cur.is_some() {
            if let Err(e) = flush_leaf(&mut cur, &mut level, &mut written) {
                free_all(d, &written);
                return Err(e);
            }
            cur_bytes = 0;
        }
        cur_bytes += eb;
        rows += 1;
        bytes += (k.len() + v.len()) as u64;
        prev = Some(k.into());
        cur.get_or_insert_with(|| (k.into(), LeafBuilder::new(cfg.basement_bytes)))
            .1
            .push(k, crate::tree::le::LE_CLEAN, v);
        if rows % 1_000_000 == 0 {
            tracing::info!(
                rows,
                elapsed_s = started.elapsed().as_secs_f64(),
                "bulk load progress"
            );
        }
    }
    flush_leaf(&mut cur, &mut level, &mut written)?;
    if level.is_empty() {
        return Ok(0);
    }
    let mut height = 0;
    while level.len() > 1 {
        height += 1;
        let mut up = Vec::new();
        for group in level.chunks(cfg.fanout) {
            let block = alloc_block();
            let img = NodeImage {
                blocknum: block,
                height,
                max_msn: Msn(0),
                pivots: group[1..].iter().map(|b| b.first.clone()).collect(),
                children: group.iter().map(|b| b.block).collect(),
                parts: group
                    .iter()
                    .map(|_| encode_buffer(&ChildBuf::default()))
                    .collect(),
                counts: group
                    .iter()
                    .map(|b| {
                        Some(SubCount {
                            live: b.count as i64,
                            ..SubCount::default()
                        })
                    })
                    .collect(),
                gen: 0,
            };
            let ext = write(&img, &mut written)?;
            up.push(Built {
                first: group[0].first.clone(),
                block,
                ext,
                count: group.iter().map(|b| b.count).sum(),
            });
        }
        level = up;
    }
    let root = &level[0];
    let mut node = load_node(&core.file, root.block, root.ext)?;
    if let Need::Parts(_, list) = missing(&node) {
        for (i, loc) in list {
            let leaf = node.is_leaf();
            let d = core
                .file
                .read_with(loc.offset, loc.disk_len as usize, |buf| {
                    crate::format::node::decode_part(buf, &loc, leaf)
                })?
                .map_err(|e| crate::error::corruption(&core.file.path, "bulk-loaded root", e))?;
            node.parts[i].data = Some(d);
        }
    }
    let mut node = Some(node);
    let installed = loop {
        let done = crate::write::install_tree(env, core, |t| {
            match is_empty(t) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(need) => return Err(need),
            }
            {
                let mut st = core.file.state.lock();
                for (b, x) in &written {
                    st.set_current(*b, *x);
                }
            }
            let old_root = t.root;
            t.root = root.block;
            t.insert_node(node.take().expect("installed once"));
            t.remove_node_pub(old_root);
            t.stats.rows += rows as i64;
            t.stats.bytes += bytes as i64;
            Ok(true)
        });
        match done {
            Ok(installed) => break installed,
            Err(need) => core.do_io(env, need)?,
        }
    };
    if !installed {
        free_all(d, &written);
        return Err(Error::InvalidOptions(
            "dictionary was written to during the bulk load".into(),
        ));
    }
    tracing::info!(
        rows,
        elapsed_s = started.elapsed().as_secs_f64(),
        "bulk load written; checkpointing"
    );
    env.checkpoint()?;
    Ok(rows)
}

fn free_all(d: &Dict, written: &[(BlockNum, Extent)]) {
    let mut st = d.core.file.state.lock();
    for (_, x) in written {
        st.alloc.free(*x);
    }
}
