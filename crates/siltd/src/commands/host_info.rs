//! The `hostInfo` command.

use bson::doc;

use super::common::hostname;
use crate::state::CmdResult;

pub(super) fn host_info() -> CmdResult {
    let mem_mb = crate::config::total_memory().unwrap_or(0) / (1 << 20);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    Ok(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": hostname(),
            "cpuAddrSize": 64,
            "memSizeMB": mem_mb as i64,
            "memLimitMB": mem_mb as i64,
            "numCores": crate::num::int32(cores),
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": false,
        },
        "os": os(),
        "extra": {},
    })
}

/// mongod's `os` on Linux: the kernel's name, the distribution's (`/etc/os-release`) and the
/// kernel release.
fn os() -> bson::Document {
    let name = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    let version = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    let kind = match std::env::consts::OS {
        "linux" => "Linux",
        other => other,
    };
    doc! { "type": kind, "name": name, "version": version }
}
