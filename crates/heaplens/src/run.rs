//! `heaplens run`. (Being written.)
use crate::RunArgs;

pub fn execute(_a: &RunArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("run is not built yet")
}
