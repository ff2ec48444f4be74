//! Drawing a [`Screen`] with ratatui: on the terminal, or into a buffer printed as text.

use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table};
use ratatui::{Frame, Terminal};

use heaplens_interpret::units::human_bytes;

use crate::screen::{Screen, SiteRow};

/// `ns` as `12.3 s`.
fn seconds(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// The keys, as the footer lists them.
pub const KEYS: &str = "q: quit   s: sort the call sites (in use now, per second, in all)";

/// Draws `s` on the whole frame.
pub fn draw(f: &mut Frame, s: &Screen) {
    let [head, graph, middle, bottom, foot] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(7),
        Constraint::Min(6),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(f.area());
    header(f, head, s);
    let width = graph.width.saturating_sub(2) as usize;
    // The last steps, as many as fit.
    let series = &s.series[s.series.len().saturating_sub(width)..];
    let peak_shown = series.iter().copied().max().unwrap_or(0);
    f.render_widget(
        Sparkline::default()
            .block(Block::default().borders(Borders::ALL).title(format!(
                " bytes in use, one column per 100 ms (top of the graph: {}) ",
                human_bytes(peak_shown)
            )))
            .data(series),
        graph,
    );
    call_sites(f, middle, s);
    let [left, right] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom);
    let title = format!(" old blocks (live over {}): leak candidates ", seconds(s.old_after_ns));
    old_sites(f, left, &title, &s.old);
    threads(f, right, s);
    f.render_widget(Paragraph::new(KEYS), foot);
}

fn header(f: &mut Frame, area: Rect, s: &Screen) {
    let how = match (s.attached, s.sealed, s.writer_gone) {
        (_, false, true) => {
            "recording cut short (nothing writes the trace: the program was killed, or the file is cut)"
        }
        (true, false, _) => "attached, recording",
        (true, true, _) => "attached, recording stopped",
        (false, false, _) => "recording",
        (false, true, _) => "recording ended",
    };
    let mut lines = vec![
        Line::from(format!("heaplens live  {}  {how}, {} recorded", s.program, seconds(s.recorded_ns)))
            .style(Style::default().add_modifier(Modifier::BOLD)),
        Line::from(format!(
            "in use {} in {} blocks   peak {}   allocs {} ({}/s)   frees of older blocks {}",
            human_bytes(s.in_use),
            s.blocks,
            human_bytes(s.peak),
            s.allocations,
            s.allocations_per_s,
            s.unmatched
        )),
    ];
    lines.push(Line::from(match &s.note {
        Some(n) => n.clone(),
        None => format!("call sites sorted by {}", s.sort.label()),
    }));
    f.render_widget(Paragraph::new(lines), area);
}

/// The call sites, in the screen's order: bytes and blocks held now, bytes and allocations per
/// second, bytes allocated in all.
fn call_sites(f: &mut Frame, area: Rect, s: &Screen) {
    let head = ["in use", "blocks", "bytes/s", "allocs/s", "allocated", "site"];
    let body = s.sites.iter().map(|r| {
        Row::new(vec![
            human_bytes(r.bytes),
            r.blocks.to_string(),
            human_bytes(r.rate),
            r.allocs_rate.to_string(),
            human_bytes(r.total),
            r.site.clone(),
        ])
    });
    let widths = [
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    let title = format!(" call sites, by {} ", s.sort.label());
    table(f, area, &title, &head, body, &widths);
}

fn old_sites(f: &mut Frame, area: Rect, title: &str, rows: &[SiteRow]) {
    let body = rows
        .iter()
        .map(|r| Row::new(vec![human_bytes(r.bytes), r.blocks.to_string(), seconds(r.age_ns), r.site.clone()]));
    let widths = [Constraint::Length(10), Constraint::Length(9), Constraint::Length(8), Constraint::Min(10)];
    table(f, area, title, &["bytes", "blocks", "oldest", "site"], body, &widths);
}

/// A bordered table with a bold header row.
fn table<'a>(
    f: &mut Frame,
    area: Rect,
    title: &str,
    head: &[&'a str],
    body: impl Iterator<Item = Row<'a>>,
    widths: &[Constraint],
) {
    f.render_widget(
        Table::new(body, widths.to_vec())
            .header(Row::new(head.to_vec()).style(Style::default().add_modifier(Modifier::BOLD)))
            .block(Block::default().borders(Borders::ALL).title(title.to_string())),
        area,
    );
}

fn threads(f: &mut Frame, area: Rect, s: &Screen) {
    let body = s.threads.iter().map(|t| {
        Row::new(vec![t.tid.to_string(), t.name.clone(), t.allocations.to_string(), human_bytes(t.live_bytes)])
    });
    let widths = [Constraint::Length(8), Constraint::Length(16), Constraint::Length(10), Constraint::Min(9)];
    table(f, area, " threads ", &["tid", "name", "allocs", "in use"], body, &widths);
}

/// `s` drawn on a `width` x `height` screen, as text: one line per row, trailing blanks cut.
pub fn to_text(s: &Screen, width: u16, height: u16) -> String {
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height)) else { return String::new() };
    if terminal.draw(|f| draw(f, s)).is_err() {
        return String::new();
    }
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        let mut line = String::new();
        for x in 0..width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_prints_as_text() {
        let s = Screen {
            program: "./widgets (pid 42)".into(),
            in_use: 3 << 20,
            blocks: 12,
            series: vec![1, 5, 9],
            sites: vec![SiteRow { site: "make_widget".into(), bytes: 3 << 20, blocks: 12, ..SiteRow::default() }],
            old_after_ns: 10_000_000_000,
            ..Screen::default()
        };
        let text = to_text(&s, 110, 40);
        assert_eq!(text.lines().count(), 40);
        assert!(text.contains("heaplens live  ./widgets (pid 42)"), "{text}");
        assert!(text.contains("in use 3.0 MiB in 12 blocks"), "{text}");
        assert!(text.contains("call sites sorted by bytes in use now"), "{text}");
        assert!(text.contains(KEYS), "{text}");
        let row = text.lines().find(|l| l.contains("make_widget")).unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("3.0 MiB") && row.contains("12"), "{row}");
        assert_eq!(human_bytes(1023), "1023 B");
    }
}
