//! How many objects of one kind a watch store keeps: past the most, a list's further objects
//! and new objects announced later are left out (changes to objects kept still apply, and a
//! delete makes room), and the source's note says how many. An object with no name is never
//! kept: the store keys objects by name (kube's store panics on one).

use kube::runtime::watcher::Event;

/// The most nodes kept: the largest supported fleet has 65,536 cards, so no more GPU nodes;
/// Kubernetes itself is tested to 5,000 nodes.
pub const NODES: usize = crate::sources::MAX_CARDS;
/// The most pods kept (those not finished): Kubernetes is tested to 150,000 pods a cluster.
pub const PODS: usize = 200_000;
/// The most PriorityClasses kept: clusters have a handful.
pub const CLASSES: usize = 10_000;
/// The most Kueue Workloads kept, as many as pods.
pub const WORKLOADS: usize = 200_000;
/// The most ResourceSlices (and DeviceTaintRules) kept: a 1,000-node DynamicMIG cluster
/// publishes 9,000 slices, and a drain makes 26 rules a GPU.
pub const SLICES: usize = 100_000;

/// The count kept of one store, and what was left out.
#[derive(Debug, Clone)]
pub struct Kept {
    max: usize,
    /// Objects taken from the list under way.
    listing: usize,
    listing_cut: u64,
    /// Left out of the last complete list.
    listed_cut: u64,
    /// New objects left out since the last complete list.
    later_cut: u64,
    unnamed: u64,
}

impl Kept {
    pub fn new(max: usize) -> Self {
        Self { max, listing: 0, listing_cut: 0, listed_cut: 0, later_cut: 0, unnamed: 0 }
    }

    /// Whether `event` may be applied to a store that holds `len` objects, `known` saying
    /// whether it holds this one.
    pub fn admit<K: kube::Resource>(&mut self, event: &Event<K>, len: usize, known: impl Fn(&K) -> bool) -> bool {
        let named = |k: &K| k.meta().name.as_deref().is_some_and(|n| !n.is_empty());
        match event {
            Event::Init => {
                (self.listing, self.listing_cut, self.unnamed) = (0, 0, 0);
                true
            }
            Event::InitApply(k) if !named(k) => {
                self.unnamed += 1;
                false
            }
            Event::InitApply(_) if self.listing >= self.max => {
                self.listing_cut += 1;
                false
            }
            Event::InitApply(_) => {
                self.listing += 1;
                true
            }
            Event::InitDone => {
                (self.listed_cut, self.later_cut) = (self.listing_cut, 0);
                true
            }
            Event::Apply(k) | Event::Delete(k) if !named(k) => {
                self.unnamed += 1;
                false
            }
            Event::Apply(k) if len >= self.max && !known(k) => {
                self.later_cut += 1;
                false
            }
            Event::Apply(_) | Event::Delete(_) => true,
        }
    }

    /// What was left out, for the source's note: `None` when nothing was.
    pub fn note(&self, what: &str) -> Option<String> {
        let mut parts = Vec::new();
        if self.listed_cut > 0 || self.later_cut > 0 {
            parts.push(format!(
                "{what} past {} not kept (the most tessera keeps): {} left out of the last list, {} new since",
                self.max, self.listed_cut, self.later_cut
            ));
        }
        if self.unnamed > 0 {
            parts.push(format!("{} {what} without a name left out", self.unnamed));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::kubernetes::objects::GpuPod;

    fn pod(name: &str) -> GpuPod {
        let mut p = GpuPod::default();
        p.metadata.name = (!name.is_empty()).then(|| name.to_string());
        p
    }

    #[test]
    fn a_list_and_later_objects_past_the_most_are_left_out_and_said() {
        let mut k = Kept::new(2);
        assert!(k.admit(&Event::<GpuPod>::Init, 0, |_| false));
        let took: Vec<bool> =
            ["a", "b", "c", "d"].iter().map(|n| k.admit(&Event::InitApply(pod(n)), 0, |_| false)).collect();
        assert_eq!(took, [true, true, false, false]);
        assert!(k.admit(&Event::<GpuPod>::InitDone, 2, |_| false));
        assert!(!k.admit(&Event::Apply(pod("e")), 2, |_| false), "a new one past the most");
        assert!(k.admit(&Event::Apply(pod("a")), 2, |_| true), "a change to one kept");
        assert!(k.admit(&Event::Delete(pod("a")), 2, |_| true));
        assert!(k.admit(&Event::Apply(pod("e")), 1, |_| false), "a delete made room");
        assert_eq!(
            k.note("pods").as_deref(),
            Some("pods past 2 not kept (the most tessera keeps): 2 left out of the last list, 1 new since")
        );
        assert!(k.admit(&Event::<GpuPod>::Init, 2, |_| false));
        assert!(k.admit(&Event::InitApply(pod("a")), 2, |_| false));
        assert!(k.admit(&Event::<GpuPod>::InitDone, 1, |_| false));
        assert_eq!(k.note("pods"), None, "a list within the most clears the note");
    }

    #[test]
    fn objects_without_a_name_are_left_out() {
        let mut k = Kept::new(10);
        assert!(!k.admit(&Event::InitApply(pod("")), 0, |_| false));
        assert!(!k.admit(&Event::Apply(pod("")), 0, |_| false));
        assert_eq!(k.note("nodes").as_deref(), Some("2 nodes without a name left out"));
    }
}
