//! Device taints: the driver's own in the slices (health: `gpu.nvidia.com/xid`,
//! `gpu.nvidia.com/gpu-lost`, `gpu.nvidia.com/unmonitored`) and DeviceTaintRules'; what they
//! make of a card: its taints listed, drained when every device of it is kept off, its health
//! where the driver reads it, and "health unknown" where nothing does.

use std::collections::HashMap;
use std::sync::Arc;

use super::objects::{Device, Rule};
use crate::model::Card;
use crate::model::dra::{DeviceTaint, MANAGED_BY};
use crate::model::fleet::FATAL_XIDS;

/// Taints kept per card (a DynamicMIG card drained by rules has 26, drained and then
/// evicted by tessera 52).
const MAX_CARD_TAINTS: usize = 128;
/// The driver's taint keys.
const XID: &str = "gpu.nvidia.com/xid";
const LOST: &str = "gpu.nvidia.com/gpu-lost";
const UNMONITORED: &str = "gpu.nvidia.com/unmonitored";

/// The rules, found by device name where a rule names driver, pool and device, else
/// scanned.
pub struct Rules<'a> {
    exact: HashMap<&'a str, Vec<&'a Rule>>,
    wide: Vec<&'a Rule>,
}

impl<'a> Rules<'a> {
    pub fn new(rules: &'a [Arc<Rule>]) -> Self {
        let mut exact: HashMap<_, Vec<&Rule>> = HashMap::new();
        let mut wide = Vec::new();
        for r in rules {
            let s = &r.spec.device_selector;
            match (&s.driver, &s.pool, &s.device) {
                (Some(_), Some(_), Some(n)) => exact.entry(&**n).or_default().push(&**r),
                _ => wide.push(&**r),
            }
        }
        Self { exact, wide }
    }

    fn matching(&self, driver: &str, pool: &str, device: &str) -> Vec<&'a Rule> {
        let selects = |r: &&Rule| {
            let s = &r.spec.device_selector;
            let ok = |want: &Option<super::intern::IName>, have: &str| want.as_deref().is_none_or(|w| w == have);
            ok(&s.driver, driver) && ok(&s.pool, pool) && ok(&s.device, device)
        };
        let exact = self.exact.get(device).into_iter().flatten().copied().filter(selects);
        exact.chain(self.wide.iter().copied().filter(selects)).collect()
    }
}

/// Every taint on `device`: the slice's, then the rules'.
pub fn of_device(rules: &Rules, driver: &str, pool: &str, device: &Device) -> Vec<DeviceTaint> {
    let published = device.taints.items.iter().map(|t| DeviceTaint {
        device: device.name.to_string(),
        key: t.key.to_string(),
        value: t.value.as_deref().map(str::to_string),
        effect: t.effect.to_string(),
        rule: None,
        tessera: false,
    });
    let ruled = rules.matching(driver, pool, &device.name).into_iter().map(|r| DeviceTaint {
        device: device.name.to_string(),
        key: r.spec.taint.key.to_string(),
        value: r.spec.taint.value.as_deref().map(str::to_string),
        effect: r.spec.taint.effect.to_string(),
        rule: r.metadata.name.clone(),
        tessera: by_tessera(r),
    });
    published.chain(ruled).collect()
}

/// The rule carries tessera's label: tessera made it.
fn by_tessera(r: &Rule) -> bool {
    let (key, value) = MANAGED_BY;
    r.metadata.labels.as_ref().and_then(|l| l.get(key)).is_some_and(|v| v == value)
}

/// Whether the driver reads health in this pool: it publishes its health taints somewhere in
/// it (with health checks on, every unhealthy device gets one; under DynamicMIG none is ever
/// published).
pub fn monitored<'d>(devices: impl IntoIterator<Item = &'d Device>) -> bool {
    devices
        .into_iter()
        .any(|d| d.taints.items.iter().any(|t| t.key.starts_with("gpu.nvidia.com/") && &*t.key != UNMONITORED))
}

/// Lay a card's taints on it: the list, the drain, and its health.
/// `devices` is how many devices the card has; `whole` the whole-GPU device's name.
pub fn apply(card: &mut Card, taints: Vec<DeviceTaint>, devices: usize, whole: Option<&str>, monitored: bool) {
    let mut blocked: Vec<&str> = taints.iter().filter(|t| t.blocks()).map(|t| t.device.as_str()).collect();
    blocked.sort_unstable();
    blocked.dedup();
    let mut unmonitored = false;
    for t in &taints {
        match t.key.as_str() {
            XID => {
                let xid = t.value.as_deref().and_then(|v| v.trim().parse::<u32>().ok());
                if let Some(x) = xid {
                    let keep =
                        card.health.last_xid.is_some_and(|old| FATAL_XIDS.contains(&old) && !FATAL_XIDS.contains(&x));
                    if !keep {
                        card.health.last_xid = Some(x);
                    }
                }
            }
            LOST => card.health.lost = true,
            UNMONITORED => unmonitored = true,
            _ => {}
        }
    }
    if !monitored || unmonitored {
        card.health.unknown = Some(if unmonitored {
            "the DRA driver says it does not monitor this GPU's health (gpu.nvidia.com/unmonitored)".into()
        } else {
            "no health source: the DRA driver publishes no health taints for this node (none under DynamicMIG) and no NVML or exporter reads this card".into()
        });
    }
    let whole_blocked = whole.is_some_and(|w| blocked.contains(&w));
    card.draining = devices > 0 && blocked.len() >= devices;
    if let Some(d) = card.dra.as_mut() {
        if whole_blocked && !card.draining {
            d.problem(format!(
                "{} is tainted, but {} of its {} devices are not: new claims for them can still land on this GPU",
                whole.unwrap_or_default(),
                devices - blocked.len(),
                devices
            ));
        }
        d.taints = taints.into_iter().take(MAX_CARD_TAINTS).collect();
    }
}
