//! Re-encodes every event payload of each trace with this build's column encoder, checks that the
//! events decode back identical, and prints the payloads' zstd-1 size before and after (a format
//! change measured on real traces): `cargo run --release -p heaplens-trace --example roundtrip --
//! TRACE...`.

use heaplens_trace::*;
fn main() {
    for path in std::env::args().skip(1) {
        let mut r = TraceReader::open(std::path::Path::new(&path)).expect("open");
        let (mut dec, mut dec2, mut enc) =
            (ColumnDecoder::default(), ColumnDecoder::default(), ColumnEncoder::default());
        let (mut rows, mut out, mut n, mut before, mut after) = (Vec::new(), Vec::new(), 0usize, 0usize, 0usize);
        while let Some((kind, p)) = r.next_block().expect("read") {
            rows.clear();
            match kind {
                BlockKind::Events => rows.extend_from_slice(&p),
                BlockKind::EventColumns => dec.to_rows(&p, &mut rows).unwrap(),
                _ => continue,
            }
            let want: Vec<Event> = EventDecoder::new(&rows).unwrap().map(Result::unwrap).collect();
            out.clear();
            enc.set_time_shift(columns::time_shift(&p).unwrap_or(0));
            enc.encode(&rows, &mut out).unwrap();
            let mut got = Vec::new();
            dec2.decode(&out, |e| got.push(e)).unwrap();
            assert_eq!(got, want, "{path}");
            n += got.len();
            before += zstd::bulk::compress(&p, 1).unwrap().len();
            after += zstd::bulk::compress(&out, 1).unwrap().len();
        }
        println!("{path}: {n} events identical; payloads zstd-1 {before} -> {after}");
    }
}
