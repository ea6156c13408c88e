//! Tests for MIG layout rules against NVIDIA's documented configurations.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::model::mig::catalog::{catalog, lookup};

fn model(name: &str) -> &'static GpuModel {
    match lookup(name) {
        Some(m) => m,
        None => panic!("no model {name}"),
    }
}

fn placed(profile: &str, start: u8, size: u8) -> Placed {
    Placed { profile: profile.into(), start, size }
}

fn spec(model_name: &str, text: &str) -> Vec<Placed> {
    match parse_layout(model(model_name), text) {
        Ok(LayoutSpec::Mig(l)) => l,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn every_documented_layout_validates() {
    for m in &catalog().models {
        assert!(!m.valid_layouts.is_empty(), "{}", m.name);
        for l in &m.valid_layouts {
            let layout: Vec<Placed> = l.iter().map(|e| placed(&e.profile, e.start, e.size)).collect();
            assert_eq!(validate(m, &layout), Ok(()), "{}: {layout:?}", m.name);
        }
    }
}

#[test]
fn enumeration_counts_match_the_reference() {
    for m in &catalog().models {
        let all = enumerate(m);
        let unique: BTreeSet<_> = all.iter().cloned().collect();
        assert_eq!(unique.len(), all.len(), "{}: duplicates", m.name);
        let want = if m.memory_slices == 4 { 5 } else { 78 };
        assert_eq!(all.len(), want, "{}", m.name);
        for l in &m.valid_layouts {
            let mut layout: Vec<Placed> = l.iter().map(|e| placed(&e.profile, e.start, e.size)).collect();
            layout.sort_by_key(|p| p.start);
            assert!(unique.contains(&layout), "{}: documented {layout:?} not enumerated", m.name);
        }
    }
}

#[test]
fn nvidia_examples_validate() {
    // NVIDIA's A100 examples (MIG User Guide, getting started) and the mixed layout.
    for (m, text) in [
        ("A100-SXM4-40GB", "3g.20gb@4,2g.10gb@0,1g.5gb@2,1g.5gb@3"),
        ("A100-80GB", "3g.40gb@0,2g.20gb@4,1g.10gb@6"),
        ("H200", "1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb"),
        ("A30", "2g.12gb,1g.6gb,1g.6gb"),
        ("H100 80GB HBM3", "4g.40gb,3g.40gb"),
    ] {
        let layout = spec(m, text);
        assert_eq!(validate(model(m), &layout), Ok(()), "{m} {text}");
    }
}

#[test]
fn known_invalid_layouts_are_rejected_with_the_reason() {
    let a100 = model("A100-80GB");
    let err = validate(a100, &[placed("3g.40gb", 2, 4)]);
    assert!(matches!(err, Err(LayoutError::BadPlacement { index: 0, .. })), "{err:?}");
    let err = validate(a100, &[placed("3g.40gb", 0, 4), placed("2g.20gb", 2, 2)]);
    assert!(matches!(err, Err(LayoutError::Overlap { index: 1, other: 0, slice: 2, .. })), "{err:?}");
    let eight: Vec<Placed> = (0..7).map(|s| placed("1g.10gb", s, 1)).chain([placed("1g.10gb", 7, 1)]).collect();
    assert!(matches!(validate(a100, &eight), Err(LayoutError::BadPlacement { index: 7, .. })));
    let four_double: Vec<Placed> = [0, 2, 4, 6].iter().map(|&s| placed("1g.20gb", s, 2)).collect();
    assert_eq!(validate(a100, &four_double), Ok(()));
    let err = validate(
        a100,
        &[placed("2g.20gb", 0, 2), placed("2g.20gb", 2, 2), placed("2g.20gb", 4, 2), placed("2g.20gb", 6, 2)],
    );
    assert!(matches!(err, Err(LayoutError::BadPlacement { index: 3, .. })), "{err:?}");
    let err = validate(a100, &[placed("1g.10gb+me", 0, 1), placed("1g.10gb+me", 1, 1)]);
    assert!(matches!(err, Err(LayoutError::TooMany { index: 1, .. })), "{err:?}");
    let a30 = model("A30");
    let err = validate(a30, &[placed("1g.6gb+me", 0, 1), placed("2g.12gb+me", 2, 2)]);
    assert!(matches!(err, Err(LayoutError::SecondMediaExtension { index: 1, other: 0, .. })), "{err:?}");
    let err = validate(a100, &[placed("5g.50gb", 0, 5)]);
    assert!(matches!(err, Err(LayoutError::UnknownProfile { index: 0, .. })), "{err:?}");
    let msg = validate(a100, &[placed("3g.40gb", 0, 4), placed("2g.20gb", 2, 2)]).err().map(|e| e.to_string());
    assert_eq!(msg.as_deref(), Some("instance 1 (2g.20gb@2): overlaps instance 0 (3g.40gb@0) on memory slice 2"));
}

#[test]
fn parsing_places_largest_first_and_names_the_bad_entry() {
    assert_eq!(
        spec("A100-80GB", "1g.10gb,3g.40gb,2g.20gb"),
        vec![placed("3g.40gb", 0, 4), placed("2g.20gb", 4, 2), placed("1g.10gb", 6, 1)]
    );
    assert_eq!(parse_layout(model("A100-80GB"), "whole"), Ok(LayoutSpec::Whole));
    let err = parse_layout(model("A100-80GB"), "3g.40gb@0,3g.40gb@4,1g.10gb");
    assert!(matches!(err, Err(LayoutError::NoRoom { index: 2, .. })), "{err:?}");
    let err = parse_layout(model("A100-80GB"), "3g.40gb@x");
    assert!(matches!(err, Err(LayoutError::Syntax { index: 0, .. })), "{err:?}");
    let err = parse_layout(model("A100-80GB"), "1g.10gb@0,bogus");
    assert!(matches!(err, Err(LayoutError::UnknownProfile { index: 1, .. })), "{err:?}");
}

#[test]
fn stranded_slices_are_found() {
    let h200 = model("H200");
    let seven: Vec<Placed> = (0..7).map(|s| placed("1g.18gb", s, 1)).collect();
    let free = h200.all_slices() & !0x7f;
    assert_eq!(free, 0x80);
    assert_eq!(reachable_slices(h200, &seven) & free, 0, "slice 7 is stranded under 7x1g");
    let three: Vec<Placed> = vec![placed("3g.71gb", 0, 4)];
    assert_eq!(reachable_slices(h200, &three), 0xf0);
}

#[test]
fn packed_layouts_are_the_maximal_ones_and_all_of_one_profile() {
    let a100 = model("A100-80GB");
    let packed = |text: &str| is_packed(a100, &spec("A100-80GB", text));
    assert!(packed("1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb"), "slice 7 stranded, still packed");
    assert!(packed("1g.10gb+me@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"));
    assert!(packed("3g.40gb@0,2g.20gb@4,1g.10gb@6"));
    assert!(packed("2g.20gb,2g.20gb,2g.20gb"), "mig-parted's all-2g.20gb");
    assert!(!packed("1g.10gb@6"), "slice 7 stranded and room left");
    assert!(!packed("3g.40gb@0,1g.10gb@6"));
    assert!(!is_packed(a100, &[]));
    for m in &catalog().models {
        let Some(m) = lookup(&m.name) else { continue };
        for l in maximal_layouts(m) {
            assert!(is_packed(m, l), "{}: {l:?}", m.name);
        }
    }
}

/// All candidate (profile, placement) pairs of profiles without media extensions.
fn candidates(m: &GpuModel) -> Vec<Placed> {
    m.profiles
        .iter()
        .filter(|p| !p.has_media_extensions())
        .flat_map(|p| p.placements.iter().map(|pl| placed(&p.name, pl.start, pl.size)))
        .collect()
}

#[test]
fn brute_force_finds_nothing_the_enumeration_misses() {
    for m in &catalog().models {
        let cands = candidates(m);
        assert!(cands.len() <= 20, "{}: brute force too large", m.name);
        let valid = |l: &[Placed]| validate(m, l).is_ok();
        let mut maximal = BTreeSet::new();
        for bits in 1u32..(1 << cands.len()) {
            let mut l: Vec<Placed> =
                (0..cands.len()).filter(|i| bits & (1 << i) != 0).map(|i| cands[i].clone()).collect();
            if !valid(&l) {
                continue;
            }
            let extendable = cands.iter().any(|c| {
                let mut more = l.clone();
                more.push(c.clone());
                !l.contains(c) && valid(&more)
            });
            if !extendable {
                l.sort_by_key(|p| p.start);
                maximal.insert(l);
            }
        }
        let enumerated: BTreeSet<_> = enumerate(m).into_iter().collect();
        assert_eq!(maximal, enumerated, "{}", m.name);
    }
}

proptest! {
    #[test]
    fn enumerated_layouts_validate(mi in 0usize..10) {
        let m = &catalog().models[mi % catalog().models.len()];
        for l in enumerate(m) {
            prop_assert_eq!(validate(m, &l), Ok(()));
        }
    }

    #[test]
    fn every_valid_random_layout_extends_to_an_enumerated_one(mi in 0usize..10, bits in any::<u32>()) {
        let m = &catalog().models[mi % catalog().models.len()];
        let cands = candidates(m);
        let l: Vec<Placed> = (0..cands.len()).filter(|i| bits & (1 << i) != 0).map(|i| cands[i].clone()).collect();
        if validate(m, &l).is_ok() {
            let covered = enumerate(m).iter().any(|e| l.iter().all(|p| e.contains(p)));
            prop_assert!(covered, "{:?} is in no maximal layout", l);
        }
    }
}

#[test]
fn unplaced_layouts_are_placed_by_search_not_in_the_order_written() {
    // Greedy largest-first puts 3g at 0 and leaves one 2g no room; 2g@0,2g@2,3g@4 is valid.
    for (m, text, want) in [
        ("H100-80GB", "3g.40gb,2g.20gb,2g.20gb", [("2g.20gb", 0, 2), ("2g.20gb", 2, 2), ("3g.40gb", 4, 4)]),
        ("H100-80GB", "2g.20gb,2g.20gb,3g.40gb", [("2g.20gb", 0, 2), ("2g.20gb", 2, 2), ("3g.40gb", 4, 4)]),
        ("H200", "3g.71gb,2g.35gb,2g.35gb", [("2g.35gb", 0, 2), ("2g.35gb", 2, 2), ("3g.71gb", 4, 4)]),
    ] {
        let want: Vec<Placed> = want.iter().map(|&(p, s, n)| placed(p, s, n)).collect();
        assert_eq!(spec(m, text), want, "{m} {text}");
    }
    // Placed instances stay where they are written; the rest are searched around them.
    assert_eq!(
        spec("A100-80GB", "2g.20gb@2,3g.40gb,2g.20gb"),
        vec![placed("2g.20gb", 0, 2), placed("2g.20gb", 2, 2), placed("3g.40gb", 4, 4)]
    );
}

#[test]
fn impossible_unplaced_layouts_name_the_rule_they_break() {
    let h100 = model("H100-80GB");
    let err = parse_layout(h100, "4g.40gb,3g.40gb,1g.10gb");
    assert!(matches!(err, Err(LayoutError::NoRoom { .. })), "{err:?}");
    let err = parse_layout(h100, "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb");
    assert!(matches!(err, Err(LayoutError::TooMany { index: 7, .. })), "{err:?}");
    let err = parse_layout(model("A30"), "1g.6gb+me,2g.12gb+me");
    assert!(matches!(err, Err(LayoutError::SecondMediaExtension { index: 1, other: 0, .. })), "{err:?}");
}

/// Every valid layout of a model (maximal or not, `+me` profiles included) as a sorted list of
/// profile names: the reference that an unplaced layout is judged by, found with `validate`
/// alone.
fn valid_multisets(m: &'static GpuModel) -> &'static BTreeSet<Vec<String>> {
    use std::sync::{Mutex, OnceLock};
    type Memo = Mutex<Vec<(&'static str, &'static BTreeSet<Vec<String>>)>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let mut memo =
        MEMO.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, s)) = memo.iter().find(|(n, _)| *n == m.name) {
        return s;
    }
    let found: &'static BTreeSet<Vec<String>> = Box::leak(Box::new(walk_valid(m)));
    memo.push((m.name.as_str(), found));
    found
}

fn walk_valid(m: &GpuModel) -> BTreeSet<Vec<String>> {
    let cands: Vec<Placed> =
        m.profiles.iter().flat_map(|p| p.placements.iter().map(|pl| placed(&p.name, pl.start, pl.size))).collect();
    fn walk(m: &GpuModel, cands: &[Placed], from: usize, chosen: &mut Vec<Placed>, out: &mut BTreeSet<Vec<String>>) {
        for c in from..cands.len() {
            chosen.push(cands[c].clone());
            if validate(m, chosen).is_ok() {
                let mut names: Vec<String> = chosen.iter().map(|p| p.profile.clone()).collect();
                names.sort();
                out.insert(names);
                walk(m, cands, c + 1, chosen, out);
            }
            chosen.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(m, &cands, 0, &mut Vec::new(), &mut out);
    out
}

fn unplaced(layout: &[Placed], order: &[usize]) -> String {
    order.iter().map(|&i| layout[i].profile.as_str()).collect::<Vec<_>>().join(",")
}

fn sorted_names(layout: &[Placed]) -> Vec<String> {
    let mut v: Vec<String> = layout.iter().map(|p| p.profile.clone()).collect();
    v.sort();
    v
}

proptest! {
    /// Every maximal layout of every catalog model, written without placements in a shuffled
    /// order, is accepted and placed validly with the same instances.
    #[test]
    fn every_catalog_layout_unplaced_in_any_order_is_placed_validly(seed in any::<u64>()) {
        for m in &catalog().models {
            for (n, layout) in enumerate(m).iter().enumerate() {
                let mut order: Vec<usize> = (0..layout.len()).collect();
                // A permutation from the seed: Fisher-Yates on a simple LCG stream.
                let mut x = seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for i in (1..order.len()).rev() {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    order.swap(i, usize::try_from((x >> 33) % (i as u64 + 1)).unwrap_or(0));
                }
                let text = unplaced(layout, &order);
                let got = parse_layout(m, &text);
                let Ok(LayoutSpec::Mig(got)) = got else {
                    return Err(TestCaseError::fail(format!("{}: {text}: {got:?}", m.name)));
                };
                prop_assert_eq!(validate(m, &got), Ok(()), "{}: {}", m.name, text);
                prop_assert_eq!(sorted_names(&got), sorted_names(layout), "{}: {}", m.name, text);
            }
        }
    }

    /// Any list of profiles, unplaced: accepted exactly when some valid layout holds those
    /// instances, placed validly when accepted, refused with the rule it breaks when not.
    #[test]
    fn unplaced_layouts_are_accepted_exactly_when_some_placement_is_valid(
        mi in 0usize..16,
        picks in proptest::collection::vec(0usize..64, 1..9),
    ) {
        let m = &catalog().models[mi % catalog().models.len()];
        let names: Vec<&str> = picks.iter().map(|&i| m.profiles[i % m.profiles.len()].name.as_str()).collect();
        let text = names.join(",");
        let mut want: Vec<String> = names.iter().map(|s| (*s).to_string()).collect();
        want.sort();
        let possible = valid_multisets(m).contains(&want);
        match parse_layout(m, &text) {
            Ok(LayoutSpec::Mig(got)) => {
                prop_assert!(possible, "{}: {} accepted, but no valid layout holds it", m.name, text);
                prop_assert_eq!(validate(m, &got), Ok(()));
                prop_assert_eq!(sorted_names(&got), want);
            }
            Ok(LayoutSpec::Whole) => prop_assert!(false, "{text} read as whole"),
            Err(e) => {
                prop_assert!(!possible, "{}: {} refused ({}), but it is valid", m.name, text, e);
                let named = matches!(
                    e,
                    LayoutError::NoRoom { .. } | LayoutError::TooMany { .. } | LayoutError::SecondMediaExtension { .. }
                );
                prop_assert!(named, "{}: {} refused without a rule: {}", m.name, text, e);
            }
        }
    }
}
