//! The `buildInfo` command.

use bson::doc;

use super::common::MONGO_VERSION;
use crate::state::CmdResult;

pub(super) fn build_info() -> CmdResult {
    Ok(doc! {
        "version": MONGO_VERSION,
        "gitVersion": "siltdb",
        "versionArray": [7, 0, 0, 0],
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": crate::num::int32(silt_wire::MAX_BSON_OBJECT_BYTES),
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "storageEngines": ["silt"],
        "openssl": { "running": "disabled" },
        // How this binary was built, in mongod's field names where they apply.
        "buildEnvironment": {
            "distmod": "",
            "distarch": std::env::consts::ARCH,
            "cc": "rustc",
            "ccflags": "",
            "cxx": "",
            "cxxflags": "",
            "linkflags": "",
            "target_arch": std::env::consts::ARCH,
            "target_os": std::env::consts::OS,
            "cppdefines": "",
        },
        "silt": { "version": env!("CARGO_PKG_VERSION"), "engine": "fractal tree" },
    })
}
