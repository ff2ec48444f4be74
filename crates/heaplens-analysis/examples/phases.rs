use heaplens_trace::*;
use std::time::Instant;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let t0 = Instant::now();
    let mut r = TraceReader::open(std::path::Path::new(&p)).unwrap();
    let mut raw = 0usize;
    let mut n = 0;
    let mut evs = 0u64;
    let mut pl = Vec::new();
    while let Some((k, b)) = r.next_block().unwrap() {
        n += 1;
        if k == BlockKind::Events {
            raw += b.len();
            pl.push(b);
        }
    }
    let t1 = t0.elapsed();
    for b in &pl {
        for e in EventDecoder::new(b).unwrap() {
            if e.is_ok() {
                evs += 1;
            }
        }
    }
    let t2 = t0.elapsed();
    let t = heaplens_analysis::Trace::load(std::path::Path::new(&p), false).unwrap();
    let t3 = t0.elapsed();
    let rp = heaplens_analysis::replay::replay(t.events());
    let t4 = t0.elapsed();
    let mut sym = heaplens_analysis::ElfSymbolizer::new(&t.modules);
    let ids: Vec<u32> = rp.stacks.iter().map(|s| s.stack).collect();
    let (_f, _p) = heaplens_analysis::paths::resolve(&t.stacks, &ids, &mut sym, false);
    let t5 = t0.elapsed();
    eprintln!("blocks {n} raw {raw} events {evs} stacks {} nodes {}; read {:?} decode {:?} load {:?} replay {:?} resolve {:?}", ids.len(), t.stacks.len(), t1, t2-t1, t3-t2, t4-t3, t5-t4);
}
