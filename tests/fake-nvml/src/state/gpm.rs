//! GPM (GPU Performance Monitoring): which cards support it, sample bookkeeping (allocated,
//! filled with card, GPU instance and time) and the metrics nvmlGpmMetricsGet computes from two
//! samples.

use std::ffi::CStr;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::{
    nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL as GRAPHICS_UTIL, nvmlReturn_enum_NVML_ERROR_MEMORY,
    nvmlReturn_enum_NVML_SUCCESS,
};

use super::handle::GPM_SAMPLE_IDS;
use super::{Card, Handle, INVALID_ARGUMENT, NOT_SUPPORTED, NvmlResult, Ret, State};

/// The shortest interval between two samples that nvmlGpmMetricsGet accepts; closer samples make
/// the whole call fail with INVALID_ARGUMENT. A guess: NVIDIA's GPM samples are taken 100 ms or
/// more apart and NVML does not document what a shorter interval gives; the fake refuses it so
/// that callers are made to space their samples as real hardware needs.
pub const GPM_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// What nvmlGpmSampleGet / nvmlGpmMigSampleGet recorded in a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpmSample {
    pub card: usize,
    /// The GPU instance of a MIG sample; None for a whole-card sample.
    pub gi: Option<u32>,
    /// When the sample was taken (monotonic).
    pub at: Instant,
    /// Graphics utilisation in percent at sampling time.
    pub graphics_util: f64,
}

/// The names nvmlGpmMetricsGet reports in a metric's metricInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpmMetricInfo {
    pub short_name: &'static CStr,
    pub long_name: &'static CStr,
    pub unit: &'static CStr,
}

/// One requested metric's outcome: its own return code, value and names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpmMetricValue {
    pub ret: Ret,
    pub value: f64,
    pub info: GpmMetricInfo,
}

/// The names of a metric id: NVML_GPM_METRIC_GRAPHICS_UTIL's, or generic ones for every other id
/// (the fake does not model them, but never leaves the names NULL).
pub fn metric_info(id: u32) -> GpmMetricInfo {
    match id {
        GRAPHICS_UTIL => {
            GpmMetricInfo { short_name: c"gr_util", long_name: c"Graphics engine utilization", unit: c"%" }
        }
        _ => GpmMetricInfo { short_name: c"unsupported", long_name: c"Metric not supported by fake-nvml", unit: c"" },
    }
}

impl Card {
    /// Whole-card GPM graphics utilisation: `utilization_gpu` with MIG off; with MIG on, the GPU
    /// instances' `gpm_util` weighted by their compute slices over the card's (idle slices count 0).
    pub fn card_graphics_util(&self) -> f64 {
        match self.model {
            Some(model) if self.mig_enabled => {
                let busy: f64 = self.gis.values().map(|g| g.gpm_util * f64::from(g.profile.compute_slices)).sum();
                busy / f64::from(model.compute_slices.max(1))
            }
            _ => f64::from(self.spec.utilization_gpu),
        }
    }
}

impl State {
    /// nvmlGpmQueryDeviceSupport: whether the physical card has `gpm` set.
    pub fn gpm_support(&self, raw: usize) -> NvmlResult<bool> {
        Ok(self.physical(raw, "nvmlGpmQueryDeviceSupport")?.spec.gpm)
    }

    /// nvmlGpmSampleAlloc: a new, empty sample (ids count up from 1 and are never reused, so a
    /// freed sample's handle stays invalid); NVML_ERROR_MEMORY once the ids are spent.
    pub fn gpm_alloc_sample(&mut self) -> NvmlResult<Handle> {
        let id = self.next_gpm_sample;
        if id >= GPM_SAMPLE_IDS {
            return Err(nvmlReturn_enum_NVML_ERROR_MEMORY);
        }
        self.next_gpm_sample += 1;
        self.gpm_samples.insert(id, None);
        Ok(Handle::GpmSample(id))
    }

    fn gpm_sample_id(&self, raw: usize) -> NvmlResult<u32> {
        match Handle::decode(raw) {
            Some(Handle::GpmSample(id)) if self.gpm_samples.contains_key(&id) => Ok(id),
            _ => Err(INVALID_ARGUMENT),
        }
    }

    /// nvmlGpmSampleFree.
    pub fn gpm_free_sample(&mut self, raw: usize) -> NvmlResult<()> {
        let id = self.gpm_sample_id(raw)?;
        self.gpm_samples.remove(&id);
        Ok(())
    }

    /// What the sample `raw` recorded; INVALID_ARGUMENT if it is unknown or was never filled.
    pub fn gpm_recorded(&self, raw: usize) -> NvmlResult<GpmSample> {
        self.gpm_samples[&self.gpm_sample_id(raw)?].ok_or(INVALID_ARGUMENT)
    }

    /// The physical card `raw` for the GPM call `func`: NOT_SUPPORTED unless it has `gpm`.
    fn gpm_card(&self, raw: usize, func: &str) -> NvmlResult<&Card> {
        let card = self.physical(raw, func)?;
        if !card.spec.gpm {
            return Err(NOT_SUPPORTED);
        }
        Ok(card)
    }

    /// nvmlGpmSampleGet: records a whole-card sample taken at `now` into `raw_sample`.
    pub fn gpm_sample(&mut self, raw_dev: usize, raw_sample: usize, now: Instant) -> NvmlResult<()> {
        let card = self.gpm_card(raw_dev, "nvmlGpmSampleGet")?;
        let sample = GpmSample { card: card.index, gi: None, at: now, graphics_util: card.card_graphics_util() };
        let id = self.gpm_sample_id(raw_sample)?;
        self.gpm_samples.insert(id, Some(sample));
        Ok(())
    }

    /// nvmlGpmMigSampleGet: records a sample of GPU instance `gi` taken at `now` into `raw_sample`.
    /// MIG off: NOT_SUPPORTED; no such GPU instance: INVALID_ARGUMENT.
    pub fn gpm_mig_sample(&mut self, raw_dev: usize, gi: u32, raw_sample: usize, now: Instant) -> NvmlResult<()> {
        let card = self.gpm_card(raw_dev, "nvmlGpmMigSampleGet")?;
        card.mig_on()?;
        let g = card.gi(gi)?;
        let sample = GpmSample { card: card.index, gi: Some(gi), at: now, graphics_util: g.gpm_util };
        let id = self.gpm_sample_id(raw_sample)?;
        self.gpm_samples.insert(id, Some(sample));
        Ok(())
    }

    /// nvmlGpmMetricsGet between two filled samples of the same card and GPU instance, the second
    /// taken at least [`GPM_MIN_INTERVAL`] after the first (else INVALID_ARGUMENT for the call).
    /// GRAPHICS_UTIL gives the mean of the two samples' utilisation; other ids NOT_SUPPORTED.
    pub fn gpm_metrics(&self, raw1: usize, raw2: usize, ids: &[u32]) -> NvmlResult<Vec<GpmMetricValue>> {
        let (first, second) = (self.gpm_recorded(raw1)?, self.gpm_recorded(raw2)?);
        if (first.card, first.gi) != (second.card, second.gi) {
            return Err(INVALID_ARGUMENT);
        }
        self.card_for(first.card, "nvmlGpmMetricsGet")?;
        if second.at.saturating_duration_since(first.at) < GPM_MIN_INTERVAL {
            return Err(INVALID_ARGUMENT);
        }
        Ok(ids
            .iter()
            .map(|&id| {
                let (ret, value) = match id {
                    GRAPHICS_UTIL => (nvmlReturn_enum_NVML_SUCCESS, (first.graphics_util + second.graphics_util) / 2.0),
                    _ => (NOT_SUPPORTED, 0.0),
                };
                GpmMetricValue { ret, value, info: metric_info(id) }
            })
            .collect())
    }
}
