//! all-smi's exposition: a dialect of the neutral accumulator ([`super::series`]).
//!
//! Sites that run `all-smi api` on their nodes can point `--scrape` at those endpoints: the
//! same mapper reads both exporters, sample by sample (a name starting `all_smi_` is read by
//! these rules, any other by dcgm-exporter's). Names, labels and units are all-smi 0.25.0's
//! (github.com/lablup/all-smi, tag v0.25.0: `src/api/metrics/gpu.rs`, `mig.rs`,
//! `src/device/readers/nvidia.rs`, and the mock server's `src/mock/templates/`):
//!
//! * Only the card families are read: `all_smi_gpu_*` and `all_smi_mig_instance_*`. The
//!   host's rows (CPU, memory, swap, disk, chassis, energy, processes) are skipped silently.
//! * A card is its host and `gpu_index`; `gpu_uuid` and `gpu` (the model name, e.g. `NVIDIA
//!   H100 80GB HBM3`) describe it. The host is `host` (MIG rows), else `exported_instance`
//!   (all-smi's own `instance`, renamed by a federating Prometheus), else `instance` without
//!   a port (behind federation `instance` is the scrape target).
//! * `all_smi_gpu_utilization` is a percentage (on a MIG card all-smi writes 0 where NVML
//!   gives nothing: unknown); memory is in **bytes** (shown in MiB); power in watts;
//!   temperature in °C, where all-smi writes 0 when the read failed, so 0 °C is unknown.
//!   `all_smi_gpu_power_limit_current_watts` is not read: all-smi reads it once at its start,
//!   so a later power cap would never show.
//! * `all_smi_gpu_frequency_mhz` is the graphics clock: not read (the model's clock is the
//!   SM clock; one is not shown as the other).
//! * MIG mode: `all_smi_gpu_mig_mode` (1 or 0; the mock server sends it) or the
//!   `mig_mode_current` label of `all_smi_gpu_info` (what `all-smi api` sends). Instances come
//!   from `all_smi_mig_instance_*` rows: `gpu_instance_id` is the GPU instance id,
//!   `mig_profile` its profile, memory used and total in bytes, `utilization_gpu` a
//!   percentage. A row without a usable `gpu_instance_id` cannot be placed and is counted as
//!   a series without a usable id. `all-smi api` 0.25 never fills its MIG rows (its collection
//!   loop leaves them empty), so a card it calls MIG-enabled has **unknown** instances: the
//!   card says so instead of showing a MIG card with nothing on it.
//! * all-smi's rows name no pod or job: holders come from a scheduler source.

use std::borrow::Cow;

use super::series::{Dialect, Family, Field, Labels, MigMode, Reading};
use crate::model::Card;

/// Bytes to MiB.
const MIB: f64 = 1.0 / 1_048_576.0;

/// The field a family feeds and the factor to the model's unit.
fn field(name: &str) -> Option<(Field, f64)> {
    Some(match name {
        "all_smi_gpu_utilization" => (Field::GpuUtil, 1.0),
        "all_smi_gpu_memory_used_bytes" | "all_smi_mig_instance_memory_used_bytes" => (Field::FbUsed, MIB),
        "all_smi_gpu_memory_total_bytes" | "all_smi_mig_instance_memory_total_bytes" => (Field::FbTotal, MIB),
        "all_smi_gpu_temperature_celsius" => (Field::Temp, 1.0),
        "all_smi_gpu_power_consumption_watts" => (Field::Power, 1.0),
        "all_smi_mig_instance_utilization_gpu" => (Field::InstUtil, 1.0),
        _ => return None,
    })
}

/// all-smi's dialect: names starting `all_smi_`.
pub(super) struct AllSmi;

impl Dialect for AllSmi {
    fn claims(&self, name: &str) -> bool {
        name.starts_with("all_smi_")
    }

    /// Only the card families are read: `all_smi_gpu_*` and `all_smi_mig_instance_*`.
    fn family(&self, name: &str) -> Family {
        if name.starts_with("all_smi_mig_instance_") {
            Family::Instance
        } else if name.starts_with("all_smi_gpu_") {
            Family::Card
        } else {
            Family::Skip
        }
    }

    fn labels<'a>(&self, labels: &mut Vec<(&'a str, Cow<'a, str>)>) -> Labels<'a> {
        let mut l = Labels::default();
        let (mut host, mut exported, mut instance) = (None, None, None);
        for (k, v) in labels.drain(..) {
            let slot = match k {
                "gpu_index" => &mut l.gpu,
                "gpu_uuid" => &mut l.uuid,
                "gpu" => &mut l.model,
                "host" => &mut host,
                "exported_instance" => &mut exported,
                "instance" => &mut instance,
                "gpu_instance_id" => &mut l.gi,
                "mig_profile" => &mut l.profile,
                "mig_mode_current" => &mut l.mig_mode,
                _ => continue,
            };
            if slot.is_none() && !v.trim().is_empty() {
                *slot = Some(v);
            }
        }
        l.host = host.or(exported).or_else(|| {
            instance.map(|i| match i {
                Cow::Borrowed(b) => Cow::Borrowed(crate::url::host_str(b)),
                Cow::Owned(o) => Cow::Owned(crate::url::host(&o)),
            })
        });
        l
    }

    /// Bytes become MiB; a temperature of 0 is all-smi's "not read".
    fn value(&self, name: &str, value: f64, _labels: &Labels) -> Reading {
        let Some((f, factor)) = field(name) else { return Reading::Skip };
        if !value.is_finite() {
            return Reading::NonFinite;
        }
        if f == Field::Temp && value == 0.0 {
            return Reading::Skip;
        }
        Reading::Value(f, value * factor)
    }

    /// `all_smi_gpu_mig_mode` is a live gauge; `all_smi_gpu_info`'s `mig_mode_current` is
    /// read once when all-smi starts.
    fn mig_mode(&self, name: &str, value: f64, labels: &Labels) -> Option<MigMode> {
        match name {
            "all_smi_gpu_mig_mode" => Some(MigMode { on: value >= 0.5, live: true }),
            "all_smi_gpu_info" => match labels.mig_mode.as_deref()?.trim() {
                "1" | "Enabled" | "enabled" => Some(MigMode { on: true, live: false }),
                "0" | "Disabled" | "disabled" => Some(MigMode { on: false, live: false }),
                _ => None,
            },
            _ => None,
        }
    }

    fn no_instances(&self) -> &'static str {
        NO_INSTANCES
    }

    /// all-smi writes a whole-card utilisation of 0 where NVML gives none (it gives none with
    /// MIG on): unknown.
    fn mig_on(&self, card: &mut Card) {
        card.utilization_pct = None;
    }
}

/// What the card says when all-smi calls it MIG-enabled and sends no instance rows.
const NO_INSTANCES: &str =
    "all-smi reports MIG mode on but exports no MIG instances (all-smi api 0.25 leaves them out): instances unknown";

#[cfg(test)]
#[path = "allsmi_tests.rs"]
mod tests;
