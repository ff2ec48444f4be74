//! `heaplens report`. (Being written.)
use crate::ReportArgs;

pub fn execute(_a: &ReportArgs) -> anyhow::Result<()> {
    anyhow::bail!("report is not built yet")
}
