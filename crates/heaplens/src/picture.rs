//! What `map`, `timeline` and `view` share: the options their call sites and window give, and
//! writing their output so that nothing half-made is left behind.

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use heaplens_map::{MapOptions, Window};

use crate::{SiteArgs, TimeWindowArgs};

/// The picture options the shared arguments set; the rest are the defaults.
pub fn options(sites: &SiteArgs, time: &TimeWindowArgs, addresses: Option<(u64, u64)>) -> MapOptions {
    MapOptions {
        top: sites.top as usize,
        depth: sites.depth as usize,
        window: Window { from_ns: time.from, to_ns: time.to, addresses },
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        ..MapOptions::default()
    }
}

/// Opens `output` first, so an unwritable path fails before the trace is read, then lets
/// `make` write into it; when `make` fails, the file is removed.
pub fn write_to<T>(output: &Path, make: impl FnOnce(File) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let file = File::create(output).with_context(|| format!("cannot write {}", output.display()))?;
    make(file).inspect_err(|_| {
        let _ = std::fs::remove_file(output);
    })
}

/// Whether `output` asks for SVG (by its extension) rather than PNG.
pub fn is_svg(output: &Path) -> bool {
    output.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"))
}
