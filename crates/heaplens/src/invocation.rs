//! How the user ran this heaplens, for the commands heaplens suggests (`see it with: ...`).

use std::path::Path;

/// How the user can run this heaplens again: `heaplens` when that name on `PATH` is this
/// executable, else its path (`target/release/heaplens` after a build), so that the command
/// heaplens suggests works when pasted.
pub fn invoked_as() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else { return "heaplens".into() };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("heaplens"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
            .is_some_and(|p| p == me)
    });
    if on_path {
        return "heaplens".into();
    }
    let shown = std::env::current_dir().ok().and_then(|d| me.strip_prefix(d).ok().map(Path::to_path_buf));
    heaplens_interpret::names::for_terminal(&shown.unwrap_or(me).display().to_string()).into_owned()
}
