//! Where a trace's bytes go: stored bytes per block kind, and for EventColumns payloads each
//! section's raw bytes and its bytes compressed alone at Zstandard level 1, for choosing
//! encodings: `cargo run --release -p heaplens-trace --example sizes -- FILE...`.

use heaplens_trace::*;
use std::collections::BTreeMap;

const NAMES: [&str; 7] = ["ops", "dts", "addrs", "sizes", "slacks", "stacks", "olds"];

fn var(b: &[u8], p: &mut usize) -> u64 {
    let (mut v, mut s) = (0u64, 0);
    loop {
        let x = b[*p];
        *p += 1;
        v |= u64::from(x & 0x7f) << s;
        s += 7;
        if x < 0x80 {
            return v;
        }
    }
}

fn main() {
    for path in std::env::args().skip(1) {
        let file_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let mut r = TraceReader::open(std::path::Path::new(&path)).expect("open");
        let mut kinds: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let (mut raw, mut alone) = ([0u64; 7], [0u64; 7]);
        let mut events = 0u64;
        // EventColumns payloads by time shift (trace format 4), and their events.
        let mut shifts: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        while let Some((kind, p)) = r.next_block().expect("read") {
            let e = kinds.entry(format!("{kind:?}")).or_default();
            e.0 += 1;
            e.1 += p.len() as u64;
            if kind == BlockKind::EventColumns {
                let shift = columns::time_shift(&p).unwrap_or(0);
                let e = shifts.entry(shift).or_default();
                e.0 += 1;
                e.1 += columns::event_count(&p).unwrap_or(0) as u64;
                let mut pos = 0;
                // Format 3's mark (above any thread id), then the thread id.
                if var(&p, &mut pos) >= 1 << 32 {
                    var(&p, &mut pos);
                }
                events += var(&p, &mut pos);
                let mut lens = [0usize; 7];
                for l in lens.iter_mut().take(6) {
                    *l = var(&p, &mut pos) as usize;
                }
                lens[6] = p.len() - pos - lens[..6].iter().sum::<usize>();
                for (i, l) in lens.iter().enumerate() {
                    let s = &p[pos..pos + l];
                    raw[i] += *l as u64;
                    alone[i] += zstd::bulk::compress(s, 1).map(|c| c.len() as u64).unwrap_or(0);
                    pos += l;
                }
            }
        }
        println!("{path}: {file_len} bytes, {events} column events");
        for (k, (n, b)) in &kinds {
            println!("  {k:14} blocks {n:6} raw payload bytes {b:10}");
        }
        for (shift, (n, ev)) in &shifts {
            println!("  time shift {shift:2}: {n:6} payloads, {ev:10} events");
        }
        for i in 0..7 {
            println!(
                "  column {:7} raw {:10} zstd-1 alone {:10} ({:.2} bytes/event)",
                NAMES[i],
                raw[i],
                alone[i],
                alone[i] as f64 / events.max(1) as f64
            );
        }
    }
}
