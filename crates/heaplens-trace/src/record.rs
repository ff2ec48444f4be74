//! The non-event records and their payload layouts. Every integer is a LEB128 varint
//! ([`crate::varint`]); strings and byte strings are length-prefixed.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::varint::{put, put_bytes, zigzag, Cursor};

/// Decoding failed: the payload ended early or held an impossible value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed {0} record")]
pub struct Malformed(pub &'static str);

/// A path stored as bytes.
fn path(b: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

/// Who was profiled. Payload:
/// `pid ppid start_unix_ns start_mono_ns exe argc argv* max_frames time_source sample_rate`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessRecord {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Wall-clock time the monitor started, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// `CLOCK_MONOTONIC` when the monitor started, nanoseconds; event timestamps use this clock.
    pub start_mono_ns: u64,
    /// Path of the executable (`/proc/self/exe`), as the bytes the kernel gives (not always
    /// UTF-8).
    pub exe: PathBuf,
    /// Command line, argv\[0\] first.
    pub argv: Vec<String>,
    /// Stack depth cap the monitor used, in frames.
    pub max_frames: u32,
    /// What event timestamps count (see [`crate::clock`]).
    pub time_source: crate::TimeSource,
    /// Mean bytes between sampled allocations, or 0 when every allocation is recorded. When
    /// set, allocations are sampled as a Poisson process over bytes (as tcmalloc, jemalloc and
    /// Go do): an allocation of `s` bytes is recorded with probability `1 - exp(-s / rate)`,
    /// and only the deallocations of recorded blocks are recorded.
    pub sample_rate: u64,
    /// CPU-time samples per second of each thread's CPU time (`heaplens run --cpu=HZ`), 0
    /// when CPU time was not sampled (and in traces older than this field).
    pub cpu_hz: u32,
    /// Only CPU time was sampled (`--cpu-only`): no allocation was recorded.
    pub cpu_only: bool,
    /// The monitor was loaded into the process while it ran (`heaplens attach`): recording
    /// started at `start_mono_ns`, not at the program's start, and blocks allocated before
    /// that are released unseen (false in traces older than this field).
    pub attached: bool,
}

impl ProcessRecord {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        put(&mut o, self.pid.into());
        put(&mut o, self.ppid.into());
        put(&mut o, self.start_unix_ns);
        put(&mut o, self.start_mono_ns);
        put_bytes(&mut o, self.exe.as_os_str().as_bytes());
        put(&mut o, self.argv.len() as u64);
        for a in &self.argv {
            put_bytes(&mut o, a.as_bytes());
        }
        put(&mut o, self.max_frames.into());
        o.push(self.time_source.to_u8());
        put(&mut o, self.sample_rate);
        put(&mut o, self.cpu_hz.into());
        o.push(self.cpu_only.into());
        o.push(self.attached.into());
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("process");
        let mut c = Cursor::new(p);
        let pid = c.var().ok_or(e)? as u32;
        let ppid = c.var().ok_or(e)? as u32;
        let start_unix_ns = c.var().ok_or(e)?;
        let start_mono_ns = c.var().ok_or(e)?;
        let exe = path(c.bytes().ok_or(e)?);
        let argc = c.var().ok_or(e)?;
        let mut argv = Vec::new();
        for _ in 0..argc {
            argv.push(c.string().ok_or(e)?);
        }
        let max_frames = c.var().ok_or(e)? as u32;
        let time_source = crate::TimeSource::from_u8(c.u8().unwrap_or(0));
        let sample_rate = c.var().unwrap_or(0);
        // Later fields: absent from older traces.
        let cpu_hz = c.var().unwrap_or(0) as u32;
        let cpu_only = c.u8().unwrap_or(0) == 1;
        let attached = c.u8().unwrap_or(0) == 1;
        Ok(Self {
            pid,
            ppid,
            start_unix_ns,
            start_mono_ns,
            exe,
            argv,
            max_frames,
            time_source,
            sample_rate,
            cpu_hz,
            cpu_only,
            attached,
        })
    }
}

/// One `PT_LOAD` segment of a module, as stated in its program headers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    /// `p_vaddr`: the segment's address before relocation; add the module's `base` for the
    /// address in the process.
    pub vaddr: u64,
    /// `p_memsz`, bytes.
    pub memsz: u64,
    /// `p_flags` (`PF_X` = 1, `PF_W` = 2, `PF_R` = 4).
    pub flags: u32,
}

/// A module (the executable, a shared library, the vDSO) mapped into or out of the process.
/// Payload of a Modules block: `count (loaded:u8 ts base path build_id nseg (vaddr memsz flags)*)*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleRecord {
    /// `CLOCK_MONOTONIC` nanoseconds when the monitor saw the change.
    pub ts: u64,
    /// True for a load, false for an unload.
    pub loaded: bool,
    /// Load bias (`dlpi_addr`): process address minus stated address.
    pub base: u64,
    /// File path as the loader reports it (the executable's is resolved from `/proc/self/exe`),
    /// its bytes as they are (not always UTF-8).
    pub path: PathBuf,
    /// GNU build id from `NT_GNU_BUILD_ID`, empty when the module has none.
    pub build_id: Vec<u8>,
    /// Loadable segments.
    pub segments: Vec<Segment>,
}

impl ModuleRecord {
    /// Serializes several records into one Modules payload.
    pub fn encode_all(mods: &[ModuleRecord]) -> Vec<u8> {
        let mut o = Vec::new();
        put(&mut o, mods.len() as u64);
        for m in mods {
            o.push(u8::from(m.loaded));
            put(&mut o, m.ts);
            put(&mut o, m.base);
            put_bytes(&mut o, m.path.as_os_str().as_bytes());
            put_bytes(&mut o, &m.build_id);
            put(&mut o, m.segments.len() as u64);
            for s in &m.segments {
                put(&mut o, s.vaddr);
                put(&mut o, s.memsz);
                put(&mut o, s.flags.into());
            }
        }
        o
    }

    /// Parses a Modules payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode_all(p: &[u8]) -> Result<Vec<ModuleRecord>, Malformed> {
        let e = Malformed("module");
        let mut c = Cursor::new(p);
        let n = c.var().ok_or(e)?;
        let mut mods = Vec::new();
        for _ in 0..n {
            let loaded = c.u8().ok_or(e)? != 0;
            let ts = c.var().ok_or(e)?;
            let base = c.var().ok_or(e)?;
            let path = path(c.bytes().ok_or(e)?);
            let build_id = c.bytes().ok_or(e)?.to_vec();
            let nseg = c.var().ok_or(e)?;
            let mut segments = Vec::new();
            for _ in 0..nseg {
                let vaddr = c.var().ok_or(e)?;
                let memsz = c.var().ok_or(e)?;
                let flags = c.var().ok_or(e)? as u32;
                segments.push(Segment { vaddr, memsz, flags });
            }
            mods.push(ModuleRecord { ts, loaded, base, path, build_id, segments });
        }
        Ok(mods)
    }

    /// True when process address `addr` falls in one of this module's segments.
    pub fn contains(&self, addr: u64) -> bool {
        self.segments.iter().any(|s| {
            let start = self.base.wrapping_add(s.vaddr);
            addr >= start && addr < start.wrapping_add(s.memsz)
        })
    }
}

/// A node of the call-stack trie: the stack `parent` extended by one more caller frame.
/// Node 0 is the empty stack and is never written. A Stacks payload is
/// `first_id (id - parent, addr)*` with ids consecutive from `first_id`; each node's `addr` is a
/// return address (the instruction after a call), outermost frames nearest the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackNode {
    /// This node's id (> 0).
    pub id: u32,
    /// The id of the stack one frame shorter (0 for a single-frame stack).
    pub parent: u32,
    /// The frame's return address in the process.
    pub addr: u64,
}

impl StackNode {
    /// Appends the Stacks payload header for nodes starting at `first_id`.
    pub fn begin(out: &mut Vec<u8>, first_id: u32) {
        put(out, first_id.into());
    }

    /// Appends one node (its id is implied by position).
    pub fn push(out: &mut Vec<u8>, id: u32, parent: u32, addr: u64) {
        put(out, u64::from(id - parent));
        put(out, addr);
    }

    /// Parses a Stacks payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short or a parent does not precede its child.
    pub fn decode_all(p: &[u8]) -> Result<Vec<StackNode>, Malformed> {
        let e = Malformed("stack");
        let mut c = Cursor::new(p);
        let mut id = c.var().ok_or(e)? as u32;
        let mut out = Vec::new();
        while !c.is_empty() {
            let back = c.var().ok_or(e)?;
            let addr = c.var().ok_or(e)?;
            if back == 0 || back > u64::from(id) {
                return Err(e);
            }
            out.push(StackNode { id, parent: id - back as u32, addr });
            id = id.checked_add(1).ok_or(e)?;
        }
        Ok(out)
    }
}

/// A thread's name (`/proc/self/task/TID/comm`). Payload: `tid name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadName {
    /// Kernel thread id.
    pub tid: u32,
    /// Name, at most 15 bytes on Linux.
    pub name: String,
}

impl ThreadName {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        put(&mut o, self.tid.into());
        put_bytes(&mut o, self.name.as_bytes());
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("thread name");
        let mut c = Cursor::new(p);
        Ok(Self { tid: c.var().ok_or(e)? as u32, name: c.string().ok_or(e)? })
    }
}

/// CPU-time samples of one thread (`heaplens run --cpu`), taken when its CPU-time timer fired.
/// A sample stands for `weight x period_ns` nanoseconds of that thread's CPU time: the kernel
/// checks CPU-time timers on its scheduler tick, so at rates above the tick one signal carries
/// several expirations (its overrun count + 1). Payload: `tid period_ns n (dts stack weight)*n`,
/// `dts` the time since the previous sample (the first since 0), in the trace's time source
/// like events' ([`crate::TimeSource`]), `stack` a node of the call-stack trie whose innermost
/// frame is the interrupted instruction's address plus one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleRecord {
    /// Kernel thread id.
    pub tid: u32,
    /// CPU time each sample stands for, nanoseconds.
    pub period_ns: u64,
    /// Each sample, in time order.
    pub samples: Vec<Sample>,
}

impl SampleRecord {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::with_capacity(8 + 6 * self.samples.len());
        put(&mut o, self.tid.into());
        put(&mut o, self.period_ns);
        put(&mut o, self.samples.len() as u64);
        let mut prev = 0u64;
        for x in &self.samples {
            put(&mut o, x.ts.wrapping_sub(prev));
            put(&mut o, x.stack.into());
            put(&mut o, x.weight.into());
            prev = x.ts;
        }
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short or a stack id does not fit.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("samples");
        let mut c = Cursor::new(p);
        let tid = c.var().ok_or(e)? as u32;
        let period_ns = c.var().ok_or(e)?;
        let n = c.var().ok_or(e)?;
        let mut samples = Vec::with_capacity((n as usize).min(p.len()));
        let mut ts = 0u64;
        for _ in 0..n {
            ts = ts.wrapping_add(c.var().ok_or(e)?);
            let stack = u32::try_from(c.var().ok_or(e)?).map_err(|_| e)?;
            let weight = u32::try_from(c.var().ok_or(e)?).map_err(|_| e)?;
            samples.push(Sample { ts, stack, weight });
        }
        Ok(Self { tid, period_ns, samples })
    }
}

/// One CPU-time sample of a [`SampleRecord`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// When the timer fired, in the trace's time source.
    pub ts: u64,
    /// The call stack: a node of the stack trie.
    pub stack: u32,
    /// Periods of CPU time this sample stands for (1, or more when the signal carried
    /// overruns).
    pub weight: u32,
}

/// How the profiled process ended, appended by `heaplens run`. Payload: `how value end_mono_ns`
/// with `how` 0 = exited with status `value`, 1 = killed by signal `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitRecord {
    /// Exit status when the process exited.
    pub code: Option<i32>,
    /// Signal number when a signal killed it.
    pub signal: Option<i32>,
    /// `CLOCK_MONOTONIC` nanoseconds when the process was reaped.
    pub end_mono_ns: u64,
}

impl ExitRecord {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        let (how, v) = match (self.code, self.signal) {
            (_, Some(s)) => (1, s),
            (c, None) => (0, c.unwrap_or(0)),
        };
        put(&mut o, how);
        put(&mut o, zigzag(v.into()));
        put(&mut o, self.end_mono_ns);
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("exit");
        let mut c = Cursor::new(p);
        let how = c.var().ok_or(e)?;
        let v = c.svar().ok_or(e)? as i32;
        let end_mono_ns = c.var().ok_or(e)?;
        Ok(match how {
            0 => Self { code: Some(v), signal: None, end_mono_ns },
            _ => Self { code: None, signal: Some(v), end_mono_ns },
        })
    }
}

/// Counters the monitor writes in its End block. Payload: `events stacks dropped end_mono_ns
/// samples_dropped sampler_ns writer_cpu_ns exec_unfollowed null_frees detached exec` (those after
/// `end_mono_ns` absent from older traces, read as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndRecord {
    /// Events written.
    pub events: u64,
    /// Stack-trie nodes written.
    pub stack_nodes: u64,
    /// Events lost (a failed write, a buffer that could not be allocated).
    pub dropped: u64,
    /// `CLOCK_MONOTONIC` nanoseconds at shutdown.
    pub end_mono_ns: u64,
    /// CPU-time samples not taken (`--cpu`): the timer fired while the thread ran monitor code,
    /// or the thread's ring was full.
    pub samples_dropped: u64,
    /// Wall nanoseconds the program's threads spent in the monitor's CPU-sampling signal
    /// handler (`--cpu`), summed over threads; the kernel's delivery of the signal not
    /// included.
    pub sampler_ns: u64,
    /// CPU nanoseconds of the monitor's writer thread (draining, encoding, compressing,
    /// writing), up to its last sweep.
    pub writer_cpu_ns: u64,
    /// Written just before an `exec` whose program the monitor does not follow (no
    /// `--follow-children`): when this End block is the trace's last, the exec succeeded and
    /// the rest of the process's life went unrecorded.
    pub exec_unfollowed: bool,
    /// Releases of a null pointer (`free(NULL)`, `delete nullptr`), which the monitor counts
    /// instead of recording each as an event (older traces hold them as deallocation events of
    /// address 0, and 0 here).
    pub null_frees: u64,
    /// Written by `heaplens detach` (or at the end of `heaplens attach`): recording stopped
    /// while the process went on, so blocks live then are not leaks.
    pub detached: bool,
    /// Written just before an `exec`, followed or not: when this End block is the trace's
    /// last, the exec succeeded and replaced the heap, so blocks live then are not leaks (with
    /// `--follow-children` the new program has a trace of its own).
    pub exec: bool,
}

impl EndRecord {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        for v in [
            self.events,
            self.stack_nodes,
            self.dropped,
            self.end_mono_ns,
            self.samples_dropped,
            self.sampler_ns,
            self.writer_cpu_ns,
            u64::from(self.exec_unfollowed),
            self.null_frees,
            u64::from(self.detached),
            u64::from(self.exec),
        ] {
            put(&mut o, v);
        }
        o
    }

    /// Parses a payload.
    ///
    /// # Errors
    /// [`Malformed`] if the payload is short.
    pub fn decode(p: &[u8]) -> Result<Self, Malformed> {
        let e = Malformed("end");
        let mut c = Cursor::new(p);
        Ok(Self {
            events: c.var().ok_or(e)?,
            stack_nodes: c.var().ok_or(e)?,
            dropped: c.var().ok_or(e)?,
            end_mono_ns: c.var().ok_or(e)?,
            samples_dropped: c.var().unwrap_or(0),
            sampler_ns: c.var().unwrap_or(0),
            writer_cpu_ns: c.var().unwrap_or(0),
            exec_unfollowed: c.var().unwrap_or(0) == 1,
            null_frees: c.var().unwrap_or(0),
            detached: c.var().unwrap_or(0) == 1,
            exec: c.var().unwrap_or(0) == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_records_keep_every_field_and_read_older_ones() {
        let e = EndRecord {
            events: 7,
            stack_nodes: 3,
            dropped: 1,
            end_mono_ns: 1 << 40,
            samples_dropped: 5,
            sampler_ns: 12_345,
            writer_cpu_ns: 67_890,
            exec_unfollowed: true,
            null_frees: 37,
            detached: true,
            exec: true,
        };
        assert_eq!(EndRecord::decode(&e.encode()).unwrap(), e);
        // A trace from before the CPU sampler: four fields, the rest read as 0.
        let mut old = Vec::new();
        for v in [7u64, 3, 1, 1 << 40] {
            put(&mut old, v);
        }
        let o = EndRecord::decode(&old).unwrap();
        assert_eq!((o.events, o.end_mono_ns, o.samples_dropped, o.sampler_ns, o.writer_cpu_ns), (7, 1 << 40, 0, 0, 0));
        assert!(EndRecord::decode(&old[..2]).is_err());
    }
}
