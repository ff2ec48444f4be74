//! What `map`, `timeline` and `view` share: the options their call sites and window give, and
//! writing their output so that nothing half-made is left behind and the trace is never written
//! over.

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use heaplens_map::{MapOptions, Window};

use crate::{SiteArgs, TimeWindowArgs};

/// The picture options the shared arguments set; the rest are the defaults.
///
/// # Errors
/// A `--skip-file` that cannot be read or holds a line that is no regular expression.
pub fn options(sites: &SiteArgs, time: &TimeWindowArgs, addresses: Option<(u64, u64)>) -> anyhow::Result<MapOptions> {
    Ok(MapOptions {
        top: sites.top as usize,
        depth: sites.depth as usize,
        skip: sites.skip.patterns()?,
        window: Window { from_ns: time.from, to_ns: time.to, addresses },
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        ..MapOptions::default()
    })
}

/// Opens `output` first, so an unwritable path (or one that is the `input` trace or the
/// `--skip-file` of `sites`) fails before the trace is read, then lets `make` write into it.
/// The output appears whole when `make` succeeds; when it fails, an existing file stays as it
/// was (see `heaplens_output`).
pub fn write_to<T>(
    output: &Path,
    input: &Path,
    sites: &SiteArgs,
    make: impl FnOnce(File) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let cannot = || format!("cannot write {}", output.display());
    let mut inputs = vec![input];
    inputs.extend(sites.skip.skip_file.as_deref());
    let out = heaplens_output::Output::create(output, &inputs).with_context(cannot)?;
    let made = make(out.file().with_context(cannot)?)?;
    out.commit().with_context(cannot)?;
    Ok(made)
}

/// Whether `output` asks for SVG (by its extension) rather than PNG.
pub fn is_svg(output: &Path) -> bool {
    output.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"))
}
