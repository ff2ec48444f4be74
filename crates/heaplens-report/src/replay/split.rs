//! Replaying the rest of a trace on two processors: the calling thread replays up to a cut,
//! another thread the events from it on, and the two are joined into the counters of one
//! replay (see `replay/tail.rs` for why the join is exact).
//!
//! The replay is the report's longest stage and, once the file is read, the only one left, so
//! on its own it keeps one processor busy; cut in two it keeps both. The cut is placed where
//! [`HEAD_SHARE`] of the payload bytes not replayed yet come before it, and only when there
//! are [`MIN_BYTES`] of them.

use std::sync::Arc;

use crate::replay::chunk::ChunkSource;
use crate::replay::{Counts, Join, State, Weights};
use heaplens_interpret::merge::Merger;

/// Below this many payload bytes left to replay, a second thread costs more than it saves: the
/// tail's live map is fresh memory (the widgets trace, 9 MiB of payloads with a million blocks
/// live, took 1.2 times as long split).
const MIN_BYTES: usize = 16 << 20;

/// How a split replay ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// Every event was replayed; the counters are those of one replay.
    Joined,
    /// Not split (too little left, or payloads out of time order): nothing was replayed.
    Declined,
    /// The halves could not be joined exactly (see `replay/tail.rs`): the counters are
    /// unusable, and the events must be replayed from the start.
    Failed,
}

/// The head's share of the payload bytes left, in percent. The tail replays the same bytes
/// 15-35% slower (its live map's memory is fresh, it notes pending releases, and the head has
/// events decoded ahead in hand): at half each, the tail of the single-thread churn, gcc and
/// sqlite3 traces ended 20-35% after the head; at 57% the head of the 8-thread churn ended 15%
/// after the tail.
const HEAD_SHARE: usize = 55;

/// Where to cut the events after timestamp `after` (everything up to it was replayed), given
/// the first timestamp and size of every payload per stream (`starts`):
/// the first timestamp of the payload at which [`HEAD_SHARE`] of the later payloads' bytes are
/// behind.
fn cut(starts: &[Vec<(Option<u64>, usize)>], after: u64) -> Option<u64> {
    let mut later: Vec<(u64, usize)> =
        starts.iter().flatten().filter_map(|&(ts, len)| ts.filter(|&ts| ts > after).map(|ts| (ts, len))).collect();
    let total: usize = later.iter().map(|&(_, len)| len).sum();
    if total < MIN_BYTES {
        return None;
    }
    later.sort_unstable();
    let mut behind = 0;
    later
        .into_iter()
        .find(|&(_, len)| {
            behind += len;
            behind * 100 >= total * HEAD_SHARE
        })
        .map(|(ts, _)| ts)
}

impl State {
    /// Replays every event of `m` not replayed yet, on two threads when there are enough;
    /// on [`Split::Failed`] this state is unusable.
    pub(crate) fn replay_rest(&mut self, m: &mut Merger<'_>, chunks: Option<&Arc<ChunkSource>>) -> Split {
        match self {
            State::Exact(c) => replay_rest(m, c, chunks),
            State::Sampled(..) => Split::Declined,
        }
    }
}

/// Replays every event of `m` left after those already in `st`, in two halves on two threads
/// when there are enough of them. `chunks` gives the tail's live map its memory.
pub(crate) fn replay_rest(m: &mut Merger<'_>, st: &mut Counts<u64>, chunks: Option<&Arc<ChunkSource>>) -> Split {
    let starts = m.payload_starts();
    match cut(&starts, st.max_key().0) {
        Some(cut) => replay_split(m, st, cut, &starts, chunks),
        None => Split::Declined,
    }
}

/// Replays the events of `m` before timestamp `cut` on this thread and the others on another.
fn replay_split(
    m: &mut Merger<'_>,
    st: &mut Counts<u64>,
    cut: u64,
    starts: &[Vec<(Option<u64>, usize)>],
    chunks: Option<&Arc<ChunkSource>>,
) -> Split {
    let Some(mut tail) = m.tail(cut, starts) else { return Split::Declined };
    let starts = tail.heads();
    // Both processors replay now: decoding ahead for one of them would take the other's time
    // and pack events only to unpack them (on the 8-thread churn trace, 4% faster without).
    m.stop_decoding_ahead();
    let mut rest: Counts<u64, true> = Counts::new(Weights::new(0));
    if let Some(c) = chunks {
        rest.use_chunks(c.clone());
    }
    // The tail's pending releases come over as it goes, and are settled here once the head is
    // done, while the tail goes on.
    let (to_join, batches) = std::sync::mpsc::channel();
    rest.send_pending(to_join);
    let (rest, tail_malformed, join) = std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("heaplens-replay".into())
            .spawn_scoped(scope, move || {
                tail.run(&mut rest, u64::MAX);
                rest.flush_pending();
                (rest, tail.malformed())
            })
            .expect("cannot start a thread");
        m.run(st, cut - 1);
        let mut join = Join::new(st);
        for batch in batches {
            join.settle(st, &batch);
        }
        let (rest, malformed) = other.join().expect("the tail replay panicked");
        (rest, malformed, join)
    });
    // The tail must have started where this replay stopped, and a damaged payload may have
    // been counted by both.
    if m.heads() != starts || tail_malformed > 0 || !st.absorb(rest, join) {
        return Split::Failed;
    }
    Split::Joined
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Replay;
    use heaplens_interpret::decode::payload::{tagged, ROWS};
    use heaplens_trace::{Event, EventEncoder, Op, TimeMap};

    /// A program of `threads` threads taking turns in random order: allocations (some failed,
    /// some right away released), reallocations, releases, `free(NULL)`, releases of unknown
    /// addresses, and, with `forget`, blocks whose release is not recorded, so that the
    /// allocator's next block at the same address overwrites them. Addresses come from a small
    /// pool, as allocators reuse them. Each thread's events go into payloads of 40 events. With
    /// an odd `seed` the last 100 events only allocate.
    fn program(threads: u32, events: usize, forget: bool, seed: u64) -> Vec<(u32, Vec<Vec<u8>>)> {
        program_ticks(threads, events, forget, seed, 1, 1)
    }

    /// [`program`] with timestamps divided by `tick`: events of different threads at the same
    /// time; and with `burst` > 1, each event's thread that of the event before but for one
    /// time in `burst` (long runs of one thread, as when the other waits).
    fn program_ticks(
        threads: u32,
        events: usize,
        forget: bool,
        seed: u64,
        tick: u64,
        burst: u64,
    ) -> Vec<(u32, Vec<Vec<u8>>)> {
        let mut x = seed;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut free: Vec<u64> = (0..200).map(|i| 0x5555_0000_1000 + i * 48).collect();
        let mut live: Vec<u64> = Vec::new();
        let mut out: Vec<(u32, Vec<Vec<u8>>)> = (0..threads).map(|t| (100 + t, Vec::new())).collect();
        let mut bufs: Vec<(Vec<u8>, usize, EventEncoder, usize)> = Vec::new();
        for t in 0..threads {
            let (mut buf, mut pos, mut enc) = (vec![0u8; 1 << 16], 0, EventEncoder::default());
            enc.begin(&mut buf, &mut pos, 100 + t);
            bufs.push((buf, pos, enc, 0));
        }
        let mut t = 0;
        for i in 0..events as u64 {
            if burst <= 1 || rnd(burst) == 0 {
                t = rnd(u64::from(threads)) as usize;
            }
            let ts = (1000 + i * 3 + rnd(2)) / tick;
            let (buf, pos, enc, n) = &mut bufs[t];
            let stack = rnd(7) as u32 + 1;
            let size = [8, 24, 40, 100, 700, 3000, 70_000][rnd(7) as usize];
            // Odd seeds end growing: the peak is in the last events, after the last release.
            let op = if seed % 2 == 1 && i + 100 > events as u64 { 0 } else { rnd(20) };
            match op {
                0..=7 if !free.is_empty() => {
                    let a = free.swap_remove(rnd(free.len() as u64) as usize);
                    enc.alloc(buf, pos, Op::Malloc, ts, a, size, size, stack);
                    live.push(a);
                }
                8 => enc.alloc(buf, pos, Op::Malloc, ts, 0, 1 << 40, 0, stack),
                9..=10 if !live.is_empty() && !free.is_empty() => {
                    let old = live.swap_remove(rnd(live.len() as u64) as usize);
                    let a = free.swap_remove(rnd(free.len() as u64) as usize);
                    enc.realloc(buf, pos, Op::Realloc, ts, old, a, size, size, stack);
                    free.push(old);
                    live.push(a);
                }
                11 => enc.dealloc(buf, pos, Op::Free, ts, 0),
                12 => enc.dealloc(buf, pos, Op::Free, ts, 0x7777_0000_0000 + rnd(4) * 64),
                13 if forget && !live.is_empty() => {
                    let a = live.swap_remove(rnd(live.len() as u64) as usize);
                    free.push(a);
                    continue;
                }
                _ if !live.is_empty() => {
                    // Mostly the newest block: the allocating thread often releases it next.
                    let k = if rnd(2) == 0 { live.len() - 1 } else { rnd(live.len() as u64) as usize };
                    let a = live.swap_remove(k);
                    enc.dealloc(buf, pos, Op::Free, ts, a);
                    free.push(a);
                }
                _ => continue,
            }
            *n += 1;
            if *n == 40 {
                out[t].1.push(tagged(buf[..*pos].to_vec(), ROWS));
                (*pos, *n) = (0, 0);
                enc.begin(buf, pos, 100 + t as u32);
            }
        }
        for (t, (buf, pos, _, n)) in bufs.into_iter().enumerate() {
            if n > 0 {
                out[t].1.push(tagged(buf[..pos].to_vec(), ROWS));
            }
        }
        out.retain(|(_, p)| !p.is_empty());
        out
    }

    fn sequential(threads: &[(u32, Vec<Vec<u8>>)]) -> Replay {
        let mut st = State::new(0);
        st.run(&mut Merger::borrowed(threads), u64::MAX);
        st.finish(&TimeMap::default())
    }

    /// Splits at `cut`; the counters when joined.
    fn split(threads: &[(u32, Vec<Vec<u8>>)], cut: u64) -> Option<Replay> {
        let mut m = Merger::borrowed(threads);
        let mut st = State::new(0);
        let State::Exact(c) = &mut st else { unreachable!() };
        let starts = m.payload_starts();
        match replay_split(&mut m, c, cut, &starts, None) {
            Split::Joined => Some(st.finish(&TimeMap::default())),
            Split::Failed => None,
            Split::Declined => panic!("payloads are in time order"),
        }
    }

    #[test]
    fn joined_halves_count_as_one_replay() {
        for seed in 1..4 {
            let threads = program(3, 3000, false, seed);
            let want = format!("{:?}", sequential(&threads));
            // Every cut, at and between event timestamps, before the first and after the last.
            for cut in (990..10_010).step_by(13) {
                let got = split(&threads, cut).unwrap_or_else(|| panic!("seed {seed} cut {cut}: not joined"));
                assert_eq!(format!("{got:?}"), want, "seed {seed} cut {cut}");
            }
        }
    }

    /// The merger's replay (runs of one thread, two threads stepped together, the queue of
    /// heads) counts what one replay of every event in (timestamp, thread) order does.
    #[test]
    fn merge_order_is_timestamp_then_thread() {
        let cases = [(1, 1, 1, 1), (2, 1, 2, 1), (2, 8, 3, 1), (3, 4, 5, 1), (5, 16, 7, 1), (40, 2, 9, 1)];
        // Runs of one thread longer than the pair loop keeps (`LONG_RUN`), and ties among them.
        let bursts = [(2, 1, 11, 40), (2, 8, 12, 60), (3, 1, 13, 30), (2, 32, 14, 100)];
        for (threads, tick, seed, burst) in cases.into_iter().chain(bursts) {
            let program = program_ticks(threads, 6000, false, seed, tick, burst);
            let mut all: Vec<(u64, usize, usize, Event)> = Vec::new();
            for (t, (_, payloads)) in program.iter().enumerate() {
                for p in payloads {
                    let mut events = Vec::new();
                    assert!(!heaplens_interpret::decode::rows::decode_all(
                        heaplens_interpret::decode::payload::untag(p).0,
                        &mut events
                    ));
                    for e in events {
                        all.push((e.ts, t, all.len(), e));
                    }
                }
            }
            all.sort_unstable_by_key(|&(ts, t, i, _)| (ts, t, i));
            let want = crate::replay::replay(all.into_iter().map(|(.., e)| e));
            let got = sequential(&program);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{threads} threads, tick {tick}, burst {burst}");
        }
    }

    #[test]
    fn an_overwrite_across_the_cut_is_not_joined() {
        let (mut joined, mut failed) = (0, 0);
        for seed in 1..4 {
            let threads = program(2, 3000, true, seed);
            let r = sequential(&threads);
            assert!(r.overwritten > 10.0, "the program overwrites blocks");
            let want = format!("{r:?}");
            for cut in (990..10_010).step_by(11) {
                match split(&threads, cut) {
                    Some(got) => {
                        joined += 1;
                        assert_eq!(format!("{got:?}"), want, "seed {seed} cut {cut}");
                    }
                    None => failed += 1,
                }
            }
        }
        // Cuts before the first overwrite join; most others cannot.
        assert!(joined > 0 && failed > joined, "{joined} joined, {failed} failed");
    }
}
