//! A MIG instance as a run's cluster state holds it: on a card cut into a layout, or created
//! per job under DynamicMIG.

/// A MIG instance of a card's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Inst {
    /// Its profile: an index into the card model's catalog profiles.
    pub profile: u8,
    pub start: u8,
    pub size: u8,
    pub compute: u8,
    pub mem_mib: u64,
    pub holder: Option<u32>,
}
