//! Fuzz target: the backend reply scanner, whole and in chunks, against
//! the reference parser of `tests/fuzz/oracle.rs`.

#![no_main]

#[path = "../oracle.rs"]
mod oracle;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracle::check_replies(data));
