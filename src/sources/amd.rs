//! The AMD Device Metrics Exporter's exposition (ROCm's own Prometheus exporter): a dialect of
//! the neutral accumulator ([`super::series`]).
//!
//! Names, labels and units are the exporter's (github.com/ROCm/device-metrics-exporter, commit
//! afd0fe81cfb1a36cf15e79edb057e92adb197946: the gauges and `populateLabelsFromGPU` in
//! `pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go`, the labels in
//! `pkg/exporter/proto/exporterconfig.proto`, units and partitions in
//! `docs/configuration/metricslist.md`):
//!
//! * Its families are `gpu_*` and `pcie_*` (without `MetricsFieldPrefix`, which would rename
//!   them all). `gpu_nodes_total` counts the node's GPUs and names no card: skipped.
//! * A card is `hostname` + `gpu_id`, one per GPU the driver shows: in a compute partition
//!   mode other than SPX each partition is a GPU of its own, with the physical card's
//!   `serial_number` and `card_model`. `gpu_uuid` (an optional label) is the card's UUID.
//! * `gpu_gfx_activity` is a percentage; `gpu_used_vram` and `gpu_total_vram` are in MB as
//!   amd-smi counts them (2^20 bytes: an MI210's 64 GiB is 65520 MB), shown as MiB;
//!   `gpu_power_usage` is in watts (`gpu_package_power`, MI3xx only, is another reading of the
//!   socket's power: not read, so power is never counted twice); `gpu_edge_temperature` (MI2xx) or `gpu_junction_temperature`
//!   (MI3xx, the hotspot) is the card's temperature in °C (each platform sends one of them;
//!   `gpu_memory_temperature` has no place in the model); `gpu_ecc_uncorrect_total` is the
//!   uncorrectable ECC count.
//! * In a partitioned mode (DPX, TPX, QPX, CPX) activity and power are the physical GPU's, sent
//!   on partition 0 only (the others send 0 W): they are not any one partition's, so no
//!   partition shows them. Temperatures come on partition 0 only, as sent.
//! * `gpu_compute_partition_type` (`spx` … `cpx`) and `gpu_memory_partition_type` (`nps1` …
//!   `nps8`) are the card's partition mode, its sharing mode; never MIG. `none` is unknown.
//! * Holders: `pod`, `namespace`, `container` (or Prometheus's `exported_*` renames) and the
//!   Slurm `job_id`; the exporter writes them empty when nothing holds the GPU.

use std::borrow::Cow;

use super::series::{Dialect, Family, Field, Labels, Reading};
use crate::model::Vendor;

/// The AMD Device Metrics Exporter's dialect: names starting `gpu_` or `pcie_`.
pub(super) struct Amd;

/// The field a family feeds (every one already in the model's unit).
fn field(name: &str) -> Option<Field> {
    Some(match name {
        "gpu_gfx_activity" => Field::GpuUtil,
        "gpu_used_vram" => Field::FbUsed,
        "gpu_total_vram" => Field::FbTotal,
        "gpu_power_usage" => Field::Power,
        "gpu_edge_temperature" | "gpu_junction_temperature" => Field::Temp,
        "gpu_ecc_uncorrect_total" => Field::EccDbe,
        _ => return None,
    })
}

/// A partition mode that splits the physical GPU (anything but SPX, and `none`: unknown).
fn split(compute: Option<&str>) -> bool {
    compute.is_some_and(|c| !matches!(c.trim().to_ascii_lowercase().as_str(), "spx" | "none" | ""))
}

impl Dialect for Amd {
    fn claims(&self, name: &str) -> bool {
        name.starts_with("gpu_") || name.starts_with("pcie_")
    }

    fn family(&self, name: &str) -> Family {
        if name == "gpu_nodes_total" { Family::Skip } else { Family::Card }
    }

    fn labels<'a>(&self, labels: &mut Vec<(&'a str, Cow<'a, str>)>) -> Labels<'a> {
        let mut l = Labels::default();
        for (k, v) in labels.drain(..) {
            let slot = match k {
                "gpu_id" => &mut l.gpu,
                "gpu_uuid" => &mut l.uuid,
                "card_model" => &mut l.model,
                "serial_number" => &mut l.serial,
                "hostname" => &mut l.host,
                "pod" => &mut l.pod,
                "namespace" => &mut l.namespace,
                "container" => &mut l.container,
                "exported_pod" => &mut l.exported_pod,
                "exported_namespace" => &mut l.exported_namespace,
                "exported_container" => &mut l.exported_container,
                "job_id" => &mut l.hpc_job,
                "gpu_compute_partition_type" => &mut l.compute_partition,
                "gpu_memory_partition_type" => &mut l.memory_partition,
                _ => continue,
            };
            if slot.is_none() && !v.trim().is_empty() {
                *slot = Some(v);
            }
        }
        l
    }

    fn value(&self, name: &str, value: f64, labels: &Labels) -> Reading {
        let Some(f) = field(name) else { return Reading::Skip };
        if !value.is_finite() {
            return Reading::NonFinite;
        }
        if matches!(f, Field::GpuUtil | Field::Power) && split(labels.compute_partition.as_deref()) {
            return Reading::Skip;
        }
        Reading::Value(f, value)
    }

    fn vendor(&self) -> Option<Vendor> {
        Some(Vendor::Amd)
    }
}

#[cfg(test)]
#[path = "amd_tests.rs"]
mod tests;
