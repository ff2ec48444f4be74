//! The live view follows a trace incrementally: fed a recorded trace block by block, each
//! block first cut in half (as while the monitor writes it), it ends with the report's numbers,
//! having read each block once (a cut block twice at most). `examples/live_sites.c`: a
//! producer thread allocates what a consumer thread frees, so releases must be paired with
//! allocations of another thread whose blocks come later in the file.

mod common;

use std::io::Write;

use common::*;
use heaplens_live::{Follower, Options};

#[test]
fn a_growing_trace_ends_with_the_reports_numbers() {
    let dir = WorkDir::new("live-follow");
    let exe = compile_c(&dir, "live_sites.c", &["-pthread"]);
    let trace = dir.join("sites.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("heaplens run");
    let bytes = std::fs::read(&trace).unwrap();
    let all = blocks(&bytes);
    assert!(all.len() > 10, "{} blocks", all.len());

    let grown = dir.join("grown.hltrace");
    let mut file = std::fs::File::create(&grown).unwrap();
    let mut follower = Follower::new(grown.clone(), Options::default());
    assert!(follower.refresh().note.is_some(), "an empty file: waiting for the trace");
    file.write_all(&bytes[..heaplens_trace::FILE_HEADER_LEN]).unwrap();
    let mut rounds = 0;
    for (k, b) in all.iter().enumerate() {
        let (start, half, end) = (b.offset, b.offset + b.len / 2, b.offset + b.len);
        file.write_all(&bytes[start..half]).unwrap();
        if k % 3 == 0 {
            follower.refresh();
            rounds += 1;
        }
        file.write_all(&bytes[half..end]).unwrap();
        if k % 2 == 0 {
            follower.refresh();
            rounds += 1;
        }
    }
    let screen = follower.refresh().clone();
    assert!(rounds > 10 && screen.note.is_none(), "{rounds} rounds; {:?}", screen.note);

    let v = report(&dir, &trace);
    let t = follower.tally();
    assert_eq!(t.allocations, u(&v, "summary/allocations"), "allocations");
    assert_eq!(t.allocated_bytes, u(&v, "summary/bytes_allocated"), "bytes allocated");
    assert_eq!(t.peak, u(&v, "summary/peak_bytes"), "peak");
    let live = u(&v, "summary/leaked_bytes") + u(&v, "summary/suppressed_bytes");
    assert_eq!(
        (screen.in_use, screen.blocks),
        (live, u(&v, "summary/leaked_objects") + u(&v, "summary/suppressed_objects"))
    );
    assert_eq!(screen.unmatched, u(&v, "summary/unmatched_frees"), "frees of unseen blocks");
    assert!(screen.sealed, "the End block was read");
    let site =
        |name: &str| screen.sites.iter().find(|s| s.site == name).unwrap_or_else(|| panic!("{name}: {screen:#?}"));
    assert_eq!((site("keep_big").bytes, site("keep_big").total), (1_000_000, 1_000_000));
    let churn = screen.sites.iter().find(|s| s.site == "churn_small");
    // Sorted by bytes in use, a site holding nothing is not listed; its total is the tally's.
    assert!(churn.is_none_or(|c| c.total == 10_000_000), "{churn:?}");
    // Each block read once; a block found cut is read again, whole, once.
    let (read, restarts) = (follower.bytes_read(), follower.restarts());
    assert!(
        read <= bytes.len() as u64 * 3 / 2 && restarts == 0,
        "read {read} bytes of {}, {restarts} restarts",
        bytes.len()
    );
}
