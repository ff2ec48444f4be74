//! Folded stacks (Brendan Gregg's `stackcollapse` output: `outer;...;inner count`, one line per
//! stack) and the flame graph drawn from them with inferno: of allocation stacks weighted by a
//! [`Metric`], or of CPU-sample stacks weighted by samples. Frames are escaped for the line
//! ([`frame`]), which also keeps inferno's SVG well-formed: its XML writer escapes markup but
//! passes control characters through.

use std::io::{self, Write};
use std::path::Path;

use heaplens_interpret::elide::Unambiguous;
use heaplens_interpret::load::StackTable;
use heaplens_interpret::names::{for_line, for_xml};
use heaplens_interpret::paths::{resolve_named, resolve_samples, FrameTable, Naming, Paths};
use heaplens_interpret::symbolize::{for_trace, Symbolizer};
use heaplens_interpret::Trace;

use crate::prune::{cut, prune, Pruned, MAX_FRAMES};
use crate::totals::StackTotals;
use crate::Metric;

/// The folded line of every stack whose metric is not 0 (stacks whose functions are the same
/// merged), functions named as `naming` says (without `full_names`, generic arguments elided
/// where no two functions of the graph then read alike: see [`fold`]), with the symbolizer's
/// warnings.
pub fn lines(
    path: &Path,
    t: &Trace,
    stacks: &[(u32, StackTotals)],
    metric: Metric,
    progress: bool,
    naming: Naming,
) -> (Vec<(String, u64)>, Vec<String>) {
    let kept: Vec<(u32, u64)> = stacks.iter().map(|(id, s)| (*id, metric.of(s))).filter(|&(_, n)| n > 0).collect();
    let whole = Naming { full_names: true, ..naming };
    fold(path, t, &kept, !naming.full_names, |st, ids, sym| resolve_named(st, ids, sym, progress, whole))
}

/// The folded line of every CPU-sample stack of `by_stack` (`(stack id, samples)`), weighted by
/// its samples: paths as [`resolve_samples`] gives them (the interrupted function innermost,
/// allocator frames kept), with the symbolizer's warnings.
pub fn sample_lines(
    path: &Path,
    t: &Trace,
    by_stack: &[(u32, u64)],
    progress: bool,
) -> (Vec<(String, u64)>, Vec<String>) {
    let kept: Vec<(u32, u64)> = by_stack.iter().copied().filter(|&(_, n)| n > 0).collect();
    let whole = Naming { full_names: true, ..Naming::default() };
    fold(path, t, &kept, true, |st, ids, sym| resolve_samples(st, ids, sym, progress, whole))
}

/// Folds `kept` (`(stack id, weight)`), its paths from `resolve` with whole names. With
/// `elide`, a name's template and generic arguments are elided
/// ([`heaplens_interpret::elide::elide_generics`]) unless another function of the graph
/// elides to the same name: `fill<int>` and `fill<long>` are two frames, not one `fill‹…>` of
/// their summed weight.
fn fold(
    path: &Path,
    t: &Trace,
    kept: &[(u32, u64)],
    elide: bool,
    resolve: impl FnOnce(&StackTable, &[u32], &mut dyn Symbolizer) -> (FrameTable, Paths),
) -> (Vec<(String, u64)>, Vec<String>) {
    let ids: Vec<u32> = kept.iter().map(|&(id, _)| id).collect();
    let (mut sym, damaged) = for_trace(path, t);
    let (frames, paths) = resolve(&t.stacks, &ids, sym.as_mut());
    let shown = shown_names(&frames, &paths, kept.len(), elide);
    let mut folded: std::collections::BTreeMap<String, u64> = Default::default();
    for (i, &(_, n)) in kept.iter().enumerate() {
        let names: Vec<String> =
            paths.get(i).iter().rev().map(|&site| frame(&shown[frames.function_of(site) as usize])).collect();
        let line = if names.is_empty() { "[unknown]".to_string() } else { names.join(";") };
        *folded.entry(line).or_default() += n;
    }
    let mut warnings = sym.warnings();
    if damaged {
        warnings.insert(0, "the symbols embedded in the trace are damaged: symbolized from the module files".into());
    }
    (folded.into_iter().collect(), warnings)
}

/// Each function's name as the graph shows it, by function id: elided where that is
/// unambiguous among the functions the first `n` paths hold, when `elide`.
fn shown_names(frames: &FrameTable, paths: &Paths, n: usize, elide: bool) -> Vec<String> {
    let whole = (0..frames.functions_len() as u32).map(|f| frames.name(f));
    if !elide {
        return whole.map(str::to_string).collect();
    }
    let used = (0..n).flat_map(|i| paths.get(i).iter().map(|&site| frames.name(frames.function_of(site))));
    let names = Unambiguous::of(used);
    whole.map(|name| names.show(name).into_owned()).collect()
}

/// A function's name as a folded frame. A line is `frame;...;frame count`: a line end in the
/// name would split the stack, a `;` (an operator's) a frame, and a space followed by a
/// number at the end of the innermost frame would read as a second count (flamegraph.pl's and
/// inferno's differential input), so such a space is written `\x20`.
pub fn frame(name: &str) -> String {
    let name = for_line(name).replace(';', ":");
    match name.rsplit_once(' ') {
        Some((head, tail)) if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit() || c == '.') => {
            format!("{head}\\x20{tail}")
        }
        _ => name,
    }
}

/// Writes `lines` as folded stacks.
pub fn write(w: &mut dyn Write, lines: &[(String, u64)]) -> io::Result<()> {
    for (stack, n) in lines {
        writeln!(w, "{stack} {n}")?;
    }
    Ok(())
}

/// Draws `lines` as an SVG flame graph titled after the trace; `icicle` draws it top down.
pub fn flamegraph(
    w: &mut dyn Write,
    lines: &[(String, u64)],
    metric: Metric,
    trace: &Path,
    icicle: bool,
) -> io::Result<()> {
    // inferno gets only the frames it draws, at most `MAX_FRAMES`.
    let pruned = prune(&lines.iter().map(|(s, n)| (s.as_str(), *n)).collect::<Vec<_>>(), MAX_FRAMES);
    let lines = cut(lines, &pruned.keep, pruned.raised(), |a, b| *a = a.saturating_add(b));
    // Frames were escaped for a line; an SVG shown to a person also escapes what reorders it.
    let text: Vec<String> = lines.iter().map(|(s, n)| format!("{} {n}", for_xml(s))).collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.min_width = pruned.min_width_pct;
    opts.title = match metric {
        Metric::CpuSamples => title(metric).to_string(),
        _ => format!("{} by allocation stack", title(metric)),
    };
    opts.subtitle = Some(subtitle(&trace.display().to_string(), &pruned));
    opts.count_name = metric.unit().into();
    opts.name_type = "Function:".into();
    if icicle {
        opts.direction = inferno::flamegraph::Direction::Inverted;
    }
    if text.iter().all(|l| l.ends_with(" 0")) {
        return empty_svg(w, &opts.title, opts.subtitle.as_deref().unwrap_or(""), metric.unit());
    }
    inferno::flamegraph::from_lines(&mut opts, text.iter().map(String::as_str), w).map_err(io::Error::other)
}

/// The graph's subtitle, escaped for XML: `what` it shows, and where frames were left out that
/// inferno would have drawn, how narrow they were.
pub(crate) fn subtitle(what: &str, pruned: &Pruned) -> String {
    let mut s = for_xml(what).into_owned();
    if pruned.raised() {
        s += &format!(
            " (frames narrower than {:.3}% of the total left out: at most {MAX_FRAMES} are drawn)",
            pruned.min_width_pct
        );
    }
    s
}

/// The picture of nothing (inferno refuses to draw no stacks): the title, and a line saying
/// there is nothing to draw, as a leak-free program's leak graph must be. `title` and
/// `subtitle` are escaped for XML already.
pub(crate) fn empty_svg(w: &mut dyn Write, title: &str, subtitle: &str, unit: &str) -> io::Result<()> {
    writeln!(w, r#"<?xml version="1.0" standalone="no"?>"#)?;
    writeln!(w, r#"<svg version="1.1" width="1200" height="90" xmlns="http://www.w3.org/2000/svg">"#)?;
    writeln!(w, r##"<rect x="0" y="0" width="1200" height="90" fill="#eeeeee"/>"##)?;
    let text = |w: &mut dyn Write, y: u32, size: u32, s: &str| {
        writeln!(w, r#"<text x="600" y="{y}" font-family="Verdana" font-size="{size}" text-anchor="middle">{s}</text>"#)
    };
    text(w, 24, 17, title)?;
    text(w, 46, 12, subtitle)?;
    text(w, 72, 12, &format!("nothing to draw: no stack has any {unit}"))?;
    writeln!(w, "</svg>")
}

pub(crate) fn title(metric: Metric) -> &'static str {
    match metric {
        Metric::AllocBytes => "Bytes allocated",
        Metric::AllocCount => "Allocations",
        Metric::InuseBytes => "Bytes in use at the peak",
        Metric::LeakedBytes => "Bytes leaked",
        Metric::LeakedCount => "Blocks leaked",
        Metric::CpuSamples => "CPU samples",
    }
}

#[cfg(test)]
mod tests {
    use super::frame;

    #[test]
    fn a_frame_never_splits_its_line_or_its_stack() {
        assert_eq!(frame("a\nb;c 7"), "a\\nb:c\\x207");
        assert_eq!(frame("f 1.5"), "f\\x201.5");
        assert_eq!(frame("operator new(unsigned long)"), "operator new(unsigned long)");
        assert_eq!(frame("std::vector<int>::push_back(int const&)"), "std::vector<int>::push_back(int const&)");
        assert_eq!(frame("ctl\x01\x1b[31m\x07name"), "ctl\\x01\\x1b[31m\\x07name");
        assert_eq!(frame("trailing "), "trailing ");
    }
}
