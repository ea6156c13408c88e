//! libFuzzer on `tessera::inputs::kubernetes`: arbitrary bytes; a panic, an abort, a leak or a
//! timeout is a finding, and so is an input that breaks the invariants of `inputs::check`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = tessera::inputs::check(&tessera::inputs::kubernetes(data)) {
        panic!("invariant broken: {e}");
    }
});
