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
        "os": { "type": std::env::consts::OS, "name": std::env::consts::OS },
        "extra": {},
    })
}
