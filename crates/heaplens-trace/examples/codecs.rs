//! What each compressor makes of a trace's event payloads, and the processor time it takes:
//! `cargo run --release -p heaplens-trace --example codecs -- FILE [columns]` (with `columns`,
//! row payloads are first turned into columns, as the writer does with a spare processor).

use heaplens_trace::*;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let to_columns = args.iter().any(|a| a == "columns");
    let mut r = TraceReader::open(std::path::Path::new(&args[1])).expect("open");
    let (mut payloads, mut columns) = (Vec::new(), Vec::new());
    let mut enc = ColumnEncoder::default();
    let t = Instant::now();
    while let Some((kind, p)) = r.next_block().expect("read") {
        match kind {
            BlockKind::Events => payloads.push(p.to_vec()),
            BlockKind::EventColumns => columns.push(p.to_vec()),
            _ => {}
        }
    }
    println!("{} payloads already columns (left out)", columns.len());
    println!("read in {:.3} s", t.elapsed().as_secs_f64());
    if to_columns {
        // Timed apart from the reading, as the writer pays it: rows in memory to columns.
        let (t, mut out) = (Instant::now(), Vec::new());
        for p in &payloads {
            out.clear();
            enc.encode(p, &mut out).expect("rows");
        }
        println!("encoded as columns in {:.3} s (into one buffer, as the writer does)", t.elapsed().as_secs_f64());
        let t = Instant::now();
        payloads = payloads
            .iter()
            .map(|p| {
                let mut out = Vec::new();
                enc.encode(p, &mut out).expect("rows");
                out
            })
            .collect();
        println!("encoded as columns in {:.3} s", t.elapsed().as_secs_f64());
    }
    let raw: usize = payloads.iter().map(Vec::len).sum();
    println!("{} payloads, {raw} bytes", payloads.len());
    let t = Instant::now();
    let n: usize = payloads.iter().map(|p| lz4_flex::block::compress(p).len()).sum();
    println!("lz4      {n:10} bytes {:.3} s", t.elapsed().as_secs_f64());
    for level in [-5, -3, -1, 1, 2, 3, 5] {
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        let t = Instant::now();
        let n: usize = payloads.iter().map(|p| c.compress(p).unwrap().len()).sum();
        println!("zstd {level:3} {n:10} bytes {:.3} s", t.elapsed().as_secs_f64());
    }
}
