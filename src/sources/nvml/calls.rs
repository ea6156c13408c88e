//! What each NVML call answered over a collector's life, per card: ok, not supported, no
//! permission or another error. The read-only device check prints it (`device-check probe`),
//! so a real driver's gaps are known by name, not only as unknown cells.

use std::collections::BTreeMap;

use nvml_wrapper::error::NvmlError;
use serde::Serialize;

/// How one call went on one card (or for the whole library, `card: None`).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Outcomes {
    pub ok: u64,
    pub not_supported: u64,
    pub no_permission: u64,
    /// Any other error (a lost GPU included).
    pub other: u64,
    /// The last error other than not-supported and no-permission, as NVML words it.
    pub last_error: Option<String>,
}

/// One row of the log: a C function of NVML, the card it was asked of, and its outcomes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRow {
    pub call: &'static str,
    pub card: Option<u32>,
    #[serde(flatten)]
    pub outcomes: Outcomes,
}

/// The tally, keyed by (call, card); a few dozen entries per card at most.
#[derive(Debug, Default)]
pub struct CallLog {
    calls: BTreeMap<(&'static str, Option<u32>), Outcomes>,
}

impl CallLog {
    /// Count what `call` answered.
    pub fn note<T>(&mut self, call: &'static str, card: Option<u32>, r: &Result<T, NvmlError>) {
        let o = self.calls.entry((call, card)).or_default();
        match r {
            Ok(_) => o.ok += 1,
            Err(NvmlError::NotSupported) => o.not_supported += 1,
            Err(NvmlError::NoPermission) => o.no_permission += 1,
            Err(e) => {
                o.other += 1;
                o.last_error = Some(e.to_string());
            }
        }
    }

    /// Count the answer, then read it as the collector does: `Ok(None)` for what the card
    /// does not give, an error only for a lost GPU (the whole card is then unreadable).
    pub fn known<T>(&mut self, call: &'static str, card: u32, r: Result<T, NvmlError>) -> Result<Option<T>, NvmlError> {
        self.note(call, Some(card), &r);
        match r {
            Ok(v) => Ok(Some(v)),
            Err(NvmlError::GpuLost) => Err(NvmlError::GpuLost),
            Err(_) => Ok(None),
        }
    }

    /// Every call asked, by name, then card.
    pub fn rows(&self) -> Vec<CallRow> {
        self.calls.iter().map(|(&(call, card), o)| CallRow { call, card, outcomes: o.clone() }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_is_counted_by_kind_and_a_lost_gpu_stays_an_error() {
        let mut log = CallLog::default();
        assert!(matches!(log.known("nvmlDeviceGetPowerUsage", 0, Ok::<u32, NvmlError>(90)), Ok(Some(90))));
        assert!(matches!(log.known::<u32>("nvmlDeviceGetPowerUsage", 0, Err(NvmlError::NotSupported)), Ok(None)));
        assert!(matches!(log.known::<u32>("nvmlDeviceGetPowerUsage", 1, Err(NvmlError::NoPermission)), Ok(None)));
        assert!(log.known::<u32>("nvmlDeviceGetName", 1, Err(NvmlError::GpuLost)).is_err());
        log.note::<u32>("nvmlDeviceGetCount_v2", None, &Ok(2));
        let rows = log.rows();
        let row = |call: &str, card: Option<u32>| rows.iter().find(|r| r.call == call && r.card == card).cloned();
        let power0 = row("nvmlDeviceGetPowerUsage", Some(0)).map(|r| r.outcomes);
        assert_eq!(power0, Some(Outcomes { ok: 1, not_supported: 1, ..Outcomes::default() }));
        assert_eq!(row("nvmlDeviceGetPowerUsage", Some(1)).map(|r| r.outcomes.no_permission), Some(1));
        let lost = row("nvmlDeviceGetName", Some(1)).map(|r| r.outcomes);
        assert!(lost.is_some_and(|o| o.other == 1 && o.last_error.is_some()));
        assert_eq!(row("nvmlDeviceGetCount_v2", None).map(|r| r.outcomes.ok), Some(1));
    }
}
