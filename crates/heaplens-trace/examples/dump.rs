//! Prints a trace's blocks, for debugging the format: `cargo run -p heaplens-trace --example dump -- FILE [-v]`.

use heaplens_trace::record::EndRecord;
use heaplens_trace::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "-v");
    let mut r = TraceReader::open(std::path::Path::new(&args[1])).expect("open");
    let (mut events, mut nodes) = (0u64, 0u64);
    let mut columns = ColumnDecoder::default();
    while let Some((kind, p)) = r.next_block().expect("read") {
        match kind {
            BlockKind::Process => println!("{:?}", ProcessRecord::decode(&p)),
            BlockKind::Modules => {
                for m in ModuleRecord::decode_all(&p).unwrap() {
                    println!(
                        "module loaded={} base={:#x} {} segs={}",
                        m.loaded,
                        m.base,
                        m.path.display(),
                        m.segments.len()
                    );
                }
            }
            BlockKind::Stacks => {
                let n = StackNode::decode_all(&p).unwrap();
                nodes += n.len() as u64;
                if verbose {
                    for s in n {
                        println!("node {} parent {} {:#x}", s.id, s.parent, s.addr);
                    }
                }
            }
            BlockKind::Events | BlockKind::EventColumns => {
                let rows = if kind == BlockKind::Events {
                    p.clone()
                } else {
                    let mut rows = Vec::new();
                    if let Err(e) = columns.to_rows(&p, &mut rows) {
                        println!("damaged event columns: {e}");
                    }
                    rows
                };
                let d = EventDecoder::new(&rows).unwrap();
                let tid = d.tid();
                let evs: Vec<_> = d.collect();
                println!("events ({kind:?}) tid={tid} n={} bytes={}", evs.len(), p.len());
                events += evs.len() as u64;
                if verbose {
                    for e in evs {
                        println!("  {:?}", e);
                    }
                }
            }
            BlockKind::ThreadName => println!("{:?}", ThreadName::decode(&p)),
            BlockKind::Exit => println!("{:?}", ExitRecord::decode(&p)),
            BlockKind::End => println!("{:?}", EndRecord::decode(&p)),
            BlockKind::Clock => println!("{:?}", ClockSync::decode(&p)),
            BlockKind::Aggregate => println!("{:?}", AggregateRecord::decode(&p)),
            BlockKind::Symbols => match heaplens_trace::SymbolTable::decode(&p) {
                Ok(t) => println!("symbols of {} addresses", t.entries.len()),
                Err(e) => println!("{e}"),
            },
            BlockKind::SymbolsIndex => println!("symbols index {p:?}"),
            BlockKind::Samples => match heaplens_trace::record::SampleRecord::decode(&p) {
                Ok(r) => println!(
                    "samples tid {} period {} ns: {} samples weight {}",
                    r.tid,
                    r.period_ns,
                    r.samples.len(),
                    r.samples.iter().map(|x| u64::from(x.weight)).sum::<u64>()
                ),
                Err(e) => println!("samples: {e:?}"),
            },
        }
    }
    println!("total events={events} stack nodes={nodes} status={:?}", r.status());
}
