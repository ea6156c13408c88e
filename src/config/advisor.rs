//! `[advisor]`: the thresholds of the capacity advisor's rules and optional prices. Defaults
//! follow what peers use: idle below 5 % for 30 minutes warns and for 2 hours is high (the
//! common "idle GPU" reports over DCGM), an oversized whole card is one at or below 15 %.

use std::time::Duration;

use toml::{Table, Value};

use super::{ConfigError, Reader};
use crate::units::duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Advisor {
    /// Held and idle this long: a warning.
    pub idle_warn: Duration,
    /// Held and idle this long: high.
    pub idle_high: Duration,
    /// A whole card busy at or below this (30-minute mean) may fit a MIG instance.
    pub oversized_below_pct: f64,
    /// MIG waste (instance memory minus use) reported from this many GiB up.
    pub waste_min_gib: f64,
    /// Price of one GPU-hour per GPU model (catalog name, e.g. "H100-80GB"), for costs.
    pub prices: Vec<(String, f64)>,
    /// The currency the prices are in.
    pub currency: String,
    /// Also propose draining busy cards whose holders may be moved (training past
    /// `[policy] min_runtime`) to lay them out for waiting work the idle cards cannot serve.
    pub drain_plans: bool,
    /// A time-sliced or MPS card with its replicas (or contexts) near the limit and memory at
    /// or above this is crowded: the next allocation may run out of memory.
    pub crowded_memory_pct: f64,
}

impl Default for Advisor {
    fn default() -> Self {
        Self {
            idle_warn: Duration::from_secs(30 * 60),
            idle_high: Duration::from_secs(2 * 3600),
            oversized_below_pct: 15.0,
            waste_min_gib: 4.0,
            prices: Vec::new(),
            currency: "USD".into(),
            drain_plans: false,
            crowded_memory_pct: 90.0,
        }
    }
}

impl Advisor {
    /// The price of one GPU-hour of `model`, where set.
    pub fn price(&self, model: &str) -> Option<f64> {
        self.prices.iter().find(|(m, _)| m.eq_ignore_ascii_case(model)).map(|(_, p)| *p)
    }
}

pub(super) fn read_advisor(r: &Reader, t: &Table, a: &mut Advisor) -> Result<(), ConfigError> {
    let pct = |key: &str, v: &Value| -> Result<f64, ConfigError> {
        let x = r.number(key, v)?;
        if (0.0..=100.0).contains(&x) { Ok(x) } else { Err(r.bad(key, v, "expected a percentage from 0 to 100")) }
    };
    for (k, v) in t {
        let key = format!("advisor.{k}");
        match k.as_str() {
            "idle_warn" => a.idle_warn = r.duration(&key, v)?,
            "idle_high" => a.idle_high = r.duration(&key, v)?,
            "oversized_below_pct" => a.oversized_below_pct = pct(&key, v)?,
            "crowded_memory_pct" => a.crowded_memory_pct = pct(&key, v)?,
            "waste_min_gib" => {
                let x = r.number(&key, v)?;
                if x < 0.0 {
                    return Err(r.bad(&key, v, "expected GiB, 0 or more"));
                }
                a.waste_min_gib = x;
            }
            "currency" => a.currency = r.string(&key, v)?,
            "drain_plans" => a.drain_plans = r.boolean(&key, v)?,
            "prices" => {
                for (model, price) in r.table(&key, v)? {
                    let pk = format!("{key}.{model}");
                    let p = r.number(&pk, price)?;
                    if p < 0.0 {
                        return Err(r.bad(&pk, price, "expected a price per GPU-hour, 0 or more"));
                    }
                    a.prices.push((model.clone(), p));
                }
            }
            _ => {
                return Err(r.unknown(
                    &key,
                    &[
                        "idle_warn",
                        "idle_high",
                        "oversized_below_pct",
                        "waste_min_gib",
                        "currency",
                        "prices",
                        "drain_plans",
                        "crowded_memory_pct",
                    ],
                ));
            }
        }
    }
    // Idle is measured over the activity the model keeps per workload: a longer threshold
    // could never be reached, and its findings would silently never come.
    let kept = Duration::from_secs(crate::model::activity::KEEP_MIN as u64 * 60);
    for (key, d) in [("advisor.idle_warn", a.idle_warn), ("advisor.idle_high", a.idle_high)] {
        if d > kept {
            let v = Value::String(duration::format(d));
            let why =
                format!("must be at most {}: tessera keeps that much activity per workload", duration::format(kept));
            return Err(r.bad(key, &v, &why));
        }
    }
    if a.idle_high < a.idle_warn {
        let v = Value::String(duration::format(a.idle_high));
        return Err(r.bad("advisor.idle_high", &v, "must not be shorter than advisor.idle_warn"));
    }
    Ok(())
}

/// The `[advisor]` part of the example config.
pub(super) fn example() -> String {
    let d = Advisor::default();
    format!(
        r#"
[advisor]
# The capacity advisor's thresholds (tessera advise, the Advice view). Idle means below 5 %
# activity (the model's fixed threshold).
# A workload holding GPUs idle this long is a warning, and this long is high.
idle_warn = "{warn}"
idle_high = "{high}"
# Also propose draining cards held by training past [policy] min_runtime, to repartition them
# for waiting work no idle card can serve (off: only idle cards are ever planned).
drain_plans = {drains}
# A whole card at or below this mean activity may fit a MIG instance instead.
oversized_below_pct = {over:?}
# MIG instances with at least this many GiB unused are reported as waste.
waste_min_gib = {waste:?}
# A time-sliced or MPS card (no memory isolation) with at most one replica free and memory at
# or above this percentage is crowded: the next allocation may run out of memory.
crowded_memory_pct = {crowded:?}
# Costs: the price of one GPU-hour per GPU model (names as `tessera layouts` prints them).
currency = "{currency}"
# [advisor.prices]
# "H100-80GB" = 2.5
# "A100-80GB" = 1.6
"#,
        warn = duration::format(d.idle_warn),
        high = duration::format(d.idle_high),
        over = d.oversized_below_pct,
        waste = d.waste_min_gib,
        currency = d.currency,
        drains = d.drain_plans,
        crowded = d.crowded_memory_pct,
    )
}

#[cfg(test)]
mod tests {
    /// An idle threshold longer than the activity kept per workload could never be reached:
    /// refused, naming the key and the value.
    #[test]
    fn idle_thresholds_past_the_kept_activity_are_refused() {
        let parse = |text: &str| crate::config::parse(text, "t.toml").map(|_| ()).map_err(|e| e.to_string());
        assert_eq!(
            parse("[advisor]\nidle_high = \"3h\""),
            Err(
                "t.toml: advisor.idle_high = \"3h\": must be at most 2h: tessera keeps that much activity per workload"
                    .to_string()
            )
        );
        assert!(parse("[advisor]\nidle_warn = \"150m\"\nidle_high = \"150m\"").is_err_and(|e| e.contains("idle_warn")));
        assert_eq!(parse("[advisor]\nidle_warn = \"1h\"\nidle_high = \"2h\""), Ok(()));
    }
}
