//! The simulated cluster's hardware: nodes, cards and their MIG layouts; every second H100
//! node is under NVIDIA's DRA driver in DynamicMIG mode (its cards laid out per claim).

use crate::model::{Card, ComputeMode, MigState, Node, ShareUnit, Sharing, SharingMode};

use super::rng::{Rng, mix};

/// A card model the simulator knows how to draw: its NVML name, memory and power.
#[derive(Debug, Clone, Copy)]
pub struct CardModel {
    pub nvml_name: &'static str,
    pub short: &'static str,
    pub memory_mib: u64,
    pub tdp_w: f64,
    /// MIG layouts this model's cards are given, in `parse_layout` syntax.
    pub layouts: &'static [&'static str],
}

pub const A100: CardModel = CardModel {
    nvml_name: "NVIDIA A100-SXM4-80GB",
    short: "a100",
    memory_mib: 81920,
    tdp_w: 400.0,
    layouts: &[
        "3g.40gb@0,2g.20gb@4,1g.10gb@6",
        "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb",
        "4g.40gb@0,3g.40gb@4",
        "2g.20gb@0,2g.20gb@2,2g.20gb@4,1g.10gb@6",
    ],
};

pub const H100: CardModel = CardModel {
    nvml_name: "NVIDIA H100 80GB HBM3",
    short: "h100",
    memory_mib: 81559,
    tdp_w: 700.0,
    layouts: &["1g.20gb,1g.20gb,1g.20gb,1g.20gb", "3g.40gb@0,3g.40gb@4", "3g.40gb@0,1g.10gb@4,1g.10gb@5,1g.10gb@6"],
};

pub const H200: CardModel = CardModel {
    nvml_name: "NVIDIA H200",
    short: "h200",
    memory_mib: 143771,
    tdp_w: 700.0,
    layouts: &["1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb", "3g.71gb@0,2g.35gb@4,1g.18gb@6"],
};

/// An L4 (no MIG), the card inference fleets time-slice.
pub const L4: CardModel =
    CardModel { nvml_name: "NVIDIA L4", short: "l4", memory_mib: 23034, tdp_w: 72.0, layouts: &[] };

/// An A30: MIG-capable, here time-sliced between two small services (MIG would isolate them).
pub const A30: CardModel = CardModel {
    nvml_name: "NVIDIA A30",
    short: "a30",
    memory_mib: 24576,
    tdp_w: 165.0,
    layouts: &["2g.12gb@0,1g.6gb@2,1g.6gb@3"],
};

/// Shared nodes of the default fleet: (node name, model, cards, mode, replicas per card).
/// Time-slicing and MPS are per node, as the device plugin configures them.
const SHARED: &[(&str, CardModel, u32, SharingMode, u32)] = &[
    ("gpu-l4-01", L4, 8, SharingMode::TimeSliced, 4),
    ("gpu-l4-02", L4, 1, SharingMode::Mps, 2),
    ("gpu-a30-01", A30, 1, SharingMode::TimeSliced, 2),
];

/// The sharing a simulated device plugin configures: replicas per card, MPS limits of
/// 1/replicas of memory and threads (as the device plugin's MPS daemon sets them).
fn sharing(mode: SharingMode, replicas: u32, memory_mib: u64) -> Sharing {
    let mps = mode == SharingMode::Mps;
    Sharing {
        mode: Some(mode),
        replicas: Some(replicas),
        unit: Some(ShareUnit::Replica),
        replicas_used: Some(0),
        contexts: Some(0),
        mps_server: mps.then_some(true),
        mps_memory_limit_mib: mps.then(|| memory_mib / u64::from(replicas)),
        mps_thread_pct: mps.then(|| 100 / replicas),
        origin: Some(format!("simulated device plugin: {} x{replicas}", mode.as_str())),
        ..Sharing::default()
    }
}

/// The default fleet: four 8-card nodes, with MIG cards of mixed layouts on three of them and
/// one under the DRA driver's DynamicMIG. Each entry is (node name, model, number of MIG cards
/// at the low indexes, DynamicMIG).
const DEFAULT: &[(&str, CardModel, usize, bool)] = &[
    ("gpu-a100-01", A100, 4, false),
    ("gpu-h100-01", H100, 2, false),
    ("gpu-h100-dra-01", H100, 0, true),
    ("gpu-h200-01", H200, 2, false),
];

/// The DRA driver's name, as NVIDIA's driver publishes its devices.
pub const DRA_DRIVER: &str = "gpu.nvidia.com";

/// Whether a card is laid out per claim by the DRA driver (DynamicMIG).
pub fn dynamic(c: &Card) -> bool {
    c.dra.as_ref().is_some_and(|d| d.dynamic)
}

/// A card of `node` under the DRA driver in DynamicMIG mode: published as its whole GPU
/// (`gpu-N`) and every MIG placement against its counter set, with nothing carved yet.
fn dra_card(mut c: Card, node: &str) -> Card {
    let devices = c.gpu_model().map_or(1, |m| 1 + m.profiles.iter().map(|p| p.placements.len() as u32).sum::<u32>());
    c.allocation = Some(crate::model::dra::Allocation::Dra);
    c.sharing = Sharing { mode: Some(SharingMode::DraDynamic), ..Sharing::default() };
    c.dra = Some(Box::new(crate::model::dra::DraCard {
        driver: DRA_DRIVER.into(),
        pool: node.into(),
        device: Some(format!("gpu-{}", c.index)),
        devices,
        dynamic: true,
        counter_set: Some(format!("gpu-{}-counter-set", c.index)),
        ..crate::model::dra::DraCard::default()
    }));
    refresh_placeable(&mut c);
    c
}

/// A DynamicMIG card's placeable profiles, after its instances changed.
pub fn refresh_placeable(c: &mut Card) {
    let Some(m) = c.gpu_model() else { return };
    let layout: Vec<crate::model::mig::Placed> = c
        .mig
        .instances
        .iter()
        .map(|i| crate::model::mig::Placed { profile: i.profile.clone(), start: i.start, size: i.size })
        .collect();
    let held_whole = !c.workloads.is_empty();
    let placeable = if held_whole { Vec::new() } else { crate::model::mig::layout::placeable(m, &layout) };
    if let Some(d) = c.dra.as_mut() {
        d.placeable = Some(placeable);
    }
}

/// Build the nodes: the default fleet, or `nodes × gpus` cycling through the models.
/// The shared nodes come after the others (default fleet only), so `--demo-size` fleets and
/// the first nodes stay as they were.
pub fn build(seed: u64, size: Option<(u32, u32)>) -> Vec<(Node, CardModel)> {
    let mut rng = Rng::new(seed ^ 0xf1ee7);
    let plan: Vec<(String, CardModel, usize, u32, bool)> = match size {
        None => DEFAULT.iter().map(|(n, m, mig, dra)| (n.to_string(), *m, *mig, 8, *dra)).collect(),
        Some((nodes, gpus)) => (0..nodes)
            .map(|i| {
                let m = [A100, H100, H200][i as usize % 3];
                // Every second H100 node is a DynamicMIG node, as in the default fleet.
                let dra = m.short == "h100" && (i / 3) % 2 == 1;
                let mig = (gpus as usize).div_ceil(4);
                let kind = if dra { format!("{}-dra", m.short) } else { m.short.to_string() };
                (format!("gpu-{kind}-{:03}", i / 3 + 1), m, mig, gpus, dra)
            })
            .collect(),
    };
    plan.into_iter()
        .map(|(name, model, mig_cards, gpus, dra)| {
            let cards = (0..gpus)
                .map(|index| {
                    let layout = if (index as usize) < mig_cards {
                        let pick = if size.is_none() { index as usize } else { rng.range(0, 64) as usize };
                        Some(model.layouts[pick % model.layouts.len()])
                    } else {
                        None
                    };
                    // A DynamicMIG node draws as the others do (the nodes after it stay as
                    // they were) and keeps no layout of its own.
                    if dra {
                        dra_card(card(&name, index, model, None), &name)
                    } else {
                        card(&name, index, model, layout)
                    }
                })
                .collect();
            (Node { cards, ..Node::new(name) }, model)
        })
        .chain(SHARED.iter().filter(|_| size.is_none()).map(|&(name, model, gpus, mode, replicas)| {
            let cards = (0..gpus)
                .map(|index| {
                    let mut c = card(name, index, model, None);
                    c.sharing = sharing(mode, replicas, model.memory_mib);
                    c
                })
                .collect();
            let node = Node { cards, ..Node::new(name) };
            (node, model)
        }))
        .collect()
}

fn card(node: &str, index: u32, model: CardModel, layout: Option<&str>) -> Card {
    let h = mix(node.bytes().fold(u64::from(index), |a, b| a.wrapping_mul(31).wrapping_add(u64::from(b))));
    let uuid = format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xffff,
        (mix(h) >> 48) & 0xffff,
        mix(h) & 0xffff_ffff_ffff
    );
    let mut card = Card {
        index,
        uuid: Some(uuid),
        model: model.nvml_name.to_string(),
        // The simulated models are NVIDIA's.
        vendor: Some(crate::model::Vendor::Nvidia),
        memory_total_mib: Some(model.memory_mib),
        power_limit_w: Some(model.tdp_w),
        compute_mode: Some(ComputeMode::Default),
        // The simulated scheduler hands unshared cards out whole.
        sharing: Sharing { mode: Some(SharingMode::Exclusive), ..Sharing::default() },
        ..Card::default()
    };
    if let Some(text) = layout {
        card.mig = mig_state(model.nvml_name, text);
    }
    card
}

/// The instances of a layout, with GPU instance ids as the driver would number them.
pub fn mig_state(model_name: &str, text: &str) -> MigState {
    MigState::from_layout(model_name, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sim_layout_parses() {
        for m in [A100, H100, H200, A30] {
            for l in m.layouts {
                let st = mig_state(m.nvml_name, l);
                assert!(st.enabled && !st.instances.is_empty(), "{} {l}", m.nvml_name);
            }
        }
    }

    #[test]
    fn sizes_scale() {
        let nodes = build(1, Some((6, 4)));
        assert_eq!(nodes.len(), 6);
        assert!(nodes.iter().all(|(n, _)| n.cards.len() == 4));
        let default = build(1, None);
        assert_eq!(default.iter().map(|(n, _)| n.cards.len()).sum::<usize>(), 42, "32 + 10 shared");
        let shared: Vec<String> = default
            .iter()
            .flat_map(|(n, _)| &n.cards)
            .map(|c| c.sharing_text(false))
            // The DynamicMIG node's cards are DRA's, not shared (issue 49).
            .filter(|t| t != "excl" && t != "MIG" && !t.starts_with("DRA "))
            .collect();
        assert_eq!(shared.len(), 10);
        assert!(shared.iter().all(|t| t.ends_with(" 0/4") || t.ends_with(" 0/2")), "{shared:?}");
        let names: std::collections::BTreeSet<_> = nodes.iter().map(|(n, _)| n.name.clone()).collect();
        assert_eq!(names.len(), 6, "node names are unique");
    }
}
