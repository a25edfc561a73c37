//! W2a (ingest with three secondary indexes, one insert thread, batches of 1,000) on the
//! peers: FerretDB through the wire with the same indexes, PostgreSQL into a jsonb table with
//! three expression indexes on the same keys. The peers run the ingest to T only; retention
//! (W2b) is siltd's experiment (deletes against partition drops) and is not run on them.
//! Each run checks that the table ends holding exactly the T documents inserted.

use std::time::Instant;

use bson::doc;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::iibench::{purchase, Args, BATCH, COLL, DB};
use crate::progress::Bar;
use crate::target::{PeerName, Target};

/// (documents inserted, seconds since the start) after every batch.
pub(crate) type Marks = Vec<(u64, f64)>;

/// Insert T documents through `insert`, timing every batch.
fn ingest(
    a: &Args,
    label: &str,
    mut insert: impl FnMut(Vec<bson::Document>) -> Result<(), String>,
) -> Result<Marks, String> {
    let mut rng = SmallRng::seed_from_u64(2);
    let data: String = "d".repeat(a.data_bytes);
    let mut marks = Vec::with_capacity((a.docs / BATCH) as usize);
    let mut bar = Bar::new(label, a.docs);
    let started = Instant::now();
    let mut inserted = 0u64;
    while inserted < a.docs {
        let n = BATCH.min(a.docs - inserted);
        let batch = (inserted..inserted + n)
            .map(|i| purchase(&mut rng, i as i64, &data))
            .collect();
        insert(batch)?;
        inserted += n;
        marks.push((inserted, started.elapsed().as_secs_f64()));
        bar.set(inserted);
    }
    bar.done();
    Ok(marks)
}

pub(crate) fn run_peer(p: PeerName, a: &Args) -> Result<(&'static str, Marks), String> {
    match p {
        PeerName::Postgres => postgres(a).map(|m| ("postgres", m)),
        _ => {
            let t = Target::peer(p, DB)?;
            let mut c = t.connect()?;
            crate::iibench::create_indexes(&mut c)?;
            let marks = ingest(a, &format!("{} ingest", t.name()), |batch| {
                c.command(
                    DB,
                    doc! { "insert": COLL, "documents": batch, "ordered": false },
                )
                .map(|_| ())
            })?;
            let r = c.command(DB, doc! { "count": COLL })?;
            let n = r
                .get_i32("n")
                .map(i64::from)
                .or_else(|_| r.get_i64("n"))
                .unwrap_or(-1);
            if n != a.docs as i64 {
                return Err(format!(
                    "{}: the collection holds {n} documents after {} inserts",
                    t.name(),
                    a.docs
                ));
            }
            Ok((t.name(), marks))
        }
    }
}

#[cfg(not(feature = "postgres"))]
fn postgres(_: &Args) -> Result<Marks, String> {
    Err("silt-bench was built without the postgres peer: build with `--features postgres` (bench/peers.sh install does)".into())
}

#[cfg(feature = "postgres")]
fn postgres(a: &Args) -> Result<Marks, String> {
    let mut pg = crate::pg::Pg::connect()?;
    eprintln!("[postgres] server {}", pg.version());
    pg.create(
        COLL,
        &[
            &[("price", "float8"), ("customerid", "int")],
            &[
                ("cashregisterid", "int"),
                ("price", "float8"),
                ("customerid", "int"),
            ],
            &[
                ("price", "float8"),
                ("dateandtime.$date", "text"),
                ("customerid", "int"),
            ],
        ],
    )?;
    let marks = ingest(a, "postgres ingest", |batch| {
        pg.insert(COLL, &batch).map(|_| ())
    })?;
    let n = pg.count(COLL)?;
    pg.drop_table(COLL)?;
    if n != a.docs as i64 {
        return Err(format!(
            "postgres: the table holds {n} rows after {} inserts",
            a.docs
        ));
    }
    Ok(marks)
}
