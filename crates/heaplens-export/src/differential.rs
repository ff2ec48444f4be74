//! The change between two runs as folded stacks and as a differential flame graph
//! (`heaplens export NEW --base BASE`): Brendan Gregg's differential format, `stack base new`
//! per line (what `difffolded.pl` and inferno's `inferno-diff-folded` write), which
//! flamegraph.pl and inferno draw with the new run's widths, grown frames red and shrunk ones
//! blue. Stacks match by their frames' names, never by address, so two builds compare.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use heaplens_interpret::names::for_xml;

use crate::collapsed::title;
use crate::prune::{cut, prune, MAX_FRAMES};
use crate::Metric;

/// Joins the folded lines of the base run and the new one: `(stack, base, new)` per stack
/// either run has, sorted by stack.
pub fn join(base: &[(String, u64)], new: &[(String, u64)]) -> Vec<(String, u64, u64)> {
    let mut both: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (s, n) in base {
        both.entry(s).or_default().0 += n;
    }
    for (s, n) in new {
        both.entry(s).or_default().1 += n;
    }
    both.into_iter().map(|(s, (a, b))| (s.to_string(), a, b)).collect()
}

/// Writes the joined lines as differential folded stacks.
pub fn write(w: &mut dyn Write, lines: &[(String, u64, u64)]) -> io::Result<()> {
    for (stack, a, b) in lines {
        writeln!(w, "{stack} {a} {b}")?;
    }
    Ok(())
}

/// Draws the joined lines as a differential flame graph (widths from the new run; red where a
/// frame grew, blue where it shrank); `icicle` draws it top down. Where the new run has
/// nothing of the metric (all of it removed), the widths are the base's, all blue, as
/// flamegraph.pl's `--negate` draws what went away.
pub fn flamegraph(
    w: &mut dyn Write,
    lines: &[(String, u64, u64)],
    metric: Metric,
    (base, new): (&Path, &Path),
    icicle: bool,
) -> io::Result<()> {
    // Widths come from the new run. A stack is cut only where frames are left out that inferno
    // would have drawn: inferno colours the innermost frame of a line by the line's change, so
    // a cut line colours its new innermost frame by the change of all it stands for.
    let from_base = lines.iter().all(|(_, _, b)| *b == 0);
    let width = |a: u64, b: u64| if from_base { a } else { b };
    let pruned = prune(&lines.iter().map(|(s, a, b)| (s.as_str(), width(*a, *b))).collect::<Vec<_>>(), MAX_FRAMES);
    let pairs: Vec<(String, (u64, u64))> = lines.iter().map(|(s, a, b)| (s.clone(), (*a, *b))).collect();
    let pairs = if pruned.raised() {
        cut(&pairs, &pruned.keep, true, |x, y| *x = (x.0.saturating_add(y.0), x.1.saturating_add(y.1)))
    } else {
        pairs
    };
    // inferno takes widths from the second count: with the base's, the change is negated back.
    let text: Vec<String> = pairs
        .iter()
        .map(
            |(s, (a, b))| if from_base { format!("{} {b} {a}", for_xml(s)) } else { format!("{} {a} {b}", for_xml(s)) },
        )
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.min_width = pruned.min_width_pct;
    opts.title = format!("{}: change by allocation stack (red grew, blue shrank)", title(metric));
    let mut subtitle = format!("{} (base) to {}", base.display(), new.display());
    if from_base {
        subtitle += &format!(": the new run has no {}; widths are the base's", metric.unit());
        opts.negate_differentials = true;
    }
    opts.subtitle = Some(crate::collapsed::subtitle(&subtitle, &pruned));
    opts.count_name = metric.unit().into();
    opts.name_type = "Function:".into();
    if icicle {
        opts.direction = inferno::flamegraph::Direction::Inverted;
    }
    if lines.iter().all(|(_, a, b)| *a == 0 && *b == 0) {
        let subtitle = opts.subtitle.as_deref().unwrap_or("");
        return crate::collapsed::empty_svg(w, &opts.title, subtitle, metric.unit());
    }
    inferno::flamegraph::from_lines(&mut opts, text.iter().map(String::as_str), w).map_err(io::Error::other)
}
