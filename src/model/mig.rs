//! MIG knowledge: the profile catalog per GPU model, layout rules, and best-fit sizing.

pub mod catalog;
pub mod fit;
pub mod layout;

pub use catalog::{GpuModel, Placement, Profile, lookup, suggest};
pub use fit::{Fit, best_fit};
pub use layout::{LayoutError, LayoutSpec, Placed, enumerate, parse_layout, validate};
