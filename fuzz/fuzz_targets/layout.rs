//! libFuzzer on `tessera::inputs::layout`: arbitrary bytes; a panic, an abort, a leak or a
//! timeout is a finding, and so is an input that breaks the invariants of `inputs::check`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera::inputs::layout(data);
});
