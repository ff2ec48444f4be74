//! The CPU profile's rows, as `heaplens report --cpu --format json` writes them. Times are
//! CPU nanoseconds; a sample stands for one sampling period or more (see
//! [`heaplens_interpret::cpu::CpuSample::cpu_ns`]).

use serde::Serialize;

use crate::model::{ProcessInfo, TraceInfo};

/// `heaplens report --cpu`: where the profiled program's threads spent their CPU time.
#[derive(Debug, Clone, Serialize)]
pub struct CpuReport {
    /// The trace file and its condition.
    pub trace: TraceInfo,
    /// The profiled process.
    pub process: ProcessInfo,
    /// Samples per second of CPU time asked for (`heaplens run --cpu=HZ`).
    pub rate_hz: u64,
    /// Sampling period, CPU nanoseconds.
    pub period_ns: u64,
    /// Samples taken.
    pub samples: u64,
    /// CPU time they stand for, nanoseconds.
    pub cpu_ns: u64,
    /// Samples the monitor did not take: the thread was running the monitor's own code
    /// (recording an allocation: that time is not the program's), or its ring was full.
    pub samples_dropped: u64,
    /// What the monitor itself cost, from its End record (`None`: the program did not end
    /// cleanly, so the monitor wrote none).
    pub monitor: Option<MonitorCost>,
    /// Per thread, most CPU first.
    pub threads: Vec<CpuThread>,
    /// gprof's flat profile: per function, most self time first.
    pub flat: Vec<FlatRow>,
    /// The call graph in gprof's layout (cycles merged), most inclusive time first; `index`
    /// is the position.
    pub call_graph: Vec<CpuGraphEntry>,
}

/// The monitor's own time beside the program's, as measured by the monitor.
#[derive(Debug, Clone, Serialize)]
pub struct MonitorCost {
    /// Wall nanoseconds the program's threads spent in the sampling signal handler (the
    /// kernel's delivery of the signal, a microsecond or two a sample, not included).
    pub sampler_ns: u64,
    /// CPU nanoseconds of the monitor's writer thread.
    pub writer_cpu_ns: u64,
    /// Both, as a share of the program's sampled CPU time, percent.
    pub percent: f64,
}

/// One thread's CPU time.
#[derive(Debug, Clone, Serialize)]
pub struct CpuThread {
    /// Kernel thread id.
    pub tid: u32,
    /// Its name, when it had one.
    pub name: String,
    /// Samples taken on it.
    pub samples: u64,
    /// CPU time, nanoseconds.
    pub cpu_ns: u64,
    /// Share of all CPU time sampled, percent.
    pub percent: f64,
    /// The function it spent most self time in.
    pub top_function: String,
}

/// One function of the flat profile.
#[derive(Debug, Clone, Serialize)]
pub struct FlatRow {
    /// Function name.
    pub function: String,
    /// Its module's basename.
    pub module: Option<String>,
    /// Samples whose innermost frame is this function.
    pub self_samples: u64,
    /// Their CPU time, nanoseconds.
    pub self_ns: u64,
    /// `self_ns` as a share of all CPU time sampled, percent.
    pub self_percent: f64,
    /// Running sum of `self_percent` down the table (gprof's cumulative column).
    pub cumulative_percent: f64,
    /// Samples with this function anywhere on the stack (each counted once).
    pub inclusive_samples: u64,
    /// Their CPU time, nanoseconds.
    pub inclusive_ns: u64,
    /// `inclusive_ns` as a share of all CPU time sampled, percent.
    pub inclusive_percent: f64,
}

/// One entry of the CPU call graph: a function, or a cycle merged into one node.
#[derive(Debug, Clone, Serialize)]
pub struct CpuGraphEntry {
    /// Position in `call_graph`.
    pub index: usize,
    /// Function name, or `<cycle N>`.
    pub name: String,
    /// Module of a single function.
    pub module: Option<String>,
    /// The functions merged into this entry.
    pub members: Vec<String>,
    /// A cycle of functions (or a function calling itself).
    pub is_cycle: bool,
    /// CPU time with the entry innermost, nanoseconds.
    pub self_ns: u64,
    /// CPU time with the entry on the stack, nanoseconds (each sample once).
    pub inclusive_ns: u64,
    /// `inclusive_ns` as a share of all CPU time sampled, percent.
    pub inclusive_percent: f64,
    /// Samples with the entry on the stack.
    pub samples: u64,
    /// Extra frames of the entry in those stacks (recursion).
    pub recursive_samples: u64,
    /// Callers, most time first.
    pub callers: Vec<CpuGraphEdge>,
    /// Callees, most time first.
    pub callees: Vec<CpuGraphEdge>,
}

/// A caller or callee line of a [`CpuGraphEntry`].
#[derive(Debug, Clone, Serialize)]
pub struct CpuGraphEdge {
    /// The other entry's name.
    pub name: String,
    /// The other entry's index.
    pub index: usize,
    /// CPU time spent through this edge (in the callee and below), nanoseconds.
    pub ns: u64,
    /// Of it, time in the callee itself.
    pub self_ns: u64,
    /// Samples through this edge.
    pub samples: u64,
    /// All samples through the callee (gprof's called/total).
    pub total_samples: u64,
}
