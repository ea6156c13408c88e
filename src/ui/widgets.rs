//! Small drawing pieces shared by views.

pub mod mig_bar;
pub mod text;
