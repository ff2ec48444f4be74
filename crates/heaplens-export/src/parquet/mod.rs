//! A directory of Parquet files that SQL engines (DuckDB on a laptop, Spark or DataFusion on a
//! cluster) query without heaplens:
//!
//! - `events.parquet`: one row per call, in time order: `time_ns` (u64, `CLOCK_MONOTONIC`),
//!   `thread` (u32), `kind` (`allocation` | `reallocation` | `deallocation`), `function` (the
//!   entry point: `malloc`, `operator new[]`...), `address` (u64; 0 for a failed call),
//!   `old_address` (u64, reallocations only), `size` (requested bytes, 0 for deallocations),
//!   `usable_size` (u64), `stack_id` (u32: the allocation stack; for a deallocation the stack
//!   of the block it released, null when that block was never seen allocated);
//! - `stacks.parquet`: `stack_id`, `depth` (0 = innermost frame), `frame_index`;
//! - `frames.parquet`: `frame_index`, `function`, `file`, `line`, `module`, `inlined` (true
//!   for a frame inlined into the next one).
//!
//! Events are written in row groups as the replay goes, so the export holds one batch of rows,
//! not the trace.

mod events;
mod stacks;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use heaplens_interpret::view::replay_with_progress;
use heaplens_interpret::Trace;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::{damage, ExportError, Exported, NoEvents, Options};

/// Writes batches of one table to a Parquet file, zstd-compressed.
/// Each table appears whole (renamed into place when closed), so that a failed export leaves
/// the previous table of that name as it was.
pub(crate) struct Table {
    writer: ArrowWriter<File>,
    output: heaplens_output::Output,
}

impl Table {
    fn create(path: &Path, schema: arrow_schema::SchemaRef) -> Result<Self, parquet::errors::ParquetError> {
        let props = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())).build();
        let output = heaplens_output::Output::create(path, &[])?;
        Ok(Table { writer: ArrowWriter::try_new(output.file()?, schema, Some(props))?, output })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), parquet::errors::ParquetError> {
        self.writer.write(batch)
    }

    fn close(self) -> Result<(), parquet::errors::ParquetError> {
        self.writer.close()?;
        Ok(self.output.commit()?)
    }
}

/// Exports the trace at `trace` into directory `dir` (created if missing).
pub(crate) fn export(trace: &Path, dir: &Path, opts: &Options) -> Result<Exported, ExportError> {
    let write_err = |reason: std::io::Error| ExportError::Write { path: dir.into(), reason };
    let pq_err = |e: parquet::errors::ParquetError| write_err(std::io::Error::other(e));
    heaplens_output::create_dir(dir, &[trace]).map_err(write_err)?;
    let t = Trace::load_into(trace, None, &mut NoEvents)?;
    let table = Table::create(&dir.join("events.parquet"), events::schema()).map_err(pq_err)?;
    let mut rows = events::EventRows::new(table);
    let replayed = replay_with_progress(trace, &mut rows, opts.progress)?;
    let (stack_ids, written) = rows.finish().map_err(pq_err)?;
    let (sym, _damaged) = heaplens_interpret::symbolize::for_trace(trace, &t);
    let mut done = Exported { warnings: damage(&replayed), stacks: stack_ids.len(), total: written };
    let warnings = stacks::write(dir, &t, &stack_ids, sym).map_err(pq_err)?;
    done.warnings.extend(warnings);
    Ok(done)
}

/// A schema from (name, type, nullable) triples.
fn schema(fields: &[(&str, arrow_schema::DataType, bool)]) -> arrow_schema::SchemaRef {
    Arc::new(arrow_schema::Schema::new(
        fields.iter().map(|(n, t, null)| arrow_schema::Field::new(*n, t.clone(), *null)).collect::<Vec<_>>(),
    ))
}
