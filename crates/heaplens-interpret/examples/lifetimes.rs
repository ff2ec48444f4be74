//! A view of its own on the public replay API: how long blocks live, as a histogram by powers
//! of two of nanoseconds, with the bytes still live at the end.
//!
//! `cargo run --release -p heaplens-interpret --example lifetimes -- app.hltrace`

use heaplens_interpret::view::{replay, Block, Release, View};

/// Blocks and bytes per lifetime bucket (bucket `k`: lifetimes in [2^k, 2^(k+1)) ns).
struct Lifetimes {
    blocks: [u64; 64],
    bytes: [u64; 64],
    live_blocks: u64,
    live_bytes: u64,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Lifetimes { blocks: [0; 64], bytes: [0; 64], live_blocks: 0, live_bytes: 0 }
    }
}

impl View for Lifetimes {
    fn deallocation(&mut self, release: &Release, block: &Block) {
        let ns = release.ts.saturating_sub(block.ts).max(1);
        let k = 63 - ns.leading_zeros() as usize;
        self.blocks[k] += 1;
        self.bytes[k] += block.size;
    }

    fn end(&mut self, live: &mut dyn Iterator<Item = &Block>) {
        for b in live {
            self.live_blocks += 1;
            self.live_bytes += b.size;
        }
    }
}

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: lifetimes TRACE");
        std::process::exit(2);
    };
    let mut v = Lifetimes::default();
    if let Err(e) = replay(path.as_ref(), &mut v) {
        eprintln!("lifetimes: {e}");
        std::process::exit(2);
    }
    println!("{:>14} {:>12} {:>14}", "lifetime", "blocks", "bytes");
    for k in (0..64).filter(|&k| v.blocks[k] > 0) {
        let label = match k {
            0..=9 => format!("{} ns", 1u64 << k),
            10..=19 => format!("{} us", 1u64 << (k - 10)),
            20..=29 => format!("{} ms", 1u64 << (k - 20)),
            _ => format!("{} s", 1u64 << (k - 30)),
        };
        println!("{:>14} {:>12} {:>14}", format!(">= {label}"), v.blocks[k], v.bytes[k]);
    }
    println!("{:>14} {:>12} {:>14}", "live at end", v.live_blocks, v.live_bytes);
}
