//! The RESP parser against whatever libFuzzer makes up: it must never
//! panic, and every command it finds must survive a round trip (see
//! `check_parse`). Run with `scripts/fuzz-resp`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shoal_datanode::testing::check_parse(data);
});
