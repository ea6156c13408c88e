//! Small drawing pieces shared by views.

pub mod mig_bar;
pub mod rows;
pub mod text;
