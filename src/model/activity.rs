//! Compute activity per workload over time: what a held card or instance is doing now and on
//! average over a window, so "held but idle" can be told from "busy". `history` records the
//! samples and writes each workload's `Activity`; this is the value and its thresholds. Pure
//! data; the data's clock, not the wall clock.

use serde::Serialize;

pub mod history;

/// Below this mean activity a held workload is idle (peers' default: DCGM-based idle reports
/// and the advisor's threshold, 5 %).
pub const IDLE_BELOW_PCT: f64 = 5.0;
/// The window the mean covers, and how long it must be covered before "idle" is said.
pub const WINDOW_MIN: i64 = 30;
/// Minutes of history kept per workload (the advisor's longest window).
pub const KEEP_MIN: i64 = 120;

/// A workload's activity: now, and the mean over the last `WINDOW_MIN` minutes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Activity {
    pub now_pct: Option<f64>,
    pub mean_pct: Option<f64>,
    /// Seconds of the window that have samples: minutes with at least one, times 60 (less
    /// while the workload is young, tessera has just started, or its source was down).
    pub covered_s: u64,
    /// How long it has been idle without a break, back from now, over the kept history
    /// (`KEEP_MIN`): minutes with samples, all below the idle threshold, times 60.
    pub idle_for_s: u64,
    /// The most memory it was seen using over the kept history, where a source reports it:
    /// waste and sizing are judged on the peak, not on one moment.
    pub peak_mem_mib: Option<u64>,
    /// The mean over the last `HOUR_MIN` minutes, once all but two of them have samples (the
    /// scale-in window); `None` before.
    pub mean_1h_pct: Option<f64>,
}

/// The scale-in window, minutes.
pub const HOUR_MIN: i64 = 60;

impl Activity {
    /// The window has samples in all but two of its minutes: enough to judge a mean.
    pub fn window_covered(&self) -> bool {
        self.covered_s >= ((WINDOW_MIN - 2) * 60) as u64
    }

    /// Held, and below the idle threshold for the whole (covered) window, and idle now: never
    /// said from missing or frozen data.
    pub fn held_idle(&self) -> bool {
        self.window_covered()
            && self.mean_pct.is_some_and(|m| m < IDLE_BELOW_PCT)
            && self.now_pct.is_some_and(|n| n < IDLE_BELOW_PCT)
    }
}
