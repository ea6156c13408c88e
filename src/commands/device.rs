//! `tessera device-check`: the steps of the read-only device check (scripts/device-check.sh):
//! NVML's answers and timings (`probe`), tessera against `nvidia-smi -q -x` (`compare`), and a
//! scenario for the fake library taken from the real cards (`scenario`). Nothing here changes
//! a GPU: the probe runs the console's own NVML collector, which only reads.

mod compare;
mod ours;
mod scenario;
mod smi;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::{DeviceCommand, Global};
use crate::error::CmdError;
use crate::out::print;

/// The largest input file read (an `nvidia-smi -q -x` of 8 MIG cards is about 200 KB).
const MAX_INPUT: u64 = 64 * 1024 * 1024;

/// Time between the probe's refreshes: GPM needs two samples 100 ms apart.
const PROBE_GAP: Duration = Duration::from_millis(200);

pub fn device_check(g: &Global, what: DeviceCommand) -> Result<(), CmdError> {
    match what {
        DeviceCommand::Probe { refreshes } => probe(g, refreshes),
        DeviceCommand::Compare { snapshot, smi_xml, json } => {
            let snap = ours::read(&read_text(&snapshot)?)
                .map_err(|e| CmdError::Usage(format!("{}: not a tessera snapshot: {e}", snapshot.display())))?;
            let mut reads = Vec::new();
            for path in &smi_xml {
                reads.push(
                    smi::parse(&read_text_upto(path, smi::MAX_XML)?)
                        .map_err(|e| CmdError::Usage(format!("{}: {e}", path.display())))?,
                );
            }
            let report = compare::compare(&snap, &reads);
            if json {
                print(&format!("{}\n", to_json(&report)?))?;
            } else {
                print(&report.text())?;
            }
            if report.cards.is_empty() {
                return Err(CmdError::Failed("nothing to compare: no card on either side".into()));
            }
            if report.differs() {
                let n = report.summary.differ;
                return Err(CmdError::Failed(format!(
                    "{n} field{} differ{} beyond tolerance",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "s" } else { "" }
                )));
            }
            Ok(())
        }
        DeviceCommand::Scenario { snapshot, probe } => {
            let snap = read_json(&snapshot)?;
            let probe = probe.as_deref().map(read_json).transpose()?;
            print(&format!("{}\n", to_json(&scenario::scenario(&snap, probe.as_ref()))?))
        }
    }
}

fn to_json(v: &impl serde::Serialize) -> Result<String, CmdError> {
    serde_json::to_string_pretty(v).map_err(|e| CmdError::Failed(format!("JSON: {e}")))
}

/// A regular file's text, at most `MAX_INPUT` bytes (a FIFO or a device is refused, not read).
fn read_text(path: &Path) -> Result<String, CmdError> {
    read_text_upto(path, MAX_INPUT)
}

/// A regular file's text, at most `max` bytes.
fn read_text_upto(path: &Path, max: u64) -> Result<String, CmdError> {
    crate::files::read_text(path, max).map_err(|why| CmdError::Usage(format!("{}: {why}", path.display())))
}

/// The most JSON values a file read as a tree may hold (the scenario's snapshot and probe: a
/// card is about 85 values, so about 11,000 cards); a tree costs a hundred bytes or so a value.
const MAX_JSON_VALUES: usize = 1_000_000;

fn read_json(path: &Path) -> Result<Value, CmdError> {
    let text = read_text(path)?;
    let mut count = crate::record::format::ValueCount::default();
    count.feed(text.as_bytes());
    if count.n > MAX_JSON_VALUES {
        return Err(CmdError::Usage(format!(
            "{}: more than {MAX_JSON_VALUES} JSON values: more than the device check reads",
            path.display()
        )));
    }
    serde_json::from_str(&text).map_err(|e| CmdError::Usage(format!("{}: not JSON: {e}", path.display())))
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}

/// Open NVML, collect once and `refreshes` times more, and print the timings and what each
/// NVML call answered, as JSON.
fn probe(g: &Global, refreshes: u32) -> Result<(), CmdError> {
    use crate::sources::nvml;
    let lib = g.nvml.clone().flatten();
    let library = lib.clone().unwrap_or_else(|| nvml::DEFAULT_LIB.to_string());
    let start = Instant::now();
    let handle = nvml::open(lib.as_deref()).map_err(|e| CmdError::Failed(format!("NVML ({library}): {e}")))?;
    let opened = start.elapsed();
    let driver_version = handle.sys_driver_version().ok();
    let nvml_version = handle.sys_nvml_version().ok();
    let cuda_driver_version = handle.sys_cuda_driver_version().ok();
    let t = Instant::now();
    let mut collector = nvml::Collector::new(&handle);
    let setup = t.elapsed();
    let t = Instant::now();
    let first = collector.collect();
    let first_ms = ms(t.elapsed());
    let cards = first.as_ref().map(|p| p.nodes.iter().map(|n| n.cards.len()).sum::<usize>()).unwrap_or(0);
    let first_error = first.err().map(|e| e.message);
    let mut refresh_ms = Vec::new();
    let mut refresh_errors = Vec::new();
    for _ in 0..refreshes {
        std::thread::sleep(PROBE_GAP);
        let t = Instant::now();
        if let Err(e) = collector.collect() {
            refresh_errors.push(e.message);
        }
        refresh_ms.push(ms(t.elapsed()));
    }
    let mut sorted = refresh_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied();
    let calls = collector.calls();
    let failing: Vec<Value> = calls
        .iter()
        .filter(|r| r.outcomes.not_supported + r.outcomes.no_permission + r.outcomes.other > 0)
        .map(|r| {
            json!({"call": r.call, "card": r.card, "not_supported": r.outcomes.not_supported,
                        "no_permission": r.outcomes.no_permission, "other": r.outcomes.other})
        })
        .collect();
    let out = json!({
        "schema_version": 1,
        "library": library,
        "driver_version": driver_version,
        "nvml_version": nvml_version,
        "cuda_driver_version": cuda_driver_version,
        "cards": cards,
        "open_ms": ms(opened),
        "collector_setup_ms": ms(setup),
        "first_collect_ms": first_ms,
        "first_error": first_error,
        "refresh_ms": refresh_ms,
        "refresh_median_ms": median,
        "refresh_errors": refresh_errors,
        "calls": calls,
        "failing_calls": failing,
    });
    print(&format!("{}\n", to_json(&out)?))
}
