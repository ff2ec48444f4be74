//! The Firefox Profiler's processed profile (written by the fxprof-processed-profile crate):
//! every allocation and deallocation as a native allocation sample (weight in bytes, negative
//! for deallocations, with the block's address, so the profiler's "Retained memory" view
//! pairs them), and a counter track of the bytes in use. Frames are labels symbolized here
//! (inlined functions included), so the profile needs no symbol server.
//!
//! The crate puts every allocation sample of a process on one thread (its first), as the Gecko
//! profiler does: a block can be released on another thread than the one that allocated it.
//! A deallocation carries its allocation's stack (the trace records no stack for releases), so
//! the call tree of "retained" memory nets out.
//!
//! The CPU samples of `heaplens run --cpu` go on the track of the thread they were taken on
//! (its `samples` table: the call tree, flame graph and activity graph of that thread), each
//! with its time, its stack (the paths of [`resolve_samples`]: the interrupted function
//! innermost, the runtime's frames outside `main` or a thread's start routine cut), its CPU
//! delta (the nanoseconds of CPU time it stands for) and a weight of the sampling periods it
//! stands for (1 unless the kernel coalesced timer expirations), the profile's interval being
//! the sampling period.

use std::collections::HashMap;
use std::io::{self, Write};

use fxprof_processed_profile::{
    CategoryColor, CategoryPairHandle, CpuDelta, FrameFlags, FrameInfo, ProcessHandle, Profile, ReferenceTimestamp,
    SamplingInterval, StackHandle, ThreadHandle, Timestamp,
};
use heaplens_interpret::cpu::CpuSamples;
use heaplens_interpret::paths::{resolve_samples, Naming};
use heaplens_interpret::symbolize::{Frame, Symbolizer};
use heaplens_interpret::view::{Block, Release, View};
use heaplens_interpret::Trace;

/// The memory counter gets a sample at most this often (nanoseconds of trace time).
const COUNTER_STEP_NS: u64 = 1_000_000;

/// Allocation samples at most: the crate holds the profile in memory until it is written
/// (about 45 bytes a sample: 432 MiB for the 10^7 events of the 2-thread churn), and the
/// profiler itself loads it in a browser tab. Later events are left out, with a warning.
pub const MAX_SAMPLES: u64 = 10_000_000;

/// Frames handed to the profile's stack tables at most, over all stacks (the crate keeps an
/// index of each table's entries, about 100 bytes an entry at its largest: 4,000 stacks 1,024
/// frames deep took 415 MB). A stack met once it is reached is the one frame [`LEFT_OUT`].
pub const MAX_STACK_FRAMES: usize = 1_000_000;

/// The frame of a stack left out past [`MAX_STACK_FRAMES`].
pub const LEFT_OUT: &str = "[stack left out: the profile holds 1,000,000 frames]";

/// Builds the profile as the replay goes.
pub struct Firefox<'t> {
    trace: &'t Trace,
    sym: Box<dyn Symbolizer>,
    profile: Profile,
    process: ProcessHandle,
    thread: ThreadHandle,
    category: CategoryPairHandle,
    /// The memory track (none for a trace recorded with `--cpu-only`, which has no allocations).
    counter: Option<fxprof_processed_profile::CounterHandle>,
    start_ns: u64,
    stacks: HashMap<u32, Option<StackHandle>>,
    frames: Vec<Frame>,
    /// Bytes in use not yet given to the counter, and when it last got a sample.
    pending: (i64, u32, u64),
    /// The highest the bytes in use went since that sample (as a change from it), after how
    /// many operations, and when: a step of the track that ends lower still shows its top.
    top: (i64, u32, u64),
    /// Allocation samples and their bytes (for the caller's summary).
    pub allocations: u64,
    /// Bytes allocated.
    pub bytes: u64,
    /// Samples added, and events left out past [`MAX_SAMPLES`].
    samples: u64,
    left_out: u64,
    /// Distinct stacks of the CPU samples, over the threads.
    cpu_stacks: usize,
    /// Frames handed to the stack tables, and stacks left out past [`MAX_STACK_FRAMES`].
    stack_frames: usize,
    stacks_left_out: usize,
}

/// The stack `parent` with a frame labelled `label` on top, on `thread`'s tables.
fn label_stack(
    profile: &mut Profile,
    thread: ThreadHandle,
    category: CategoryPairHandle,
    parent: Option<StackHandle>,
    label: &str,
) -> StackHandle {
    let info = FrameInfo {
        frame: fxprof_processed_profile::Frame::Label(profile.intern_string(label)),
        category_pair: category,
        flags: FrameFlags::empty(),
    };
    let frame = profile.intern_frame(thread, info);
    profile.intern_stack(thread, parent, frame)
}

impl<'t> Firefox<'t> {
    /// A profile of trace `t`, symbolized by `sym`.
    pub fn new(t: &'t Trace, sym: Box<dyn Symbolizer>) -> Self {
        let (name, pid, start_unix, start_ns) = match &t.process {
            Some(p) => {
                let name = p.exe.file_name().unwrap_or(p.exe.as_os_str()).to_string_lossy().into_owned();
                (name, p.pid, p.start_unix_ns, p.start_mono_ns)
            }
            None => ("program".to_string(), 0, 0, 0),
        };
        let mut profile = Profile::new(
            &name,
            ReferenceTimestamp::from_millis_since_unix_epoch(start_unix as f64 / 1e6),
            SamplingInterval::from_millis(1),
        );
        let process = profile.add_process(&name, pid, Timestamp::from_nanos_since_reference(0));
        let thread = profile.add_thread(process, pid, Timestamp::from_nanos_since_reference(0), true);
        profile.set_thread_name(thread, &name);
        let category = profile.add_category("Allocation", CategoryColor::Orange).into();
        let cpu_only = t.process.as_ref().is_some_and(|p| p.cpu_only);
        let counter =
            (!cpu_only).then(|| profile.add_counter(process, "malloc", "Memory", "Bytes in use (requested sizes)"));
        Firefox {
            trace: t,
            sym,
            profile,
            process,
            thread,
            category,
            counter,
            start_ns,
            stacks: HashMap::new(),
            frames: Vec::new(),
            pending: (0, 0, 0),
            top: (0, 0, 0),
            allocations: 0,
            bytes: 0,
            samples: 0,
            left_out: 0,
            cpu_stacks: 0,
            stack_frames: 0,
            stacks_left_out: 0,
        }
    }

    /// Adds the CPU samples of the trace (`samples`, from [`CpuSamples::of`] on it), each
    /// thread's on its own track: the process's main thread (the allocations' thread) for
    /// those of the main thread, a thread of the profile for each other sampled thread. Call it
    /// once, before or after the replay.
    pub fn add_cpu_samples(&mut self, samples: &CpuSamples, progress: bool) {
        if samples.is_empty() || samples.period_ns == 0 {
            return;
        }
        self.profile.set_interval(SamplingInterval::from_nanos(samples.period_ns));
        let by_stack = samples.by_stack();
        let ids: Vec<u32> = by_stack.iter().map(|&(s, _, _)| s).collect();
        // Full names, as the allocation samples' frames are named.
        let naming = Naming { full_names: true, ..Naming::default() };
        let trace = self.trace;
        let (frames, paths) = resolve_samples(&trace.stacks, &ids, self.sym.as_mut(), progress, naming);
        let category: CategoryPairHandle = self.profile.add_category("CPU", CategoryColor::Blue).into();
        let pid = trace.process.as_ref().map(|p| p.pid);
        let program: String = trace.process.as_ref().map_or("program".into(), |p| {
            p.exe.file_name().unwrap_or(p.exe.as_os_str()).to_string_lossy().into_owned()
        });
        for th in &samples.threads {
            let Some(first) = th.samples.first() else { continue };
            let thread = if Some(th.tid) == pid {
                self.thread
            } else {
                let start = self.time(first.ts_ns.saturating_sub(samples.period_ns));
                let h = self.profile.add_thread(self.process, th.tid, start, false);
                // The last name the thread was given; a thread never named has the program's.
                let name = trace.thread_names.iter().rev().find(|n| n.tid == th.tid).map(|n| n.name.as_str());
                self.profile.set_thread_name(h, name.unwrap_or(&program));
                h
            };
            // The profile's stacks are per thread: interned again on each.
            let mut stacks: HashMap<usize, Option<StackHandle>> = HashMap::new();
            let mut newest: Option<StackHandle> = None;
            for s in &th.samples {
                let stack = match ids.binary_search(&s.stack) {
                    Ok(i) => *stacks.entry(i).or_insert_with(|| {
                        let path = paths.get(i);
                        let labels: Vec<&str> = if path.is_empty() {
                            vec!["[unknown]"]
                        } else if self.stack_frames >= MAX_STACK_FRAMES {
                            self.stacks_left_out += 1;
                            vec![LEFT_OUT]
                        } else {
                            path.iter().rev().map(|&site| frames.name(frames.function_of(site))).collect()
                        };
                        // Frame by frame, to count the entries that are new (handles grow).
                        let mut stack = None;
                        for l in labels {
                            let s = label_stack(&mut self.profile, thread, category, stack, l);
                            if newest.is_none_or(|n| s > n) {
                                newest = Some(s);
                                self.stack_frames += 1;
                            }
                            stack = Some(s);
                        }
                        stack
                    }),
                    Err(_) => None,
                };
                let periods = (s.cpu_ns / samples.period_ns).clamp(1, i32::MAX as u64) as i32;
                let t = self.time(s.ts_ns);
                self.profile.add_sample(thread, t, stack, CpuDelta::from_nanos(s.cpu_ns), periods);
            }
            self.cpu_stacks += stacks.len();
        }
    }

    fn time(&self, ts: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(ts.saturating_sub(self.start_ns))
    }

    /// The profile's stack for trie node `id`: its return addresses outermost first, each as
    /// its frames (inlined ones inside the function holding them).
    fn stack(&mut self, id: u32) -> Option<StackHandle> {
        if let Some(&s) = self.stacks.get(&id) {
            return s;
        }
        let addrs: Vec<(u32, u64)> = self.trace.stacks.walk(id).collect();
        if self.stack_frames >= MAX_STACK_FRAMES {
            self.stacks_left_out += 1;
            let stack = Some(label_stack(&mut self.profile, self.thread, self.category, None, LEFT_OUT));
            self.stacks.insert(id, stack);
            return stack;
        }
        let mut parent = None;
        // From the outermost node in, reusing the stacks of prefixes already built.
        for &(node, addr) in addrs.iter().rev() {
            if let Some(&s) = self.stacks.get(&node) {
                parent = s;
                continue;
            }
            self.frames.clear();
            self.sym.symbolize(addr, &mut self.frames);
            for f in self.frames.iter().rev() {
                let label = match &f.function {
                    Some(n) => n.clone(),
                    None => format!("0x{addr:x}"),
                };
                parent = Some(label_stack(&mut self.profile, self.thread, self.category, parent, &label));
                self.stack_frames += 1;
            }
            self.stacks.insert(node, parent);
        }
        parent
    }

    fn count(&mut self, ts: u64, delta: i64) {
        self.pending.0 += delta;
        self.pending.1 += 1;
        if self.pending.0 > self.top.0 {
            self.top = (self.pending.0, self.pending.1, ts);
        }
        if ts >= self.pending.2 + COUNTER_STEP_NS {
            self.flush_counter(ts);
        }
    }

    /// Gives the counter what is pending at `ts`: a sample at the step's top first when the
    /// bytes in use came down from it since (so that the track reaches every peak), then one
    /// at `ts`.
    fn flush_counter(&mut self, ts: u64) {
        if let Some(counter) = self.counter {
            let (top, top_ops, top_ts) = self.top;
            let (mut rest, mut ops) = (self.pending.0, self.pending.1);
            if top > rest && top_ts < ts {
                let t = self.time(top_ts);
                self.profile.add_counter_sample(counter, t, top as f64, top_ops);
                (rest, ops) = (rest - top, ops - top_ops);
            }
            let t = self.time(ts);
            self.profile.add_counter_sample(counter, t, rest as f64, ops);
        }
        self.pending = (0, 0, ts);
        self.top = (0, 0, ts);
    }

    /// Writes the profile as JSON.
    pub fn write(mut self, w: &mut dyn Write, end_ns: u64) -> io::Result<()> {
        if self.pending.1 > 0 {
            self.flush_counter(end_ns.max(self.pending.2));
        }
        serde_json::to_writer(w, &self.profile).map_err(io::Error::other)
    }

    /// Distinct stacks in the profile: the allocations' (trie nodes on the way to them
    /// included), and the CPU samples' on each thread.
    pub fn stacks(&self) -> usize {
        self.stacks.len() + self.cpu_stacks
    }

    /// Symbolization problems met, and events left out.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.sym.warnings();
        if self.left_out > 0 {
            w.push(format!(
                "the Firefox profile holds the first {MAX_SAMPLES} events; {} later ones were left out \
                 (--format pprof or parquet hold them all)",
                self.left_out
            ));
        }
        if self.stacks_left_out > 0 {
            w.push(format!(
                "{} stacks are the one frame \"{LEFT_OUT}\": they came after the profile's stacks \
                 held {MAX_STACK_FRAMES} frames (--format pprof or parquet hold them all)",
                self.stacks_left_out
            ));
        }
        w
    }

    /// Whether there is room for one more sample.
    fn room(&mut self) -> bool {
        if self.samples < MAX_SAMPLES {
            self.samples += 1;
            true
        } else {
            self.left_out += 1;
            false
        }
    }
}

impl View for Firefox<'_> {
    fn allocation(&mut self, b: &Block) {
        if !self.room() {
            return;
        }
        let stack = self.stack(b.stack);
        let t = self.time(b.ts);
        self.profile.add_allocation_sample(self.thread, t, stack, b.addr, b.size as i64);
        self.allocations += 1;
        self.bytes += b.size;
        self.count(b.ts, b.size as i64);
    }

    fn deallocation(&mut self, r: &Release, b: &Block) {
        if !self.room() {
            return;
        }
        let stack = self.stack(b.stack);
        let t = self.time(r.ts);
        self.profile.add_allocation_sample(self.thread, t, stack, b.addr, -(b.size as i64));
        self.count(r.ts, -(b.size as i64));
    }

    fn overwritten(&mut self, b: &Block) {
        self.count(b.ts, -(b.size as i64));
    }
}
