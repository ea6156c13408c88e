//! libFuzzer on `tessera::inputs::recording`: arbitrary bytes as a recording file (written to
//! a scratch file, opened, every frame read); a panic, an abort or a timeout is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let scratch = std::env::temp_dir().join(format!("tessera-fuzz-{}.tsrec", std::process::id()));
    tessera::inputs::recording(data, &scratch);
});
