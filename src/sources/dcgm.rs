//! dcgm-exporter's dialect of the neutral accumulator ([`super::series`], which holds the rules
//! every exporter shares). From dcgm-exporter's behaviour as documented in the reference notes:
//!
//! * Its names are every name no other dialect claims (it is registered last).
//! * A card is node + `gpu` index (else `device="nvidiaN"`). `UUID`/`uuid`, `modelName` and
//!   `pci_bus_id` describe it. Series with no usable index (NVSwitch, NVLink and CPU entities,
//!   label-less dummies) are counted as such and skipped. The node is the `Hostname`/`hostname`
//!   label.
//! * A series with `GPU_I_ID` belongs to that GPU instance (`GPU_I_PROFILE` names its profile).
//! * `DCGM_FI_DEV_GPU_UTIL` is a percentage for the whole card. `DCGM_FI_PROF_GR_ENGINE_ACTIVE`
//!   is a 0–1 ratio: ×100 it is an instance's activity, and a whole card's only where GPU_UTIL
//!   is missing.
//! * `DCGM_FI_DEV_FB_USED`/`_FREE`/`_RESERVED` (MiB) are per instance on MIG; else
//!   `DCGM_FI_DEV_FB_TOTAL`. `DCGM_FI_DEV_XID_ERRORS` is the last XID, 0 meaning none.
//! * The old 1.x names (`dcgm_gpu_temp`, ...) and `--use-old-namespace` labels (`uuid`,
//!   `pod_name`, `pod_namespace`, `container_name`) are accepted.
//! * Holders: `pod`/`namespace`/`container`, `exported_pod`/`exported_namespace`/
//!   `exported_container`, and `hpc_job`.
//! * DCGM blank sentinels are counted as blanks and ignored: any value at or above
//!   9.223372036854775e18 (the int64 blanks such as 9223372036854775794), and for the fields
//!   mapped here any value at or above the FP64 blank 140737488355328.0 (counters that are not
//!   mapped, such as PCIe bytes, can legitimately pass that).
//! * `vgpu` (`--kubernetes-virtual-gpus`, time-slicing or MPS under the device plugin): the
//!   replica a pod's series is about. The exporter cannot export processes (the PID fields are
//!   binary), so contexts per card come from NVML only.

use std::borrow::Cow;

use super::series::{Dialect, Family, Field, Labels, Reading};
use crate::model::Vendor;

/// Values from here up are DCGM int64 blanks (`DCGM_INT64_BLANK` = 0x7ffffffffffffff0 and the
/// codes above it) whatever the field.
const INT64_BLANK: f64 = 9.223372036854775e18;
/// `DCGM_FP64_BLANK`; FP64 fields' blank codes are this and above.
const FP64_BLANK: f64 = 140_737_488_355_328.0;

/// The field a metric name feeds: current names and the 1.x compatibility names.
fn field(name: &str) -> Option<Field> {
    Some(match name {
        "DCGM_FI_DEV_GPU_UTIL" | "dcgm_gpu_utilization" => Field::GpuUtil,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" | "dcgm_fi_prof_gr_engine_active" => Field::GrActive,
        "DCGM_FI_DEV_FB_USED" | "dcgm_fb_used" => Field::FbUsed,
        "DCGM_FI_DEV_FB_FREE" | "dcgm_fb_free" => Field::FbFree,
        "DCGM_FI_DEV_FB_RESERVED" => Field::FbReserved,
        "DCGM_FI_DEV_FB_TOTAL" => Field::FbTotal,
        "DCGM_FI_DEV_GPU_TEMP" | "dcgm_gpu_temp" => Field::Temp,
        "DCGM_FI_DEV_POWER_USAGE" | "dcgm_power_usage" => Field::Power,
        "DCGM_FI_DEV_POWER_MGMT_LIMIT" => Field::PowerLimit,
        "DCGM_FI_DEV_SM_CLOCK" | "dcgm_sm_clock" => Field::SmClock,
        "DCGM_FI_DEV_MEM_CLOCK" | "dcgm_memory_clock" => Field::MemClock,
        "DCGM_FI_DEV_XID_ERRORS" | "dcgm_xid_errors" => Field::Xid,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" | "dcgm_ecc_dbe_volatile_total" => Field::EccDbe,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS" => Field::RemappedRows,
        _ => return None,
    })
}

/// dcgm-exporter's dialect: every name no other dialect claims (it is registered last).
pub(super) struct Dcgm;

impl Dialect for Dcgm {
    fn claims(&self, _name: &str) -> bool {
        true
    }

    fn family(&self, _name: &str) -> Family {
        Family::Card
    }

    fn labels<'a>(&self, labels: &mut Vec<(&'a str, Cow<'a, str>)>) -> Labels<'a> {
        let mut l = Labels::default();
        for (k, v) in labels.drain(..) {
            let slot = match k {
                "gpu" => &mut l.gpu,
                "device" => &mut l.device,
                "UUID" | "uuid" => &mut l.uuid,
                "modelName" => &mut l.model,
                "pci_bus_id" => &mut l.pci,
                "GPU_I_ID" => &mut l.gi,
                "GPU_I_PROFILE" => &mut l.profile,
                "Hostname" | "hostname" => &mut l.host,
                "pod" | "pod_name" => &mut l.pod,
                "namespace" | "pod_namespace" => &mut l.namespace,
                "container" | "container_name" => &mut l.container,
                "exported_pod" => &mut l.exported_pod,
                "exported_namespace" => &mut l.exported_namespace,
                "exported_container" => &mut l.exported_container,
                "hpc_job" => &mut l.hpc_job,
                "vgpu" => &mut l.vgpu,
                _ => continue,
            };
            if slot.is_none() && !v.is_empty() {
                *slot = Some(v);
            }
        }
        l
    }

    /// Blanks are counted whatever the field (int64) or for the fields read (FP64); the
    /// values are in the model's units already.
    fn value(&self, name: &str, value: f64, _labels: &Labels) -> Reading {
        if value >= INT64_BLANK && value.is_finite() {
            return Reading::Blank;
        }
        let Some(f) = field(name) else { return Reading::Skip };
        if !value.is_finite() {
            return Reading::NonFinite;
        }
        if value >= FP64_BLANK {
            return Reading::Blank;
        }
        Reading::Value(f, value)
    }

    fn vendor(&self) -> Option<Vendor> {
        Some(Vendor::Nvidia)
    }

    /// `vgpu` is dcgm-exporter's label (`--kubernetes-virtual-gpus`).
    fn replicas_origin(&self) -> &'static str {
        "dcgm-exporter vgpu labels"
    }
}

mod generate;
pub use generate::generate;

#[cfg(test)]
#[path = "dcgm_tests.rs"]
mod tests;
