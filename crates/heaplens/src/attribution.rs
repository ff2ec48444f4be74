//! How allocations are charged to functions: the options `report`, `diff` and `check` share
//! (`--skip`, `--skip-file`, `--raw-frames`, `--suppressions`), and the pictures' call sites
//! (`--skip`, `--skip-file`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use heaplens_interpret::paths::Attribution;
use heaplens_interpret::suppress::Suppressions;

use crate::parse_regex;

/// The patterns of frames passed over (`--skip`, `--skip-file`): what `report`, `diff` and
/// `check` and the pictures' call sites (`map`, `timeline`, `view`) share.
#[derive(Args, Debug, Clone, Default)]
pub struct SkipArgs {
    /// Also pass over frames whose function name matches REGEX when choosing which function an
    /// allocation is charged to (your own allocation wrappers: `--skip '^xmalloc$'`); may be
    /// given several times. By default an allocation is charged to the innermost frame of the
    /// program's own code: the C library and loader, the C++ and Rust standard libraries
    /// (std::, __gnu_cxx::, alloc::, core::, hashbrown::), replacement allocators and the
    /// monitor are passed over, and the table names the library function it came through
    /// (`make_widget  via std::vector<…>::push_back`).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub skip: Vec<regex::Regex>,
    /// Read more --skip patterns from FILE: one regular expression per line; blank lines and
    /// lines starting with # are ignored.
    #[arg(long, value_name = "FILE")]
    pub skip_file: Option<PathBuf>,
}

impl SkipArgs {
    /// The patterns of `--skip` and those of `--skip-file`.
    ///
    /// # Errors
    /// An unreadable file, or a line of it that is not a regular expression.
    pub fn patterns(&self) -> anyhow::Result<Vec<regex::Regex>> {
        let mut skip = self.skip.clone();
        if let Some(file) = &self.skip_file {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let re = regex::Regex::new(line)
                    .with_context(|| format!("{}:{n}: not a regular expression", file.display()))?;
                skip.push(re);
            }
        }
        Ok(skip)
    }
}

/// The attribution options.
#[derive(Args, Debug, Clone, Default)]
pub struct AttributionArgs {
    /// Frames passed over.
    #[command(flatten)]
    pub skip: SkipArgs,
    /// Charge each allocation to the innermost frame, whatever it is (the standard library's
    /// internals included), as mprof did.
    #[arg(long, conflicts_with_all = ["skip", "skip_file"])]
    pub raw_frames: bool,
    /// Blocks live at exit that are not leaks, in LeakSanitizer's format: `leak:PATTERN` lines
    /// matched against every frame's function and module (`*` any run of characters, `^` and `$`
    /// anchor). They are counted apart from the leaks, as the runtime's own one-time buffers
    /// (stdio, TLS, locale, ...) always are; the report says which matched how many blocks.
    /// May be given several times.
    #[arg(long, value_name = "FILE")]
    pub suppressions: Vec<PathBuf>,
}

impl AttributionArgs {
    /// The attribution rule the options ask for: the program's own code, past the patterns of
    /// `--skip` and `--skip-file`, or the innermost frame with `--raw-frames`; with the runtime's
    /// suppressions and those of `--suppressions` files.
    pub fn rule(&self) -> anyhow::Result<Attribution> {
        let a = self;
        let skip = a.skip.patterns()?;
        let mut attribution = if a.raw_frames { Attribution::raw() } else { Attribution::own_code(skip) };
        let mut suppressions = Suppressions::default();
        for file in &a.suppressions {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            suppressions.add_lsan(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        }
        attribution.suppressions = suppressions;
        Ok(attribution)
    }
}
