//! Opaque NVML handles: what each pointer value stands for (a card, a MIG device, a GPU or
//! compute instance, an event set, a GPM sample). Callers never dereference them.

use super::MAX_CARDS;

const DEVICE_BASE: usize = 0x1000;
const MIG_BASE: usize = 0x0100_0000;
const GI_BASE: usize = 0x0200_0000;
const CI_BASE: usize = 0x0300_0000;
const EVENT_SET_BASE: usize = 0x0400_0000;
const GPM_SAMPLE_BASE: usize = 0x0500_0000;
const GPM_SAMPLE_END: usize = 0x0600_0000;
/// GPM sample ids are below this (their handles' range).
pub const GPM_SAMPLE_IDS: u32 = (GPM_SAMPLE_END - GPM_SAMPLE_BASE) as u32;
const CARD_STRIDE: usize = 0x1_0000;

/// What an opaque NVML handle stands for; its pointer value is `encode()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handle {
    Device(usize),
    Mig { card: usize, gi: u32, ci: u32 },
    Gi { card: usize, gi: u32 },
    Ci { card: usize, gi: u32, ci: u32 },
    EventSet(u32),
    GpmSample(u32),
}

impl Handle {
    pub fn encode(self) -> usize {
        match self {
            Handle::Device(i) => DEVICE_BASE + i,
            Handle::Mig { card, gi, ci } => MIG_BASE + card * CARD_STRIDE + (gi as usize) * 0x100 + ci as usize,
            Handle::Gi { card, gi } => GI_BASE + card * CARD_STRIDE + gi as usize,
            Handle::Ci { card, gi, ci } => CI_BASE + card * CARD_STRIDE + (gi as usize) * 0x100 + ci as usize,
            Handle::EventSet(n) => EVENT_SET_BASE + n as usize,
            Handle::GpmSample(n) => GPM_SAMPLE_BASE + n as usize,
        }
    }

    pub fn decode(v: usize) -> Option<Handle> {
        let split = |base: usize| ((v - base) / CARD_STRIDE, (v - base) % CARD_STRIDE);
        let id = |x: usize| u32::try_from(x).ok();
        Some(match v {
            _ if (DEVICE_BASE..DEVICE_BASE + MAX_CARDS).contains(&v) => Handle::Device(v - DEVICE_BASE),
            _ if (MIG_BASE..GI_BASE).contains(&v) => {
                let (card, rest) = split(MIG_BASE);
                Handle::Mig { card, gi: id(rest / 0x100)?, ci: id(rest % 0x100)? }
            }
            _ if (GI_BASE..CI_BASE).contains(&v) => {
                let (card, rest) = split(GI_BASE);
                Handle::Gi { card, gi: id(rest)? }
            }
            _ if (CI_BASE..EVENT_SET_BASE).contains(&v) => {
                let (card, rest) = split(CI_BASE);
                Handle::Ci { card, gi: id(rest / 0x100)?, ci: id(rest % 0x100)? }
            }
            _ if (EVENT_SET_BASE..GPM_SAMPLE_BASE).contains(&v) => Handle::EventSet(id(v - EVENT_SET_BASE)?),
            _ if (GPM_SAMPLE_BASE..GPM_SAMPLE_END).contains(&v) => Handle::GpmSample(id(v - GPM_SAMPLE_BASE)?),
            _ => return None,
        })
    }
}
