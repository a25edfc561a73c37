//! `siltctl`: offline inspection of a SiltDB data directory or dictionary file. Reads only.
//! Knows the storage engine's inspection API and nothing else.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use silt_storage::{inspect, BlockNum};

#[derive(Parser)]
#[command(name = "siltctl", about = "Inspect SiltDB files offline")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print both header slots of a dictionary file.
    Header { file: PathBuf },
    /// Print the block translation table of the newest checkpoint.
    Blocks { file: PathBuf },
    /// Print one node: header, pivots and partitions.
    Node { file: PathBuf, block: u64 },
    /// Print the tree's shape: nodes, items, bytes and fill per level.
    Shape { file: PathBuf },
    /// Verify every checksum of a data directory (or one dictionary file).
    Verify { path: PathBuf },
    /// Print the records of a log file.
    Log {
        file: PathBuf,
        /// Print at most this many records.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

fn run(cli: Cli) -> silt_storage::Result<bool> {
    match cli.cmd {
        Cmd::Header { file } => {
            for (i, h) in inspect::headers(&file)?.iter().enumerate() {
                match h {
                    Ok(h) => println!("slot {i}: {h:#?}"),
                    Err(e) => println!("slot {i}: invalid ({e})"),
                }
            }
        }
        Cmd::Blocks { file } => {
            println!("{:>10} {:>14} {:>10}", "block", "offset", "length");
            for (b, x) in inspect::block_table(&file)? {
                println!("{:>10} {:>14} {:>10}", b.0, x.offset, x.len);
            }
        }
        Cmd::Node { file, block } => {
            let r = inspect::node(&file, BlockNum(block))?;
            println!("{}", r.header);
            for p in r.parts {
                println!("  {p}");
            }
        }
        Cmd::Shape { file } => print!("{}", inspect::shape(&file)?),
        Cmd::Verify { path } => {
            let r = if path.is_dir() {
                inspect::verify_dir(&path)?
            } else {
                let mut r = inspect::VerifyReport::default();
                inspect::verify_file(&path, &mut r);
                r
            };
            for w in &r.warnings {
                println!("warning: {w}");
            }
            for e in &r.errors {
                println!("ERROR: {e}");
            }
            println!(
                "{} files, {} blocks, {} log records checked: {} errors, {} warnings",
                r.files,
                r.blocks,
                r.log_records,
                r.errors.len(),
                r.warnings.len()
            );
            return Ok(r.errors.is_empty());
        }
        Cmd::Log { file, limit } => {
            let lf = silt_storage::read_log_file(&file)?;
            println!(
                "seq {} first lsn {} records {}",
                lf.seq,
                lf.first_lsn.0,
                lf.records.len()
            );
            for (lsn, r) in lf.records.iter().take(limit) {
                println!("{:>12} {r:?}", lsn.0);
            }
            if let Some(t) = lf.torn {
                println!("ends early: {t} (valid up to byte {})", lf.valid_len);
            }
        }
    }
    Ok(true)
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("siltctl: {e}");
            ExitCode::from(2)
        }
    }
}
