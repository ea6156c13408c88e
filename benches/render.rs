//! Render cost of the fleet view, and bytes written to the terminal per refresh.

use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::{CrosstermBackend, TestBackend};
use tessera::model::SourceKind;
use tessera::sources::SourceUpdate;
use tessera::sources::sim::{Sim, SimConfig};
use tessera::store::Store;
use tessera::ui::state::UiState;
use tessera::ui::theme::{Depth, Theme};

fn setup(size: Option<(u32, u32)>) -> (Sim, Store, UiState) {
    let t = Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).single().unwrap_or_default();
    let mut sim = Sim::new(SimConfig { size, ..SimConfig::new(42, t) });
    let mut store = Store::new();
    store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    store.apply(
        SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at: t, result: Ok(sim.snapshot()) },
        t,
    );
    let mut st = UiState::new(false, false, Duration::from_secs(1800), t);
    st.screen.body = tessera::ui::viewport(ratatui::layout::Rect::new(0, 0, 160, 48));
    st.on_fleet(store.fleet());
    (sim, store, st)
}

fn frame(c: &mut Criterion) {
    let theme = Theme::load(None, Depth::TrueColor, false).unwrap_or_else(|e| panic!("{e}"));
    for (name, size) in [
        ("fleet_frame_160x48_32_cards", None),
        ("fleet_frame_160x48_4096_cards", Some((512, 8))),
        ("fleet_frame_160x48_32768_cards", Some((4096, 8))),
    ] {
        let (_, store, st) = setup(size);
        let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap_or_else(|e| panic!("{e}"));
        c.bench_function(name, |b| {
            b.iter(|| {
                term.draw(|f| tessera::ui::draw(f, black_box(&st), store.fleet(), &theme, true))
                    .map(|_| ())
                    .unwrap_or(());
            })
        });
    }
    for (name, size) in [("filter_and_sort_4096_cards", (512, 8)), ("filter_and_sort_32768_cards", (4096, 8))] {
        let (_, store, mut st) = setup(Some(size));
        c.bench_function(name, |b| {
            b.iter(|| {
                st.set_filter("h100 util>50".into(), store.fleet());
                st.apply(tessera::ui::keymap::Intent::Sort, store.fleet());
            })
        });
    }
}

/// Counts what a crossterm backend would write to the terminal.
#[derive(Default, Clone)]
struct Count(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Count {
    fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Steady state: one simulated second per refresh, as the default console runs.
fn bytes_per_refresh() {
    let theme = Theme::load(None, Depth::TrueColor, false).unwrap_or_else(|e| panic!("{e}"));
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let (mut sim, mut store, mut st) = setup(None);
        st.screen.body = tessera::ui::viewport(ratatui::layout::Rect::new(0, 0, w, h));
        let count = Count::default();
        let backend = CrosstermBackend::new(count.clone());
        let mut term = Terminal::with_options(
            backend,
            ratatui::TerminalOptions { viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, w, h)) },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut samples = Vec::new();
        for i in 0..62 {
            sim.advance(Duration::from_secs(1));
            let at = sim.now();
            store.apply(
                SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at, result: Ok(sim.snapshot()) },
                at,
            );
            st.on_fleet(store.fleet());
            let before = count.get();
            term.draw(|f| tessera::ui::draw(f, &st, store.fleet(), &theme, true)).map(|_| ()).unwrap_or(());
            if i >= 2 {
                samples.push(count.get() - before);
            }
        }
        samples.sort_unstable();
        let mean = samples.iter().sum::<usize>() / samples.len();
        eprintln!(
            "bytes per refresh at {w}x{h} (60 refreshes, 1 simulated s each): median {} mean {mean} max {}",
            samples[samples.len() / 2],
            samples[samples.len() - 1]
        );
    }
}

fn benches(c: &mut Criterion) {
    bytes_per_refresh();
    frame(c);
}

criterion_group!(render, benches);
criterion_main!(render);
