//! Best fit: the smallest MIG instance that holds a job, and what it leaves idle.

use serde::Serialize;

use super::catalog::{GpuModel, Profile};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    pub profile: String,
    /// The instance's memory: exact MiB where NVIDIA publishes it, else the nominal GB.
    pub memory_mib: u64,
    /// Memory held but not needed.
    pub wasted_mib: u64,
    pub compute_slices: u8,
    /// Compute slices held beyond the need.
    pub wasted_compute_slices: u8,
}

/// The smallest profile (fewest memory slices, then fewest compute slices) with at least
/// `need_mib` of memory and `need_compute_slices` compute slices. Profiles with media
/// extensions are left for jobs that ask for them. `None` when no instance is big enough.
pub fn best_fit(model: &GpuModel, need_mib: u64, need_compute_slices: u8) -> Option<Fit> {
    model
        .profiles
        .iter()
        .filter(|p| !p.has_media_extensions())
        .filter(|p| p.planning_mib() >= need_mib && p.compute_slices >= need_compute_slices)
        .min_by_key(|p| (p.memory_slices, p.compute_slices, p.planning_mib()))
        .map(|p: &Profile| Fit {
            profile: p.name.clone(),
            memory_mib: p.planning_mib(),
            wasted_mib: p.planning_mib() - need_mib,
            compute_slices: p.compute_slices,
            wasted_compute_slices: p.compute_slices - need_compute_slices,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mig::lookup;

    #[test]
    fn the_articles_case_a_15_gb_job_wastes_5_gb() {
        let Some(m) = lookup("NVIDIA A100-SXM4-80GB") else { panic!("catalog") };
        let fit = best_fit(m, 15 * 1024, 1);
        assert_eq!(fit.as_ref().map(|f| f.profile.as_str()), Some("1g.20gb"));
        assert_eq!(fit.map(|f| f.wasted_mib), Some(5 * 1024));
    }

    #[test]
    fn exact_memory_beats_the_name() {
        // A100-40GB "1g.5gb" is 4864 MiB: a 4.8 GiB job needs the next size up.
        let Some(m) = lookup("A100-SXM4-40GB") else { panic!("catalog") };
        let need = 4915; // 4.8 GiB
        assert_eq!(best_fit(m, need, 1).map(|f| f.profile), Some("1g.10gb".to_string()));
        assert_eq!(best_fit(m, 4000, 1).map(|f| (f.profile, f.wasted_mib)), Some(("1g.5gb".to_string(), 864)));
        assert_eq!(
            best_fit(m, 10_000, 3).map(|f| (f.profile, f.wasted_compute_slices)),
            Some(("3g.20gb".to_string(), 0))
        );
        assert_eq!(best_fit(m, 50_000, 1), None);
    }
}
