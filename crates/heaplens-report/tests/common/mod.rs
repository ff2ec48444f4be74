//! Building synthetic traces in memory.
#![allow(dead_code)]

use heaplens_trace::{BlockKind, BlockWriter, EndRecord, EventEncoder, ExitRecord, Op, ProcessRecord, StackNode};

/// One event to encode.
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    Alloc { op: Op, ts: u64, addr: u64, size: u64, stack: u32 },
    Realloc { op: Op, ts: u64, old: u64, addr: u64, size: u64, stack: u32 },
    Free { op: Op, ts: u64, addr: u64 },
}

pub fn malloc(ts: u64, addr: u64, size: u64, stack: u32) -> Ev {
    Ev::Alloc { op: Op::Malloc, ts, addr, size, stack }
}

pub fn free(ts: u64, addr: u64) -> Ev {
    Ev::Free { op: Op::Free, ts, addr }
}

/// Writes a trace: Process, Events blocks (`per_block` events each, one thread per list),
/// then the stack nodes (after the events that use them, as a live monitor may), then Exit and
/// End unless `clean` is false.
pub struct TraceBuilder {
    pub w: BlockWriter<Vec<u8>>,
}

impl TraceBuilder {
    pub fn new(start_mono_ns: u64) -> Self {
        Self::sampled(start_mono_ns, 0)
    }

    /// A trace whose Process record says allocations were sampled at `sample_rate` bytes.
    pub fn sampled(start_mono_ns: u64, sample_rate: u64) -> Self {
        let mut w = BlockWriter::new(Vec::new()).unwrap();
        let p = ProcessRecord {
            pid: 4242,
            ppid: 1,
            start_unix_ns: 0,
            start_mono_ns,
            exe: "/usr/bin/widgets".into(),
            argv: vec!["widgets".into(), "--fast".into()],
            max_frames: 1024,
            time_source: Default::default(),
            sample_rate,
            ..ProcessRecord::default()
        };
        w.write_block(BlockKind::Process, &p.encode()).unwrap();
        Self { w }
    }

    pub fn events(&mut self, tid: u32, evs: &[Ev], per_block: usize) -> &mut Self {
        for chunk in evs.chunks(per_block.max(1)) {
            let mut buf = vec![0u8; 16 + chunk.len() * heaplens_trace::event::MAX_EVENT_LEN];
            let mut pos = 0;
            let mut enc = EventEncoder::default();
            enc.begin(&mut buf, &mut pos, tid);
            for e in chunk {
                match *e {
                    Ev::Alloc { op, ts, addr, size, stack } => {
                        enc.alloc(&mut buf, &mut pos, op, ts, addr, size, size, stack)
                    }
                    Ev::Realloc { op, ts, old, addr, size, stack } => {
                        enc.realloc(&mut buf, &mut pos, op, ts, old, addr, size, size, stack)
                    }
                    Ev::Free { op, ts, addr } => enc.dealloc(&mut buf, &mut pos, op, ts, addr),
                }
            }
            self.w.write_block(BlockKind::Events, &buf[..pos]).unwrap();
        }
        self
    }

    /// Stack nodes as (id, parent, return address); ids must be consecutive within one call.
    pub fn stacks(&mut self, nodes: &[(u32, u32, u64)]) -> &mut Self {
        let mut out = Vec::new();
        StackNode::begin(&mut out, nodes[0].0);
        for &(id, parent, addr) in nodes {
            StackNode::push(&mut out, id, parent, addr);
        }
        self.w.write_block(BlockKind::Stacks, &out).unwrap();
        self
    }

    pub fn finish(&mut self, end_mono_ns: u64) -> Vec<u8> {
        let end = EndRecord {
            events: 0,
            stack_nodes: 0,
            dropped: 0,
            end_mono_ns,
            samples_dropped: 0,
            sampler_ns: 0,
            writer_cpu_ns: 0,
            exec_unfollowed: false,
            null_frees: 0,
            detached: false,
            exec: false,
        };
        self.w.write_block(BlockKind::End, &end.encode()).unwrap();
        let exit = ExitRecord { code: Some(0), signal: None, end_mono_ns: end_mono_ns + 5 };
        self.w.write_block(BlockKind::Exit, &exit.encode()).unwrap();
        std::mem::take(self.w.get_mut())
    }

    pub fn unfinished(&mut self) -> Vec<u8> {
        std::mem::take(self.w.get_mut())
    }
}
