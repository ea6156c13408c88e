//! MIG layouts: parse, validate and enumerate instance placements for one GPU model.
//!
//! A layout is valid when every instance uses one of its profile's allowed placements, no two
//! instances share a memory slice, no profile exceeds its maximum count, and at most one `+me`
//! instance is present (NVIDIA MIG User Guide; see docs/mig-reference.md §1).

use serde::Serialize;

use super::catalog::{GpuModel, Placement, Profile};

/// One GPU instance of a layout: a profile at a placement (memory slices).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Placed {
    pub profile: String,
    pub start: u8,
    pub size: u8,
}

impl std::fmt::Display for Placed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.profile, self.start)
    }
}

/// Why a layout is not valid; `index` is the offending instance's position in the layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("instance {index} ({name}): unknown profile for {model}; known: {known}")]
    UnknownProfile { index: usize, name: String, model: String, known: String },
    #[error("instance {index} ({placed}): placement not allowed for {profile}; allowed starts: {allowed}")]
    BadPlacement { index: usize, placed: String, profile: String, allowed: String },
    #[error("instance {index} ({placed}): overlaps instance {other} ({other_placed}) on memory slice {slice}")]
    Overlap { index: usize, placed: String, other: usize, other_placed: String, slice: u8 },
    #[error("instance {index} ({placed}): more than {max} instances of {profile}")]
    TooMany { index: usize, placed: String, profile: String, max: u8 },
    #[error("instance {index} ({placed}): only one +me instance fits a card (instance {other} is one)")]
    SecondMediaExtension { index: usize, placed: String, other: usize },
    #[error("instance {index}: cannot read {text:?}: {why}")]
    Syntax { index: usize, text: String, why: String },
    #[error("instance {index} ({profile}): no free placement left for it")]
    NoRoom { index: usize, profile: String },
}

/// What a card should become: MIG off (`whole`) or this set of instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutSpec {
    Whole,
    Mig(Vec<Placed>),
}

pub fn validate(model: &GpuModel, layout: &[Placed]) -> Result<(), LayoutError> {
    let mut owner: [Option<usize>; 16] = [None; 16];
    let mut counts: Vec<(usize, u8)> = Vec::new();
    let mut media: Option<usize> = None;
    for (index, inst) in layout.iter().enumerate() {
        let placed = inst.to_string();
        let profile = profile_of(model, index, &inst.profile)?;
        let p = Placement { start: inst.start, size: inst.size };
        if !profile.allows(p) {
            let allowed = profile.placements.iter().map(|p| p.start.to_string()).collect::<Vec<_>>().join(",");
            return Err(LayoutError::BadPlacement { index, placed, profile: profile.name.clone(), allowed });
        }
        for slice in inst.start..inst.start + inst.size {
            if let Some(other) = owner[usize::from(slice)] {
                let other_placed = layout[other].to_string();
                return Err(LayoutError::Overlap { index, placed, other, other_placed, slice });
            }
            owner[usize::from(slice)] = Some(index);
        }
        let pi = profile_index(model, profile);
        match counts.iter_mut().find(|(i, _)| *i == pi) {
            Some((_, n)) => *n += 1,
            None => counts.push((pi, 1)),
        }
        if counts.iter().any(|&(i, n)| i == pi && n > profile.max_count) {
            return Err(LayoutError::TooMany { index, placed, profile: profile.name.clone(), max: profile.max_count });
        }
        if profile.has_media_extensions() {
            if let Some(other) = media {
                return Err(LayoutError::SecondMediaExtension { index, placed, other });
            }
            media = Some(index);
        }
    }
    Ok(())
}

fn profile_of<'m>(model: &'m GpuModel, index: usize, name: &str) -> Result<&'m Profile, LayoutError> {
    model.profile(name).ok_or_else(|| LayoutError::UnknownProfile {
        index,
        name: name.to_string(),
        model: model.name.clone(),
        known: model.profiles.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
    })
}

fn profile_index(model: &GpuModel, profile: &Profile) -> usize {
    model.profiles.iter().position(|p| std::ptr::eq(p, profile)).unwrap_or(usize::MAX)
}

/// Parse `3g.40gb@0,2g.20gb@4,1g.10gb@6` or `whole`. Instances written without `@start` get
/// placements by search: a layout is valid when some assignment of allowed placements is
/// (`3g.40gb,2g.20gb,2g.20gb` is `2g@0,2g@2,3g@4`), whatever order it is written in. Among the
/// assignments the first in this order wins: largest instances first, each at its lowest free
/// allowed start, as NVIDIA's tools create them.
pub fn parse_layout(model: &GpuModel, text: &str) -> Result<LayoutSpec, LayoutError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("whole") || text.eq_ignore_ascii_case("off") {
        return Ok(LayoutSpec::Whole);
    }
    let mut fixed = Vec::new();
    let mut floating = Vec::new();
    for (index, part) in text.split(',').map(str::trim).enumerate() {
        if part.is_empty() {
            return Err(LayoutError::Syntax { index, text: part.into(), why: "empty entry".into() });
        }
        let (name, start) = match part.split_once('@') {
            Some((n, s)) => {
                let s = s.trim().parse::<u8>().map_err(|_| LayoutError::Syntax {
                    index,
                    text: part.into(),
                    why: "the start after @ must be a memory-slice number".into(),
                })?;
                (n.trim(), Some(s))
            }
            None => (part, None),
        };
        let profile = profile_of(model, index, name)?;
        match start {
            Some(start) => {
                fixed.push((index, Placed { profile: profile.name.clone(), start, size: profile.memory_slices }))
            }
            None => floating.push((index, profile)),
        }
    }
    let mut layout: Vec<(usize, Placed)> = fixed;
    validate(model, &layout.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>()).map_err(|e| reindex(e, &layout))?;
    check_counts(model, &layout, &floating)?;
    floating.sort_by_key(|(i, p)| (std::cmp::Reverse(p.memory_slices), std::cmp::Reverse(p.compute_slices), *i));
    let used = layout.iter().fold(0u16, |m, (_, p)| m | Placement { start: p.start, size: p.size }.mask());
    let mut search = Search { floating: &floating, chosen: Vec::with_capacity(floating.len()), deepest: 0 };
    if !search.place(used) {
        let (index, profile) = floating[search.deepest];
        return Err(LayoutError::NoRoom { index, profile: profile.name.clone() });
    }
    for (&(index, profile), pl) in floating.iter().zip(&search.chosen) {
        layout.push((index, Placed { profile: profile.name.clone(), start: pl.start, size: pl.size }));
    }
    validate(model, &layout.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>()).map_err(|e| reindex(e, &layout))?;
    let mut out: Vec<Placed> = layout.into_iter().map(|(_, p)| p).collect();
    out.sort_by_key(|p| p.start);
    Ok(LayoutSpec::Mig(out))
}

/// The rules that no placement can mend, checked in the order written: a profile's maximum
/// count and the one `+me` instance a card takes.
fn check_counts(
    model: &GpuModel,
    fixed: &[(usize, Placed)],
    floating: &[(usize, &Profile)],
) -> Result<(), LayoutError> {
    let mut all: Vec<(usize, &Profile, String)> = floating.iter().map(|&(i, p)| (i, p, p.name.clone())).collect();
    for (i, placed) in fixed {
        let profile = profile_of(model, *i, &placed.profile)?;
        all.push((*i, profile, placed.to_string()));
    }
    all.sort_by_key(|(i, _, _)| *i);
    let mut media: Option<usize> = None;
    for (n, (index, profile, placed)) in all.iter().enumerate() {
        let same = all[..=n].iter().filter(|(_, p, _)| std::ptr::eq(*p, *profile)).count();
        if same > usize::from(profile.max_count) {
            let (index, placed, max) = (*index, placed.clone(), profile.max_count);
            return Err(LayoutError::TooMany { index, placed, profile: profile.name.clone(), max });
        }
        if profile.has_media_extensions() {
            if let Some(other) = media {
                return Err(LayoutError::SecondMediaExtension { index: *index, placed: placed.clone(), other });
            }
            media = Some(*index);
        }
    }
    Ok(())
}

/// Depth-first search for placements of the unplaced instances, in their sorted order.
struct Search<'a> {
    floating: &'a [(usize, &'a Profile)],
    chosen: Vec<Placement>,
    /// The furthest instance the search reached: the one named when no assignment exists.
    deepest: usize,
}

impl Search<'_> {
    fn place(&mut self, used: u16) -> bool {
        let depth = self.chosen.len();
        self.deepest = self.deepest.max(depth);
        let Some(&(_, profile)) = self.floating.get(depth) else { return true };
        // Instances of one profile are interchangeable: each takes a placement after the one
        // before it, so the search tries each set of placements once, not in every order.
        let after = match depth.checked_sub(1).map(|d| (self.floating[d].1, self.chosen[d])) {
            Some((prev, at)) if std::ptr::eq(prev, profile) => Some(at),
            _ => None,
        };
        for &pl in &profile.placements {
            if after.is_some_and(|at| pl <= at) || pl.mask() & used != 0 {
                continue;
            }
            self.chosen.push(pl);
            if self.place(used | pl.mask()) {
                return true;
            }
            self.chosen.pop();
        }
        false
    }
}

/// Errors from validating a partial list name list positions; report the user's positions.
fn reindex(e: LayoutError, layout: &[(usize, Placed)]) -> LayoutError {
    let map = |i: usize| layout.get(i).map_or(i, |(orig, _)| *orig);
    match e {
        LayoutError::BadPlacement { index, placed, profile, allowed } => {
            LayoutError::BadPlacement { index: map(index), placed, profile, allowed }
        }
        LayoutError::Overlap { index, placed, other, other_placed, slice } => {
            LayoutError::Overlap { index: map(index), placed, other: map(other), other_placed, slice }
        }
        LayoutError::TooMany { index, placed, profile, max } => {
            LayoutError::TooMany { index: map(index), placed, profile, max }
        }
        LayoutError::SecondMediaExtension { index, placed, other } => {
            LayoutError::SecondMediaExtension { index: map(index), placed, other: map(other) }
        }
        other => other,
    }
}

/// Every maximal valid layout of the model's profiles without media extensions: no further
/// instance of any such profile could be added. `+me` variants are not listed separately: one
/// may replace a plain instance of the same size at the same placement. Each layout is sorted by
/// start; layouts are sorted so that larger instances at lower slices come first.
pub fn enumerate(model: &GpuModel) -> Vec<Vec<Placed>> {
    let candidates: Vec<(usize, Placement)> = model
        .profiles
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.has_media_extensions())
        .flat_map(|(i, p)| p.placements.iter().map(move |pl| (i, *pl)))
        .collect();
    let mut out = Vec::new();
    let mut chosen = Vec::new();
    let mut counts = vec![0u8; model.profiles.len()];
    walk(model, &candidates, 0, 0, &mut counts, &mut chosen, &mut out);
    let mut layouts: Vec<Vec<Placed>> = out
        .into_iter()
        .map(|sel: Vec<usize>| {
            let mut l: Vec<Placed> = sel
                .into_iter()
                .map(|c| {
                    let (pi, pl) = candidates[c];
                    Placed { profile: model.profiles[pi].name.clone(), start: pl.start, size: pl.size }
                })
                .collect();
            l.sort_by_key(|p| p.start);
            l
        })
        .collect();
    layouts
        .sort_by_key(|l| l.iter().map(|p| (p.start, std::cmp::Reverse(p.size), p.profile.clone())).collect::<Vec<_>>());
    layouts
}

/// `enumerate` of a catalog model, computed once per model for the life of the process (the
/// planner asks for it on every advisor run).
pub fn maximal_layouts(model: &'static GpuModel) -> &'static [Vec<Placed>] {
    use std::sync::{Mutex, OnceLock};
    type Memo = Mutex<Vec<(&'static str, &'static [Vec<Placed>])>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(|| Mutex::new(Vec::new()));
    let mut memo = memo.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, l)) = memo.iter().find(|(n, _)| *n == model.name) {
        return l;
    }
    // Leaked once per catalog model: a handful of small vectors for the process's life.
    let layouts: &'static [Vec<Placed>] = Box::leak(enumerate(model).into_boxed_slice());
    memo.push((model.name.as_str(), layouts));
    layouts
}

fn walk(
    model: &GpuModel,
    cands: &[(usize, Placement)],
    from: usize,
    used: u16,
    counts: &mut [u8],
    chosen: &mut Vec<usize>,
    out: &mut Vec<Vec<usize>>,
) {
    for c in from..cands.len() {
        let (pi, pl) = cands[c];
        if used & pl.mask() == 0 && counts[pi] < model.profiles[pi].max_count {
            counts[pi] += 1;
            chosen.push(c);
            walk(model, cands, c + 1, used | pl.mask(), counts, chosen, out);
            chosen.pop();
            counts[pi] -= 1;
        }
    }
    let maximal = !cands.iter().any(|&(pi, pl)| used & pl.mask() == 0 && counts[pi] < model.profiles[pi].max_count);
    if maximal && !chosen.is_empty() {
        out.push(chosen.clone());
    }
}

/// Whether `layout` is packed: one of the model's maximal layouts (`enumerate`; a `+me`
/// instance counts as its plain profile), or as many instances of one profile as the model
/// holds (mig-parted's `all-<profile>`). The schedule, the planner and the waste rules take
/// these as good layouts: a free slice next to one (slice 7 under 7 x 1g) is the catalog's.
pub fn is_packed(model: &'static GpuModel, layout: &[Placed]) -> bool {
    if validate(model, layout).is_err() || layout.is_empty() {
        return false;
    }
    let plain = |name: &str| {
        let base = name.strip_suffix("+me").unwrap_or(name);
        if model.profile(base).is_some() { base.to_string() } else { name.to_string() }
    };
    let mut l: Vec<Placed> =
        layout.iter().map(|p| Placed { profile: plain(&p.profile), start: p.start, size: p.size }).collect();
    l.sort_by_key(|p| p.start);
    let one_profile = l.iter().all(|p| p.profile == l[0].profile)
        && model.profile(&l[0].profile).is_some_and(|p| l.len() == usize::from(p.max_count));
    one_profile || maximal_layouts(model).contains(&l)
}

/// Free slices that some profile could still occupy next to `layout` (bit i = slice i).
/// Free slices outside this mask are stranded: under 7×1g, slice 7 is one.
pub fn reachable_slices(model: &GpuModel, layout: &[Placed]) -> u16 {
    let used = layout.iter().fold(0u16, |m, p| m | Placement { start: p.start, size: p.size }.mask());
    let has_media = layout.iter().any(|p| model.profile(&p.profile).is_some_and(Profile::has_media_extensions));
    model
        .profiles
        .iter()
        .filter(|p| !(has_media && p.has_media_extensions()))
        .filter(|p| layout.iter().filter(|l| l.profile == p.name).count() < usize::from(p.max_count))
        .flat_map(|p| p.placements.iter())
        .filter(|pl| pl.mask() & used == 0)
        .fold(0, |m, pl| m | pl.mask())
}

/// DynamicMIG: the lowest placement of profile `name` that the card's counters allow beside
/// `layout` (memory slices free, the card's compute slices and the profile's count not
/// exceeded), as the scheduler allocates a claim first fit; `None` where none does.
pub fn first_free(model: &GpuModel, layout: &[Placed], name: &str) -> Option<Placement> {
    let profile = model.profile(name)?;
    let used = layout.iter().fold(0u16, |m, p| m | Placement { start: p.start, size: p.size }.mask());
    let compute: u16 =
        layout.iter().filter_map(|p| model.profile(&p.profile)).map(|p| u16::from(p.compute_slices)).sum();
    let count = layout.iter().filter(|p| p.profile == profile.name).count();
    if count >= usize::from(profile.max_count)
        || compute + u16::from(profile.compute_slices) > u16::from(model.compute_slices)
    {
        return None;
    }
    profile.placements.iter().copied().filter(|pl| pl.mask() & used == 0).min()
}

/// DynamicMIG: the profiles the counters could still place beside `layout`, in catalog order.
pub fn placeable(model: &GpuModel, layout: &[Placed]) -> Vec<String> {
    model.profiles.iter().filter(|p| first_free(model, layout, &p.name).is_some()).map(|p| p.name.clone()).collect()
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
