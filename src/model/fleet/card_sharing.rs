//! A card's sharing as the console reads it: the mode (configured, or inferred from the
//! compute mode and contexts), the unit and free replicas, and the sharing and contexts
//! columns.

use super::{Card, ComputeMode};
use crate::model::sharing::{ShareUnit, SharingMode};

impl Card {
    /// The card's sharing mode: MIG when MIG is on; else what a source configured; else an
    /// MPS server; else from the compute mode and the contexts NVML sees (exclusive-process
    /// allows one context; in the default mode more than one context is the driver's own
    /// time-slicing, one is exclusive use); `None` where nothing tells (no contexts seen says
    /// nothing about how the card would be shared).
    pub fn sharing_mode(&self) -> Option<SharingMode> {
        if self.dra.as_ref().is_some_and(|d| d.dynamic) {
            return Some(SharingMode::DraDynamic);
        }
        if self.mig.enabled {
            return Some(SharingMode::Mig);
        }
        if let Some(m) = self.sharing.mode {
            return Some(m);
        }
        if self.sharing.mps_server == Some(true) {
            return Some(SharingMode::Mps);
        }
        if self.compute_mode == Some(ComputeMode::ExclusiveProcess) {
            return Some(SharingMode::Exclusive);
        }
        match (self.sharing.contexts, self.compute_mode) {
            (Some(n), None | Some(ComputeMode::Default)) if n > 1 => Some(SharingMode::TimeSliced),
            (Some(1), _) => Some(SharingMode::Exclusive),
            _ => None,
        }
    }

    /// The unit a shared card's replicas count in (replicas unless a source says MPS units).
    pub fn share_unit(&self) -> ShareUnit {
        self.sharing.unit.unwrap_or(ShareUnit::Replica)
    }

    /// Replicas still free on a shared card (`replicas - used`), where both are known.
    pub fn free_replicas(&self) -> Option<u32> {
        if !self.sharing_mode().is_some_and(SharingMode::unisolated) {
            return None;
        }
        Some(self.sharing.replicas?.saturating_sub(self.sharing.replicas_used?))
    }

    /// The sharing column: `MIG`, `TS×4 3/4`, `MPS×2 1/2`, `MPS`, `excl`, a partition mode
    /// (`CPX NPS4`), or `?` when unknown.
    /// `ascii` writes `x` for `×`.
    pub fn sharing_text(&self, ascii: bool) -> String {
        let times = if ascii { "x" } else { "×" };
        let Some(mode) = self.sharing_mode() else { return "?".into() };
        let name = match mode {
            SharingMode::Exclusive => return "excl".into(),
            SharingMode::Mig => return "MIG".into(),
            SharingMode::DraDynamic => return if self.mig.enabled { "DRA MIG" } else { "DRA dyn" }.into(),
            SharingMode::Partitioned => {
                let s = &self.sharing;
                let parts: Vec<&str> =
                    [&s.compute_partition, &s.memory_partition].into_iter().flatten().map(String::as_str).collect();
                return if parts.is_empty() { "part".into() } else { parts.join(" ") };
            }
            SharingMode::TimeSliced => "TS",
            SharingMode::Mps => "MPS",
        };
        match (self.sharing.replicas, self.sharing.replicas_used) {
            (Some(r), Some(u)) => format!("{name}{times}{r} {u}/{r}"),
            (Some(r), None) => format!("{name}{times}{r}"),
            (None, _) => name.to_string(),
        }
    }

    /// Contexts as the fleet shows them: a number, or `-` when no source can see processes.
    pub fn contexts_text(&self) -> String {
        self.sharing.contexts.map_or_else(|| "-".into(), |n| n.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sharing::Sharing;

    fn card(mode: Option<SharingMode>, replicas: Option<u32>, used: Option<u32>, contexts: Option<u32>) -> Card {
        let mut c = Card { model: "NVIDIA L4".into(), ..Card::default() };
        c.sharing = Sharing { mode, replicas, replicas_used: used, contexts, ..Sharing::default() };
        c
    }

    #[test]
    fn the_sharing_column() {
        use SharingMode::*;
        let cases = [
            (card(Some(TimeSliced), Some(4), Some(3), Some(3)), "TS×4 3/4", Some(1)),
            (card(Some(TimeSliced), Some(4), None, None), "TS×4", None),
            (card(Some(Mps), Some(2), Some(1), Some(2)), "MPS×2 1/2", Some(1)),
            (card(Some(Exclusive), None, None, Some(1)), "excl", None),
            (card(None, None, None, Some(3)), "TS", None),
            (card(None, None, None, Some(1)), "excl", None),
            (card(None, None, None, Some(0)), "?", None),
            (card(None, None, None, None), "?", None),
            (card(Some(TimeSliced), Some(4), Some(6), None), "TS×4 6/4", Some(0)),
            (card(Some(Mps), Some(100), Some(50), Some(1)), "MPS×100 50/100", Some(50)),
        ];
        for (c, text, free) in cases {
            assert_eq!((c.sharing_text(false).as_str(), c.free_replicas()), (text, free), "{:?}", c.sharing);
        }
        let mut mig = card(Some(TimeSliced), Some(4), None, None);
        mig.mig.enabled = true;
        assert_eq!(mig.sharing_text(true), "MIG", "MIG wins: the device plugin time-slices its instances");
        let mut mps = card(None, None, None, Some(2));
        mps.sharing.mps_server = Some(true);
        assert_eq!(mps.sharing_mode(), Some(Mps));
        // Two contexts under exclusive-process cannot be time-slicing; one process is no proof
        // of an exclusive configuration, but it is how the card is used.
        let mut excl = card(None, None, None, Some(2));
        excl.compute_mode = Some(crate::model::ComputeMode::ExclusiveProcess);
        assert_eq!(excl.sharing_mode(), Some(Exclusive));
        excl.compute_mode = Some(crate::model::ComputeMode::Prohibited);
        assert_eq!(excl.sharing_mode(), None, "a drained card's contexts say nothing of sharing");
    }

    #[test]
    fn a_partition_mode_is_shown_as_the_sharing_mode_never_as_mig() {
        let mut c = card(Some(SharingMode::Partitioned), None, None, None);
        assert_eq!(c.sharing_text(true), "part", "a mode without its names");
        c.sharing.compute_partition = Some("CPX".into());
        c.sharing.memory_partition = Some("NPS4".into());
        assert_eq!((c.sharing_text(false).as_str(), c.free_replicas()), ("CPX NPS4", None));
        assert!(!SharingMode::Partitioned.unisolated() && !c.mig.enabled);
    }
}
