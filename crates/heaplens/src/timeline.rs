//! `heaplens timeline`: bytes in use over time by call site (see `heaplens-map`).

use std::io::{self, BufWriter, IsTerminal, Write};

use anyhow::Context;
use heaplens_map::{timeline_file, MapOptions, Window};

use crate::TimelineArgs;

/// Runs `heaplens timeline`; like `heaplens map`, the output is opened first and removed when
/// the picture cannot be made.
pub fn execute(a: &TimelineArgs) -> anyhow::Result<()> {
    let svg = a.output.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    let file = std::fs::File::create(&a.output).with_context(|| format!("cannot write {}", a.output.display()))?;
    let opts = MapOptions {
        width: a.width as usize,
        height: a.height as usize,
        top: a.top as usize,
        depth: a.depth as usize,
        window: Window { from_ns: a.from, to_ns: a.to, addresses: None },
        progress: io::stderr().is_terminal(),
        ..MapOptions::default()
    };
    let written = timeline_file(&a.trace, &opts).map_err(anyhow::Error::from).and_then(|t| {
        let mut out = BufWriter::new(file);
        let r = if svg { t.scene.write_svg(&mut out) } else { t.scene.write_png(&mut out) };
        r.and_then(|()| out.flush()).with_context(|| format!("cannot write {}", a.output.display()))?;
        Ok(t)
    });
    let t = match written {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_file(&a.output);
            return Err(e);
        }
    };
    for d in &t.damage {
        eprintln!("heaplens: warning: {}: damaged trace, drawn as far as it reads: {d}", a.trace.display());
    }
    let (x, y, w, h) = t.area;
    eprintln!(
        "heaplens: wrote {} (chart at x={x} y={y} w={w} h={h}); peak {} bytes in use at {} ns, held by:",
        a.output.display(),
        t.peak.0,
        t.peak.1
    );
    for (site, bytes) in t.at_peak.iter().filter(|(_, b)| *b > 0) {
        eprintln!("heaplens:   {bytes:>12}  {}", site.as_deref().unwrap_or("the rest"));
    }
    Ok(())
}
