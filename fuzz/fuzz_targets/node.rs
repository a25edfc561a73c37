#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| silt_fuzz::node(data));
