//! CPU cost of one NVML collection against the fake library. Needs FAKE_NVML_LIB (the built
//! fake) and FAKE_NVML_SCENARIO (e.g. tests/fixtures/nvml/h100x8.json); without them it says
//! so and measures nothing.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tessera::sources::nvml::{Collector, open};

fn benches(c: &mut Criterion) {
    let (Some(lib), Some(scenario)) = (std::env::var_os("FAKE_NVML_LIB"), std::env::var_os("FAKE_NVML_SCENARIO"))
    else {
        eprintln!("nvml bench: set FAKE_NVML_LIB and FAKE_NVML_SCENARIO (see docs/benchmarks.md)");
        return;
    };
    let nvml = open(Some(&lib.to_string_lossy())).unwrap_or_else(|e| panic!("{e}"));
    let mut collector = Collector::new(&nvml);
    let name = format!(
        "nvml_collect_{}",
        std::path::Path::new(&scenario).file_stem().map(|s| s.to_string_lossy()).unwrap_or_default()
    );
    c.bench_function(&name, |b| b.iter(|| black_box(collector.collect())));
    // The same calls tessera makes per card, without tessera's mapping: the FFI and the fake.
    c.bench_function(&format!("{name}_raw_calls_only"), |b| {
        b.iter(|| {
            for i in 0..nvml.device_count().unwrap_or(0) {
                if let Ok(d) = nvml.device_by_index(i) {
                    let _ = black_box((
                        d.name(),
                        d.uuid(),
                        d.memory_info(),
                        d.utilization_rates(),
                        d.temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu),
                        d.power_usage(),
                        d.enforced_power_limit(),
                        d.compute_mode(),
                        d.mig_mode(),
                        d.pci_info(),
                    ));
                }
            }
        })
    });
}

criterion_group!(nvml_bench, benches);
criterion_main!(nvml_bench);
