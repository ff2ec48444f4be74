//! Export and the pictures (`map`, `timeline`, `view`) show one process. Given the first trace
//! of a `--follow-children` run they keep to that process, and say once that the run has more
//! and how to pick one, since a build's allocations are mostly in the children.

use std::path::Path;

use heaplens_interpret::names::for_terminal;

/// Prints one line on stderr when `trace` heads a process tree: how many child traces there
/// are and how `command` takes another one.
pub fn note_children(trace: &Path, command: &str) {
    let family = heaplens_report::tree::family(trace);
    let Some(example) = family.get(1) else { return };
    eprintln!(
        "heaplens: note: the run of {} has {} child trace(s); this shows its first process only (another: heaplens {command} {}; all: heaplens report {})",
        for_terminal(&trace.display().to_string()),
        family.len() - 1,
        for_terminal(&example.display().to_string()),
        for_terminal(&trace.display().to_string()),
    );
}
