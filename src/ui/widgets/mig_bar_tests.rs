//! MIG bar tests: every layout of every model, tiny widths, stranded and free slices.

use super::*;
use crate::model::MigInstance;
use crate::model::mig::Placed;
use crate::model::mig::catalog::catalog;
use crate::model::mig::enumerate;

fn text(line: &Line) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

fn card(model: &str, layout: &[Placed]) -> Card {
    let mut c = Card { model: model.into(), ..Card::default() };
    c.mig.enabled = true;
    c.mig.instances = layout
        .iter()
        .enumerate()
        .map(|(i, p)| MigInstance {
            gi_id: i as u32 + 1,
            profile: p.profile.clone(),
            start: p.start,
            size: p.size,
            ..MigInstance::default()
        })
        .collect();
    c
}

fn none(_: &str) -> Option<String> {
    None
}

#[test]
fn every_layout_family_of_every_model_fits_its_width() {
    for ascii in [false, true] {
        let theme = Theme { ascii, ..Theme::default_theme() };
        for m in &catalog().models {
            let name = m.aliases.first().cloned().unwrap_or_else(|| m.name.clone());
            for layout in enumerate(m) {
                let c = card(&name, &layout);
                for w in [0u16, 1, 2, 7, 8, 16, 24, 40, 63] {
                    let line = mig_bar(&c, w, &theme, &none);
                    assert_eq!(line.width(), usize::from(w), "{} {layout:?} at {w}", m.name);
                }
                // At one cell per slice or more, every instance starts with a separator.
                let w = u16::from(m.memory_slices) * 3;
                let t = text(&mig_bar(&c, w, &theme, &none));
                let sep = if ascii { '|' } else { '▏' };
                // (In ASCII a separator also ends an instance before free or stranded marks.)
                let next: Vec<char> = t.chars().skip(1).chain([' ']).collect();
                let starts = t.chars().zip(next).filter(|&(ch, n)| ch == sep && !(ascii && matches!(n, 'x' | '.')));
                assert_eq!(starts.count(), layout.len(), "{} {t}", m.name);
            }
        }
    }
}

#[test]
fn stranded_slice_is_marked_under_seven_small_instances() {
    let theme = Theme::default_theme();
    let layout: Vec<Placed> = (0..7).map(|s| Placed { profile: "1g.10gb".into(), start: s, size: 1 }).collect();
    let t = text(&mig_bar(&card("NVIDIA A100-SXM4-80GB", &layout), 16, &theme, &none));
    assert!(t.ends_with("╳╳"), "{t}");
    let half = vec![Placed { profile: "3g.40gb".into(), start: 0, size: 4 }];
    let t = text(&mig_bar(&card("NVIDIA A100-SXM4-80GB", &half), 16, &theme, &none));
    assert!(t.ends_with("░░░░░░░░"), "{t}");
    assert!(t.starts_with("▏3g.40gb░"), "{t}");
    let t = text(&mig_bar(&card("NVIDIA A100-SXM4-80GB", &half), 32, &theme, &none));
    assert!(t.starts_with("▏3g.40gb free"), "{t}");
}

#[test]
fn labels_name_the_holder_where_room_allows() {
    let theme = Theme::default_theme();
    let mut c = card("NVIDIA A100-SXM4-80GB", &[Placed { profile: "3g.40gb".into(), start: 0, size: 4 }]);
    c.mig.instances[0].workloads = vec!["sim:1".into()];
    c.mig.instances[0].utilization_pct = Some(80.0);
    let name = |_: &str| Some("chat-svc".to_string());
    let t = text(&mig_bar(&c, 48, &theme, &name));
    assert!(t.starts_with("▏3g.40gb chat-svc"), "{t}");
    let t = text(&mig_bar(&c, 16, &theme, &name));
    assert!(t.starts_with("▏3g.40gb"), "{t}");
}

#[test]
fn whole_cards_show_utilisation_or_na() {
    let theme = Theme::default_theme();
    let mut c = Card { model: "NVIDIA H100 80GB HBM3".into(), utilization_pct: Some(50.0), ..Card::default() };
    let line = mig_bar(&c, 20, &theme, &none);
    assert!(text(&line).starts_with("whole 50%"));
    let filled: usize = line.spans.iter().filter(|s| s.style.bg.is_some()).map(|s| s.content.chars().count()).sum();
    assert_eq!(filled, 10);
    c.utilization_pct = None;
    assert!(text(&mig_bar(&c, 20, &theme, &none)).starts_with("util N/A"));
    assert_eq!(mig_bar(&c, 1, &theme, &none).width(), 1);
}

#[test]
fn a_reading_just_below_zero_is_never_minus_zero() {
    let theme = Theme::default_theme();
    let mut c = Card { model: "NVIDIA L4".into(), utilization_pct: Some(-0.6), ..Card::default() };
    assert!(text(&mig_bar(&c, 30, &theme, &none)).starts_with("whole 0%"), "{}", text(&mig_bar(&c, 30, &theme, &none)));
    c.sharing.mode = Some(crate::model::SharingMode::TimeSliced);
    c.sharing.replicas = Some(4);
    c.sharing.contexts = Some(0);
    let t = text(&mig_bar(&c, 30, &theme, &none));
    assert!(t.contains("ctx 0 0%") && !t.contains("-0"), "{t}");
}

#[test]
fn unknown_models_still_draw() {
    let theme = Theme::default_theme();
    let layout = vec![Placed { profile: "2g.24gb".into(), start: 0, size: 2 }];
    let c = card("Mystery Accelerator 9000", &layout);
    for w in [0u16, 1, 5, 30] {
        assert_eq!(mig_bar(&c, w, &theme, &none).width(), usize::from(w));
    }
}
