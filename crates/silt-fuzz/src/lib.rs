//! The bodies of SiltDB's fuzz targets. `fuzz/` (run with `cargo +nightly fuzz`, see
//! `fuzz/README.md`) calls them from libFuzzer; the tests here replay every input saved under
//! `fuzz/regressions/<target>/` (what the fuzzers found, kept once fixed) and the seeds, on
//! stable, in `make test`.
//!
//! This crate owns no product code: it sits on top of the layers it exercises (wire parsing,
//! key encoding, the matcher and update applier, the engine's on-disk decoders) and nothing
//! depends on it.

mod gen;

use std::cmp::Ordering;

use arbitrary::Unstructured;
use bson::{Bson, Document};

/// A whole wire message: framing, then parsing with any compressor it names.
pub fn wire(data: &[u8]) {
    if let Ok((header, body)) = silt_wire::split_message(data) {
        let _ = silt_wire::parse_message_with_compressor(&header, body);
    }
    if data.len() >= silt_wire::HEADER_LEN {
        if let Ok(h) = silt_wire::MsgHeader::parse(&data[..silt_wire::HEADER_LEN]) {
            let _ = silt_wire::parse_message_with_compressor(&h, &data[silt_wire::HEADER_LEN..]);
        }
    }
}

/// The order-preserving key encoding: for generated values `a` and `b`, the byte order of
/// their encodings is `cmp_values`' order (reversed for descending components), decoding
/// gives back an equal value (the very value when `is_exact`), and decoding arbitrary bytes
/// fails cleanly.
pub fn keyenc(data: &[u8]) {
    let _ = silt_bson::keyenc::decode_value(data);
    let _ = silt_bson::keyenc::decode_value_desc(data);
    let mut u = Unstructured::new(data);
    let (Ok(a), Ok(b)) = (gen::value(&mut u, 0), gen::value(&mut u, 0)) else {
        return;
    };
    let (ea, eb) = (silt_bson::keyenc::encode(&a), silt_bson::keyenc::encode(&b));
    let order = silt_bson::cmp_values(&a, &b);
    assert_eq!(
        ea.cmp(&eb),
        order,
        "encodings disagree with cmp_values: {a:?} vs {b:?}"
    );
    let (back, used) = silt_bson::keyenc::decode_value(&ea).expect("an encoding decodes");
    assert_eq!(used, ea.len(), "decoding {a:?} left bytes");
    assert_eq!(
        silt_bson::cmp_values(&back, &a),
        Ordering::Equal,
        "{a:?} decoded as {back:?}"
    );
    if silt_bson::keyenc::is_exact(&a) {
        assert!(
            same_bytes(&back, &a),
            "{a:?} is exact but decoded as {back:?}"
        );
    }
    let key = silt_bson::keyenc::encode_key(&[(&a, false), (&b, true)]);
    let parts = silt_bson::keyenc::decode_key(&key, &[false, true]).expect("a key decodes");
    assert_eq!(parts.len(), 2);
}

fn same_bytes(x: &Bson, y: &Bson) -> bool {
    let wrap = |v: &Bson| bson::to_vec(&bson::doc! { "v": v.clone() }).ok();
    wrap(x) == wrap(y)
}

/// The matcher and the update applier: a generated filter, document and update (with array
/// filters) are compiled and applied; errors are fine, panics are not. An update that
/// succeeds yields a document that encodes as BSON.
pub fn matcher_update(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let (Ok(filter), Ok(doc), Ok(update)) = (
        gen::document(&mut u, 0),
        gen::document(&mut u, 0),
        gen::document(&mut u, 0),
    ) else {
        return;
    };
    let filters: Vec<Document> = gen::document(&mut u, 1).ok().into_iter().collect();
    if let Ok(m) = silt_query::matcher::Matcher::new(&filter) {
        let _ = m.matches(&doc);
    }
    let af = (!filters.is_empty()).then_some(filters.as_slice());
    if let Ok(spec) = silt_query::update::UpdateSpec::parse(&update, af) {
        let ctx = silt_query::update::UpdateCtx::default();
        if let Ok((out, _)) = spec.apply(&doc, &ctx) {
            let _ = bson::to_vec(&out);
        }
    }
}

/// The engine's decoders of what it reads from disk.
pub fn node(data: &[u8]) {
    silt_storage::fuzzing::decode_everything(data);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// Every saved input of `target` (its regressions and seeds) runs without a panic.
    fn replay(target: &str, f: fn(&[u8])) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut n = 0;
        for dir in ["regressions", "seeds"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
                continue;
            };
            for e in entries.flatten() {
                let bytes = std::fs::read(e.path()).unwrap();
                f(&bytes);
                n += 1;
            }
        }
        eprintln!("{target}: {n} saved inputs replayed");
    }

    #[test]
    fn wire_inputs() {
        replay("wire", super::wire);
    }

    #[test]
    fn keyenc_inputs() {
        replay("keyenc", super::keyenc);
    }

    #[test]
    fn matcher_update_inputs() {
        replay("matcher_update", super::matcher_update);
    }

    #[test]
    fn node_inputs() {
        replay("node", super::node);
    }

    /// A few thousand pseudo-random inputs per target, so that `make test` exercises the
    /// targets even where no fuzzer runs.
    #[test]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a byte is the low 8 bits of the xorshift state, truncated on purpose"
    )]
    fn pseudo_random_inputs() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..3000usize {
            let bytes: Vec<u8> = (0..len % 300)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            super::wire(&bytes);
            super::keyenc(&bytes);
            super::matcher_update(&bytes);
            super::node(&bytes);
        }
    }
}
