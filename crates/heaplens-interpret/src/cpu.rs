//! CPU-time samples (`heaplens run --cpu`), as every view reads them: per thread, in time
//! order, each with its call stack (a node of [`Trace::stacks`]), the CPU time it stands for
//! and its time on the trace's clock. Symbolize their stacks with
//! [`crate::paths::resolve_samples`], which keeps the frames an allocation's path cuts (time
//! spent in `malloc` is the program's).

use crate::Trace;

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSample {
    /// When the thread's CPU-time timer fired, `CLOCK_MONOTONIC` nanoseconds (as events' times).
    pub ts_ns: u64,
    /// The interrupted call stack: a trie node, innermost frame the interrupted instruction.
    pub stack: u32,
    /// CPU time it stands for, nanoseconds (the sampling period times the timer expirations
    /// the signal carried).
    pub cpu_ns: u64,
}

/// One thread's samples.
#[derive(Debug, Clone, Default)]
pub struct ThreadSamples {
    /// Kernel thread id.
    pub tid: u32,
    /// Its samples, in time order.
    pub samples: Vec<CpuSample>,
}

impl ThreadSamples {
    /// CPU time sampled on this thread, nanoseconds.
    pub fn cpu_ns(&self) -> u64 {
        self.samples.iter().fold(0u64, |a, s| a.saturating_add(s.cpu_ns))
    }
}

/// Every sample of a trace.
#[derive(Debug, Clone, Default)]
pub struct CpuSamples {
    /// The sampling period, nanoseconds of CPU time (0 when the trace has no samples).
    pub period_ns: u64,
    /// Threads with samples, in order of first appearance in the trace.
    pub threads: Vec<ThreadSamples>,
}

impl CpuSamples {
    /// Gathers the samples of `t` by thread.
    pub fn of(t: &Trace) -> Self {
        let mut out = CpuSamples::default();
        for rec in &t.samples {
            out.period_ns = rec.period_ns;
            let i = match out.threads.iter().position(|th| th.tid == rec.tid) {
                Some(i) => i,
                None => {
                    out.threads.push(ThreadSamples { tid: rec.tid, samples: Vec::new() });
                    out.threads.len() - 1
                }
            };
            out.threads[i].samples.extend(rec.samples.iter().map(|s| CpuSample {
                ts_ns: t.clock.to_ns(s.ts),
                stack: s.stack,
                // At most an hour a sample (a period of a second, a weight of 3600 timer
                // expiries merged): larger is damage, and sums of it would overflow.
                cpu_ns: rec.period_ns.saturating_mul(u64::from(s.weight)).min(MAX_SAMPLE_NS),
            }));
        }
        for th in &mut out.threads {
            th.samples.sort_by_key(|s| s.ts_ns);
        }
        out
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.threads.iter().all(|t| t.samples.is_empty())
    }

    /// Samples taken.
    pub fn count(&self) -> u64 {
        self.threads.iter().map(|t| t.samples.len() as u64).sum()
    }

    /// CPU time sampled, nanoseconds.
    pub fn cpu_ns(&self) -> u64 {
        self.threads.iter().fold(0u64, |a, t| a.saturating_add(t.cpu_ns()))
    }

    /// `(stack, samples, cpu_ns)` per distinct stack over all threads, by stack id.
    pub fn by_stack(&self) -> Vec<(u32, u64, u64)> {
        let mut all: Vec<(u32, u64)> =
            self.threads.iter().flat_map(|t| t.samples.iter().map(|s| (s.stack, s.cpu_ns))).collect();
        all.sort_unstable_by_key(|&(s, _)| s);
        let mut out: Vec<(u32, u64, u64)> = Vec::new();
        for (stack, ns) in all {
            match out.last_mut() {
                Some((s, n, t)) if *s == stack => {
                    *n += 1;
                    // Saturating: a damaged trace's period and weight can make any number.
                    *t = t.saturating_add(ns);
                }
                _ => out.push((stack, 1, ns)),
            }
        }
        out
    }
}

/// The most CPU time one sample stands for, nanoseconds (see [`CpuSamples::of`]).
const MAX_SAMPLE_NS: u64 = 3_600_000_000_000;

/// Whether the trace at `path` was recorded with `heaplens run --cpu-only` (CPU samples, no
/// allocations), from its first block. False when it cannot be read.
pub fn recorded_cpu_only(path: &std::path::Path) -> bool {
    let Ok(mut r) = heaplens_trace::TraceReader::open(path) else { return false };
    match r.next_block() {
        Ok(Some((heaplens_trace::BlockKind::Process, p))) => {
            heaplens_trace::ProcessRecord::decode(&p).is_ok_and(|p| p.cpu_only)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heaplens_trace::record::{Sample, SampleRecord};

    #[test]
    fn groups_by_thread_and_stack() {
        let mut t = Trace::default();
        let rec = |tid, samples: &[(u64, u32, u32)]| SampleRecord {
            tid,
            period_ns: 1000,
            samples: samples.iter().map(|&(ts, stack, weight)| Sample { ts, stack, weight }).collect(),
        };
        t.samples.push(rec(7, &[(10, 3, 1), (20, 4, 2)]));
        t.samples.push(rec(8, &[(15, 3, 1)]));
        t.samples.push(rec(7, &[(30, 3, 4)]));
        let c = CpuSamples::of(&t);
        assert_eq!(c.threads.len(), 2);
        assert_eq!(c.threads[0].tid, 7);
        assert_eq!(c.threads[0].cpu_ns(), 7000);
        assert_eq!(c.count(), 4);
        assert_eq!(c.cpu_ns(), 8000);
        assert_eq!(c.by_stack(), vec![(3, 3, 6000), (4, 1, 2000)]);
    }
}
