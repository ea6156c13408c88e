//! Where a card lives: the one reference to a card that workloads, events and the fleet share.

use serde::Serialize;

/// Where a card lives: the node name and the card index on that node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct CardRef {
    pub node: String,
    pub index: u32,
}

impl CardRef {
    pub fn new(node: impl Into<String>, index: u32) -> Self {
        Self { node: node.into(), index }
    }
}

impl std::fmt::Display for CardRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.node, self.index)
    }
}
