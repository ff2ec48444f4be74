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
//!
//! The same tables go into a data set of many traces as one Hive partition each (see
//! [`dataset`]); a table's ids (`stack_id`, `frame_index`) are then unique within a partition.

mod dataset;
mod events;
mod stacks;

use std::fs::File;
use std::path::{Path, PathBuf};
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
    heaplens_output::create_dir(dir, &[trace]).map_err(write_err)?;
    let t = Trace::load_into(trace, None, &mut NoEvents)?;
    write_tables(trace, &t, &|name| dir.join(format!("{name}.parquet")), dir, opts)
}

/// Exports the trace at `trace` as its partition of the data set `dir` (see [`dataset`]),
/// replacing the partition of the same host, program and pid; `host` is the machine the
/// trace was recorded on, this one when `None` (traces do not record it).
pub(crate) fn export_partition(
    trace: &Path,
    dir: &Path,
    host: Option<&str>,
    opts: &Options,
) -> Result<(Exported, PathBuf), ExportError> {
    let write_err = |reason: std::io::Error| ExportError::Write { path: dir.into(), reason };
    heaplens_output::create_dir(dir, &[trace]).map_err(write_err)?;
    let t = Trace::load_into(trace, None, &mut NoEvents)?;
    let part = partition_of(&t, host);
    // Beside the tables, not under them: a reader's `DIR/events/**` never sees a partition
    // being written, nor one left by a killed export (a `.heaplens-*` directory).
    let tmp = tempfile::Builder::new().prefix(".heaplens-").tempdir_in(dir).map_err(write_err)?;
    for name in TABLES {
        std::fs::create_dir(tmp.path().join(name)).map_err(write_err)?;
    }
    let done = write_tables(trace, &t, &|name| tmp.path().join(name).join("part-0.parquet"), dir, opts)?;
    for name in TABLES {
        let target = dir.join(name).join(part.path());
        dataset::replace(&tmp.path().join(name), &target)
            .map_err(|reason| ExportError::Write { path: target.clone(), reason })?;
    }
    Ok((done, part.path()))
}

/// The tables of an export, each written by name.
const TABLES: [&str; 3] = ["events", "stacks", "frames"];

/// The partition of trace `t`: its process's pid and executable's name (argv[0]'s when the
/// trace has no executable path).
fn partition_of(t: &Trace, host: Option<&str>) -> dataset::Partition {
    let (pid, exe) = t.process.as_ref().map(|p| (p.pid, p.exe.to_string_lossy())).unwrap_or((0, "".into()));
    let exe = match exe.as_ref() {
        "" => t.process.as_ref().and_then(|p| p.argv.first()).map(String::as_str).unwrap_or(""),
        e => e,
    };
    let program = exe.rsplit('/').next().unwrap_or("").to_string();
    let host = host.map_or_else(dataset::local_host, str::to_string);
    dataset::Partition { host, program, pid }
}

/// Writes the three tables of trace `t` (its records loaded), each at `path_of` its name;
/// write errors name `out`.
fn write_tables(
    trace: &Path,
    t: &Trace,
    path_of: &dyn Fn(&str) -> PathBuf,
    out: &Path,
    opts: &Options,
) -> Result<Exported, ExportError> {
    let pq_err =
        |e: parquet::errors::ParquetError| ExportError::Write { path: out.into(), reason: std::io::Error::other(e) };
    let table = Table::create(&path_of("events"), events::schema()).map_err(pq_err)?;
    let mut rows = events::EventRows::new(table);
    let replayed = replay_with_progress(trace, &mut rows, opts.progress)?;
    let (stack_ids, written) = rows.finish().map_err(pq_err)?;
    let (sym, _damaged) = heaplens_interpret::symbolize::for_trace(trace, t);
    let mut done = Exported { warnings: damage(&replayed), stacks: stack_ids.len(), total: written };
    let warnings = stacks::write(path_of, t, &stack_ids, sym).map_err(pq_err)?;
    done.warnings.extend(warnings);
    Ok(done)
}

/// A schema from (name, type, nullable) triples.
fn schema(fields: &[(&str, arrow_schema::DataType, bool)]) -> arrow_schema::SchemaRef {
    Arc::new(arrow_schema::Schema::new(
        fields.iter().map(|(n, t, null)| arrow_schema::Field::new(*n, t.clone(), *null)).collect::<Vec<_>>(),
    ))
}
