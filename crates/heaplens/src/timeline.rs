//! `heaplens timeline`: bytes in use over time by call site (see `heaplens-map`).

use std::io::{BufWriter, Write};

use anyhow::Context;
use heaplens_interpret::names::for_terminal;
use heaplens_map::{timeline_file, MapOptions};

use crate::picture::{is_svg, options, write_to};
use crate::TimelineArgs;

/// Runs `heaplens timeline`; like `heaplens map`, a failed picture leaves no file behind.
pub fn execute(a: &TimelineArgs) -> anyhow::Result<()> {
    let opts = MapOptions {
        width: a.width as usize,
        height: a.height as usize,
        split_min_bytes: a.split_min_bytes.unwrap_or(heaplens_interpret::split::MIN_BYTES),
        ..options(&a.sites, &a.time, None)?
    };
    let t = write_to(&a.output, &a.trace, &a.sites, |file| {
        let t = timeline_file(&a.trace, &opts)?;
        let mut out = BufWriter::new(file);
        let r = if is_svg(&a.output) { t.scene.write_svg(&mut out) } else { t.scene.write_png(&mut out) };
        r.and_then(|()| out.flush()).with_context(|| format!("cannot write {}", a.output.display()))?;
        Ok(t)
    })?;
    for d in &t.damage {
        eprintln!("heaplens: warning: {}: damaged trace, drawn as far as it reads: {d}", a.trace.display());
    }
    let (x, y, w, h) = t.area;
    eprintln!(
        "heaplens: wrote {} (the chart: x={x} y={y} w={w} h={h} pixels of the picture); peak {} bytes in use {} after the first event, held by:",
        a.output.display(),
        t.peak.0,
        heaplens_map::units::human_ns(t.peak.1)
    );
    for (site, bytes) in t.at_peak.iter().filter(|(_, b)| *b > 0) {
        eprintln!("heaplens:   {bytes:>12}  {}", for_terminal(site.as_deref().unwrap_or("the rest")));
    }
    Ok(())
}
