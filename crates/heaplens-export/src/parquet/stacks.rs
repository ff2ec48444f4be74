//! `stacks.parquet` and `frames.parquet`: the frames of every stack the events name.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::DataType;
use heaplens_interpret::symbolize::{Frame, Symbolizer};
use heaplens_interpret::Trace;
use parquet::errors::ParquetError;

use super::Table;

/// Writes the two tables for stacks `ids` of trace `t` (each at `path_of` its name), symbolizing
/// with `sym`; returns the symbolizer's warnings.
pub fn write(
    path_of: &dyn Fn(&str) -> PathBuf,
    t: &Trace,
    ids: &BTreeSet<u32>,
    mut sym: Box<dyn Symbolizer>,
) -> Result<Vec<String>, ParquetError> {
    // Frames of each return address (inlined first), as indices into the frame table.
    let mut of_addr: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut frames: Vec<(Frame, bool)> = Vec::new();
    let (mut stack_id, mut depth, mut frame_index) = (UInt32Builder::new(), UInt32Builder::new(), UInt32Builder::new());
    let mut buf = Vec::new();
    // As deep as the other views read these many stacks.
    let read_depth = heaplens_interpret::load::depth_for(ids.len());
    for &id in ids {
        let mut d = 0u32;
        for (_, addr) in t.stacks.walk_within(id, read_depth) {
            let indices = of_addr.entry(addr).or_insert_with(|| {
                buf.clear();
                sym.symbolize(addr, &mut buf);
                let n = buf.len();
                buf.drain(..)
                    .enumerate()
                    .map(|(i, f)| {
                        frames.push((f, i + 1 < n));
                        frames.len() as u32 - 1
                    })
                    .collect()
            });
            for &f in indices.iter() {
                stack_id.append_value(id);
                depth.append_value(d);
                frame_index.append_value(f);
                d += 1;
            }
        }
    }
    let schema = super::schema(&[
        ("stack_id", DataType::UInt32, false),
        ("depth", DataType::UInt32, false),
        ("frame_index", DataType::UInt32, false),
    ]);
    let arrays: Vec<ArrayRef> =
        vec![Arc::new(stack_id.finish()), Arc::new(depth.finish()), Arc::new(frame_index.finish())];
    let mut table = Table::create(&path_of("stacks"), schema.clone())?;
    table.write(&RecordBatch::try_new(schema, arrays)?)?;
    table.close()?;

    let (mut index, mut function, mut file) = (UInt32Builder::new(), StringBuilder::new(), StringBuilder::new());
    let (mut line, mut module, mut inlined) = (UInt32Builder::new(), StringBuilder::new(), BooleanBuilder::new());
    for (i, (f, is_inlined)) in frames.iter().enumerate() {
        index.append_value(i as u32);
        function.append_value(
            f.function
                .clone()
                .unwrap_or_else(|| format!("{}+0x{:x}", f.module.as_deref().unwrap_or("?"), f.function_offset())),
        );
        file.append_option(f.file.as_deref());
        line.append_option(f.line);
        module.append_option(f.module.as_deref());
        inlined.append_value(*is_inlined);
    }
    let schema = super::schema(&[
        ("frame_index", DataType::UInt32, false),
        ("function", DataType::Utf8, false),
        ("file", DataType::Utf8, true),
        ("line", DataType::UInt32, true),
        ("module", DataType::Utf8, true),
        ("inlined", DataType::Boolean, false),
    ]);
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(index.finish()),
        Arc::new(function.finish()),
        Arc::new(file.finish()),
        Arc::new(line.finish()),
        Arc::new(module.finish()),
        Arc::new(inlined.finish()),
    ];
    let mut table = Table::create(&path_of("frames"), schema.clone())?;
    table.write(&RecordBatch::try_new(schema, arrays)?)?;
    table.close()?;
    Ok(sym.warnings())
}
