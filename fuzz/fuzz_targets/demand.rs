//! libFuzzer on the demand inputs of `tessera simulate` (`inputs::openb_pods`, `openb_nodes`,
//! `demand_csv`): arbitrary bytes; a panic, an abort, a leak or a timeout is a finding, and so
//! is a demand that breaks the invariants of `inputs::check_demand`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for door in [tessera::inputs::openb_pods, tessera::inputs::openb_nodes, tessera::inputs::demand_csv] {
        if let Err(e) = door(data) {
            panic!("invariant broken: {e}");
        }
    }
});
