//! `events.parquet`: the replay's calls as rows, written a batch at a time.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::builder::{StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use heaplens_interpret::view::{Block, Release, View};
use heaplens_trace::{Op, OpClass};
use parquet::errors::ParquetError;

use super::Table;

/// Rows per batch (and Parquet row group).
const BATCH: usize = 1 << 16;

/// The schema of `events.parquet`.
pub fn schema() -> SchemaRef {
    super::schema(&[
        ("time_ns", DataType::UInt64, false),
        ("thread", DataType::UInt32, false),
        ("kind", DataType::Utf8, false),
        ("function", DataType::Utf8, false),
        ("address", DataType::UInt64, false),
        ("old_address", DataType::UInt64, true),
        ("size", DataType::UInt64, false),
        ("usable_size", DataType::UInt64, false),
        ("stack_id", DataType::UInt32, true),
    ])
}

/// Column builders of the batch being filled.
#[derive(Default)]
struct Columns {
    time: UInt64Builder,
    thread: UInt32Builder,
    kind: StringBuilder,
    function: StringBuilder,
    address: UInt64Builder,
    old_address: UInt64Builder,
    size: UInt64Builder,
    usable: UInt64Builder,
    stack: UInt32Builder,
    rows: usize,
}

/// One row.
struct Row {
    time: u64,
    thread: u32,
    kind: &'static str,
    op: Op,
    address: u64,
    old_address: Option<u64>,
    size: u64,
    usable: u64,
    stack: Option<u32>,
}

/// The view writing rows. A reallocation comes from the replay as the release of the old block
/// then the new block, both with the realloc's op: it is held until its allocation comes, and
/// written as one `reallocation` row.
pub struct EventRows {
    table: Table,
    cols: Columns,
    /// A realloc's release, waiting for its allocation.
    pending: Option<(Release, Block)>,
    stacks: BTreeSet<u32>,
    /// Bytes requested by successful allocations and reallocations written.
    bytes: u64,
    error: Option<ParquetError>,
}

impl EventRows {
    /// Rows written to `table`.
    pub fn new(table: Table) -> Self {
        EventRows { table, cols: Columns::default(), pending: None, stacks: BTreeSet::new(), bytes: 0, error: None }
    }

    /// Writes what is left and closes the file; the stacks the rows name, and the bytes
    /// allocated.
    pub fn finish(mut self) -> Result<(BTreeSet<u32>, u64), ParquetError> {
        self.flush_pending();
        self.flush();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.table.close()?;
        Ok((self.stacks, self.bytes))
    }

    fn push(&mut self, r: Row) {
        let c = &mut self.cols;
        c.time.append_value(r.time);
        c.thread.append_value(r.thread);
        c.kind.append_value(r.kind);
        c.function.append_value(r.op.label());
        c.address.append_value(r.address);
        c.old_address.append_option(r.old_address);
        c.size.append_value(r.size);
        c.usable.append_value(r.usable);
        c.stack.append_option(r.stack);
        if let Some(s) = r.stack {
            self.stacks.insert(s);
        }
        c.rows += 1;
        if c.rows == BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.cols.rows == 0 {
            return;
        }
        let mut c = std::mem::take(&mut self.cols);
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(c.time.finish()),
            Arc::new(c.thread.finish()),
            Arc::new(c.kind.finish()),
            Arc::new(c.function.finish()),
            Arc::new(c.address.finish()),
            Arc::new(c.old_address.finish()),
            Arc::new(c.size.finish()),
            Arc::new(c.usable.finish()),
            Arc::new(c.stack.finish()),
        ];
        let batch = RecordBatch::try_new(schema(), arrays).map_err(ParquetError::from);
        if let Err(e) = batch.and_then(|b| self.table.write(&b)) {
            self.error.get_or_insert(e);
        }
    }

    /// A realloc that only released (`realloc(p, 0)`): its row, new address 0.
    fn flush_pending(&mut self) {
        if let Some((r, b)) = self.pending.take() {
            self.push(Row {
                time: r.ts,
                thread: r.tid,
                kind: "reallocation",
                op: r.op,
                address: 0,
                old_address: Some(b.addr),
                size: 0,
                usable: 0,
                stack: Some(b.stack),
            });
        }
    }

    fn allocated(&mut self, b: &Block, kind: &'static str, old: Option<u64>) {
        if b.addr != 0 {
            self.bytes += b.size;
        }
        let row = Row {
            time: b.ts,
            thread: b.tid,
            kind,
            op: b.op,
            address: b.addr,
            old_address: old,
            size: b.size,
            usable: b.usable,
            stack: Some(b.stack),
        };
        self.push(row);
    }
}

impl View for EventRows {
    fn allocation(&mut self, b: &Block) {
        if b.op.class() != OpClass::Realloc {
            self.flush_pending();
            return self.allocated(b, "allocation", None);
        }
        let old = match self.pending.take() {
            Some((r, old)) if r.tid == b.tid => Some(old.addr),
            other => {
                self.pending = other;
                self.flush_pending();
                None
            }
        };
        self.allocated(b, "reallocation", old);
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        self.flush_pending();
        if r.op.class() == OpClass::Realloc {
            self.pending = Some((*r, *b));
            return;
        }
        let row = Row {
            time: r.ts,
            thread: r.tid,
            kind: "deallocation",
            op: r.op,
            address: r.addr,
            old_address: None,
            size: 0,
            usable: 0,
            stack: Some(b.stack),
        };
        self.push(row);
    }

    fn failed_allocation(&mut self, b: &Block) {
        self.flush_pending();
        let kind = if b.op.class() == OpClass::Realloc { "reallocation" } else { "allocation" };
        self.allocated(b, kind, None);
    }

    fn unmatched(&mut self, r: &Release) {
        self.flush_pending();
        let kind = if r.op.class() == OpClass::Realloc { "reallocation" } else { "deallocation" };
        let row = Row {
            time: r.ts,
            thread: r.tid,
            kind,
            op: r.op,
            address: if kind == "reallocation" { 0 } else { r.addr },
            old_address: (kind == "reallocation").then_some(r.addr),
            size: 0,
            usable: 0,
            stack: None,
        };
        self.push(row);
    }
}
