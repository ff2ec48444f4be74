//! The columnar event encoding: one thread's events stored field by field, with the heap's own
//! habits turned into small numbers.
//!
//! The monitor's threads write [`crate::event`] rows, the cheapest thing to write on the hot
//! path; the writer thread turns each thread buffer into one EventColumns block before
//! compressing it. Two facts about allocators make addresses, the costliest fields of a row,
//! mostly predictable:
//!
//! * a deallocation nearly always releases a block allocated a little earlier by the same
//!   thread, so it is coded as that allocation's *age* (how many allocations ago, within this
//!   block) instead of its address;
//! * an allocation nearly always returns a block of the same usable size released just before
//!   (glibc's tcache and fastbins are LIFO lists per size), so it is coded as its position among
//!   the most recently released blocks of its size, else as a delta from the end of the
//!   previous allocation or from the end of the previous allocation of its size class,
//!   whichever is nearer (blocks carved from fresh memory sit back to back; a program that
//!   allocates several sizes in turn, as CPython does, gets each size from a run of its own).
//!
//! Both sides run the same model over the block's events, so each block decodes on its own.
//! Measured on gcc's cc1 compiling 3000 functions (17 million allocations, trace format 2):
//! 11.0 bytes of zstd-compressed trace per allocation as rows, 4.3 as columns. The size-class
//! ends and reallocations' old blocks by age (trace format 5) took CPython's JSON benchmark
//! from 6.8 to 4.7 MB, and cc1 from 40.4 to 37.0 MB (docs/EXPERIMENTS.md, "Trace format").
//!
//! Payload layout (all integers LEB128 varints):
//!
//! ```text
//! payload := [mark] tid n len(ops) len(dts) len(addrs) len(sizes) len(slacks) len(stacks)
//!            ops dts addrs sizes slacks stacks olds
//! mark    := 2^32 | flags   (trace format 3; absent in format 2, whose first number, the
//!                            thread id, is below 2^32)
//! flags   := 1 (SLACK_GLIBC: slacks are coded against glibc's usable size)
//!          | 2              (CLASS_ENDS, trace format 5: allocation deltas may be coded from
//!                            the end of the previous allocation of the same class)
//!          | 4              (OLD_AGES, trace format 5: a reallocation's old block may be
//!                            coded by age)
//!          | shift << 8     (trace format 4: timestamps kept to units of 2^shift, 0 to 40)
//! ops     := op byte per event
//! dts     := (ts >> shift) - (previous ts >> shift), per event (the first against 0); the
//!            decoded ts is the sum << shift, the event's time rounded down
//! addrs   := per event, see below
//! sizes   := size, per allocation and reallocation
//! slacks  := zigzag(usable - glibc_usable(size)), per allocation and reallocation, with
//!            SLACK_GLIBC (format 2: zigzag(usable - size)); nearly all zeros under glibc
//! stacks  := zigzag(stack - previous allocation's stack), per allocation and reallocation
//! olds    := per reallocation, with OLD_AGES:
//!              age << 1              the block released is the allocation made `age`
//!                                    allocations ago (age >= 1) in this payload; the model
//!                                    releases it before the new address is coded
//!            | zigzag(old_addr - addr) << 1 | 1
//!            without OLD_AGES: zigzag(old_addr - addr)
//!
//! allocation address   := k < RECENT          the k-th most recently released block (in this
//!                                             payload) of the same usable-size class
//!                       | RECENT + zigzag(addr - end of the previous allocation)
//!                                             (without CLASS_ENDS)
//!                       | RECENT + (d << 1 | 0)  d = zigzag(addr - end of the previous
//!                                             allocation), with CLASS_ENDS
//!                       | RECENT + (d << 1 | 1)  d = zigzag(addr - end of the previous
//!                                             allocation of the same class, 0 if none), with
//!                                             CLASS_ENDS; the encoder takes the smaller d,
//!                                             the first on a tie
//! deallocation address := age << 1            released the allocation made `age` allocations
//!                                             ago (age >= 1) in this payload
//!                       | zigzag(addr - previous such address) << 1 | 1
//! ```

use crate::event::{glibc_usable, Event, EventDecoder, EventEncoder, Op, OpClass, MAX_EVENT_LEN};
use crate::record::Malformed;
use crate::varint::{put, put_at, read_var, unzigzag, zigzag};

/// How many recently released blocks per size class an allocation address may refer to.
pub const RECENT: u64 = 16;
/// Usable sizes below this get a size class (one per 8 bytes); larger blocks are not predicted.
const CLASSED_BELOW: u64 = 8192;
const CLASSES: usize = (CLASSED_BELOW >> 3) as usize;
const SECTIONS: usize = 7;
/// The first number of a payload of trace format 3, above any thread id: [`MARK`] | flags.
const MARK: u64 = 1 << 32;
/// Flag of the mark: slacks are coded against [`glibc_usable`] of the size.
const SLACK_GLIBC: u64 = 1;
/// Flag of the mark: allocation deltas name their base, the previous allocation or the previous
/// one of the same class (trace format 5).
const CLASS_ENDS: u64 = 2;
/// Flag of the mark: a reallocation's old block is coded by age where it can be (trace format
/// 5).
const OLD_AGES: u64 = 4;
/// Where the mark keeps the time shift (trace format 4), and the largest shift a reader takes.
const SHIFT_AT: u32 = 8;
const MAX_SHIFT: u64 = 40;
/// Events the encoder's buffers are grown for at a time.
const BATCH: usize = 256;

/// What encoder and decoder both know after the same events: the payload's allocations in
/// order and, per size class, the addresses released since, most recent last.
#[derive(Default)]
struct Model {
    /// `(address, usable bytes)` of every successful allocation and reallocation, in order.
    allocs: Vec<(u64, u64)>,
    /// Released addresses per usable-size class.
    released: Vec<Vec<u64>>,
    /// End (address + usable bytes) of the previous successful allocation.
    prev_end: u64,
    /// Per size class (and, last, one for blocks too large for a class): the end of the
    /// previous successful allocation of that class, 0 before the first.
    class_ends: Vec<u64>,
    /// Address of the previous deallocation coded as an address.
    prev_free: u64,
}

impl Model {
    fn reset(&mut self) {
        self.allocs.clear();
        self.released.resize_with(CLASSES, Vec::new);
        for r in &mut self.released {
            r.clear();
        }
        self.prev_end = 0;
        self.prev_free = 0;
        self.class_ends.clear();
        self.class_ends.resize(CLASSES + 1, 0);
    }

    #[inline(always)]
    fn class(usable: u64) -> Option<usize> {
        (usable < CLASSED_BELOW).then_some((usable >> 3) as usize)
    }

    /// The block at allocation index `i` was released; its address.
    #[inline(always)]
    fn release(&mut self, i: usize) -> u64 {
        let (addr, usable) = self.allocs[i];
        if let Some(c) = Self::class(usable) {
            self.released[c].push(addr);
        }
        addr
    }

    /// Releases the block at allocation index `i` and returns its age code (`age << 1`, the age
    /// counting allocations since, at least 1), as deallocations and reallocations' old blocks
    /// name it.
    #[inline(always)]
    fn release_by_age(&mut self, i: u32) -> u64 {
        let code = (self.allocs.len() as u64 - u64::from(i)) << 1;
        self.release(i as usize);
        code
    }

    /// Releases the block allocated `age` allocations ago (age code `code`); its address, `None`
    /// when the payload holds no such allocation.
    #[inline(always)]
    fn release_aged(&mut self, code: u64) -> Option<u64> {
        let age = (code >> 1) as usize;
        let i = self.allocs.len().checked_sub(age).filter(|_| age > 0)?;
        Some(self.release(i))
    }

    /// Where `addr` is among the [`RECENT`] most recently released blocks of class `c` (0: the
    /// latest).
    #[inline(always)]
    fn find_recent(&self, c: usize, addr: u64) -> Option<u64> {
        self.released[c].iter().rev().take(RECENT as usize).position(|&a| a == addr).map(|k| k as u64)
    }

    /// Takes the `k`-th most recently released block of class `c` off its list; its address,
    /// `None` when the list is shorter.
    #[inline(always)]
    fn take_recent(&mut self, c: usize, k: u64) -> Option<u64> {
        let r = &mut self.released[c];
        if k == 0 {
            // The usual case (allocators reuse the block released last): no shifting.
            return r.pop();
        }
        let i = r.len().checked_sub(1 + usize::try_from(k).ok()?)?;
        Some(r.remove(i))
    }

    /// Where [`Model::class_ends`] keeps the class of `usable` bytes.
    #[inline(always)]
    fn end_slot(usable: u64) -> usize {
        Self::class(usable).unwrap_or(CLASSES)
    }

    #[inline(always)]
    fn allocated(&mut self, addr: u64, usable: u64) {
        if addr != 0 {
            self.allocs.push((addr, usable));
            self.prev_end = addr.wrapping_add(usable);
            self.class_ends[Self::end_slot(usable)] = self.prev_end;
        }
    }

    /// The code of an allocation at `addr` of `usable` bytes that is not a recent release
    /// (without [`RECENT`]): with `class_ends`, its delta from the nearer of the two ends, else
    /// (trace format 4) from the previous allocation's.
    #[inline(always)]
    fn delta_code(&self, addr: u64, usable: u64, class_ends: bool) -> u64 {
        let overall = zigzag(addr.wrapping_sub(self.prev_end) as i64);
        if !class_ends {
            return overall;
        }
        let class = zigzag(addr.wrapping_sub(self.class_ends[Self::end_slot(usable)]) as i64);
        if class < overall {
            class.wrapping_shl(1) | 1
        } else {
            overall.wrapping_shl(1)
        }
    }

    /// The address of an allocation of `usable` bytes whose [`Model::delta_code`] is `code`.
    #[inline(always)]
    fn delta_address(&self, code: u64, usable: u64, class_ends: bool) -> u64 {
        if !class_ends {
            return self.prev_end.wrapping_add(unzigzag(code) as u64);
        }
        let base = if code & 1 == 0 { self.prev_end } else { self.class_ends[Self::end_slot(usable)] };
        base.wrapping_add(unzigzag(code >> 1) as u64)
    }
}

/// Address -> index in the model's allocations of its latest allocation not yet released, as
/// a direct-mapped table: the monitor's writer thread runs this once per event, and a hash map
/// costs it more than an evicted entry does (that deallocation is coded as an address).
struct AllocIndex {
    /// `(address, index, generation)`; an entry of another generation is empty.
    slots: Vec<(u64, u32, u32)>,
    generation: u32,
}

impl Default for AllocIndex {
    fn default() -> Self {
        Self { slots: vec![(0, 0, 0); 1 << INDEX_BITS], generation: 1 }
    }
}

const INDEX_BITS: u32 = 13;

impl AllocIndex {
    /// Empties the table (in O(1), by moving to the next generation).
    fn clear(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.fill((0, 0, 0));
            self.generation = 1;
        }
    }

    #[inline(always)]
    fn slot(addr: u64) -> usize {
        ((addr >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - INDEX_BITS)) as usize
    }

    #[inline(always)]
    fn insert(&mut self, addr: u64, i: u32) {
        self.slots[Self::slot(addr)] = (addr, i, self.generation);
    }

    #[inline(always)]
    fn remove(&mut self, addr: u64) -> Option<u32> {
        let s = &mut self.slots[Self::slot(addr)];
        if s.2 != self.generation || s.0 != addr {
            return None;
        }
        s.2 = 0;
        Some(s.1)
    }
}

/// Turns row payloads ([`crate::event`]) into EventColumns payloads. Keeps its buffers between
/// payloads; one per writer.
#[derive(Default)]
pub struct ColumnEncoder {
    model: Model,
    index: AllocIndex,
    cols: [Vec<u8>; SECTIONS],
    /// Timestamps are rounded down to multiples of `2^time_shift` (see [`ColumnEncoder::set_time_shift`]).
    time_shift: u32,
    /// Codes payloads as trace format 4 did, without `CLASS_ENDS` and `OLD_AGES`: allocation
    /// deltas from the previous allocation only, reallocations' old blocks by address (for the
    /// tests that older payloads still decode).
    format_4: bool,
}

impl ColumnEncoder {
    /// Keeps the timestamps of the payloads encoded from now on to multiples of `2^shift`
    /// units, each rounded down (0, the default: exact). Rounding costs the order between
    /// threads (events of two threads in one unit can no longer be told apart), so the monitor
    /// asks for it only for events that no other thread's can fall among; it saves 0.1 to 0.15
    /// bytes of trace per event and bit (docs/EXPERIMENTS.md, "Trace format").
    ///
    /// # Panics
    /// When `shift` is above 40.
    pub fn set_time_shift(&mut self, shift: u32) {
        assert!(u64::from(shift) <= MAX_SHIFT, "time shift {shift} above {MAX_SHIFT}");
        self.time_shift = shift;
    }

    /// Appends the columnar form of the row payload `rows` to `out`.
    ///
    /// # Errors
    /// [`Malformed`] when `rows` does not decode (nothing is appended then).
    pub fn encode(&mut self, rows: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
        self.encode_all(&[rows], out)
    }

    /// Appends one columnar payload holding the events of several row payloads of the same
    /// thread, in order (a larger payload gives the address model and the compressor more to
    /// go on).
    ///
    /// # Errors
    /// [`Malformed`] when a part does not decode or belongs to another thread (nothing is
    /// appended then).
    pub fn encode_all(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> Result<(), Malformed> {
        self.model.reset();
        self.index.clear();
        let mut at = [0usize; SECTIONS];
        let decoders = parts.iter().map(|p| EventDecoder::new(p)).collect::<Result<Vec<_>, _>>()?;
        let tid = decoders.first().ok_or(Malformed("no event rows"))?.tid();
        if decoders.iter().any(|d| d.tid() != tid) {
            return Err(Malformed("event rows of another thread"));
        }
        let (mut n, mut prev_ts, mut prev_stack, mut budget) = (0u64, 0u64, 0u64, 0usize);
        let [ops, dts, addrs, sizes, slacks, stacks, olds] = &mut self.cols;
        // Nested loops rather than `flatten`, which the compiler does not inline.
        for d in decoders {
            for ev in d {
                let ev = ev?;
                n += 1;
                // Room for the next BATCH events' numbers in every column, checked once per batch
                // rather than per byte (an event adds at most one number to each).
                if budget == 0 {
                    for (c, &a) in
                        [&mut *ops, &mut *dts, &mut *addrs, &mut *sizes, &mut *slacks, &mut *stacks, &mut *olds]
                            .into_iter()
                            .zip(&at)
                    {
                        let need = a + BATCH * crate::varint::MAX_LEN;
                        if c.len() < need {
                            c.resize(need * 2, 0);
                        }
                    }
                    budget = BATCH;
                }
                budget -= 1;
                ops[at[0]] = ev.op as u8;
                at[0] += 1;
                let ts = ev.ts >> self.time_shift;
                put_at(dts, &mut at[1], ts.wrapping_sub(prev_ts));
                prev_ts = ts;
                if ev.op.class() == OpClass::Dealloc {
                    if let Some(i) = self.index.remove(ev.addr) {
                        put_at(addrs, &mut at[2], self.model.release_by_age(i));
                    } else {
                        put_at(addrs, &mut at[2], zigzag(ev.addr.wrapping_sub(self.model.prev_free) as i64) << 1 | 1);
                        self.model.prev_free = ev.addr;
                    }
                    continue;
                }
                put_at(sizes, &mut at[3], ev.size);
                put_at(slacks, &mut at[4], zigzag(ev.usable.wrapping_sub(glibc_usable(ev.size)) as i64));
                put_at(stacks, &mut at[5], zigzag(u64::from(ev.stack).wrapping_sub(prev_stack) as i64));
                prev_stack = u64::from(ev.stack);
                if ev.op.class() == OpClass::Realloc {
                    // The old block is released before the new one is placed: glibc may
                    // hand out the same block again, or one just released of its class.
                    let delta = zigzag(ev.old_addr.wrapping_sub(ev.addr) as i64);
                    let code = if self.format_4 {
                        delta
                    } else if let Some(i) = self.index.remove(ev.old_addr) {
                        self.model.release_by_age(i)
                    } else {
                        delta.wrapping_shl(1) | 1
                    };
                    put_at(olds, &mut at[6], code);
                }
                let recent = Model::class(ev.usable).and_then(|c| {
                    let k = self.model.find_recent(c, ev.addr)?;
                    self.model.take_recent(c, k);
                    Some(k)
                });
                let code = recent
                    .unwrap_or_else(|| RECENT.wrapping_add(self.model.delta_code(ev.addr, ev.usable, !self.format_4)));
                put_at(addrs, &mut at[2], code);
                if ev.addr != 0 {
                    self.index.insert(ev.addr, self.model.allocs.len() as u32);
                }
                self.model.allocated(ev.addr, ev.usable);
            }
        }
        let format_5 = if self.format_4 { 0 } else { CLASS_ENDS | OLD_AGES };
        put(out, MARK | SLACK_GLIBC | format_5 | u64::from(self.time_shift) << SHIFT_AT);
        put(out, u64::from(tid));
        put(out, n);
        for len in &at[..SECTIONS - 1] {
            put(out, *len as u64);
        }
        for (c, len) in self.cols.iter().zip(at) {
            out.extend_from_slice(&c[..len]);
        }
        Ok(())
    }
}

/// A payload's thread, event count and sections.
struct Header<'a> {
    /// The mark's flags (0 in trace format 2).
    flags: u64,
    tid: u32,
    n: usize,
    sections: [&'a [u8]; SECTIONS],
}

impl<'a> Header<'a> {
    fn parse(payload: &'a [u8]) -> Option<Self> {
        let mut p = 0;
        let mut first = read_var(payload, &mut p)?;
        let mut flags = 0;
        if first >= MARK {
            flags = first - MARK;
            if flags >> SHIFT_AT > MAX_SHIFT {
                return None;
            }
            first = read_var(payload, &mut p)?;
        }
        let tid = u32::try_from(first).ok()?;
        let n = usize::try_from(read_var(payload, &mut p)?).ok()?;
        let mut lens = [0usize; SECTIONS - 1];
        for len in &mut lens {
            *len = usize::try_from(read_var(payload, &mut p)?).ok()?;
        }
        let mut rest = payload.get(p..)?;
        let mut sections = [&rest[..0]; SECTIONS];
        for (sec, len) in sections.iter_mut().zip(lens) {
            (*sec, rest) = rest.split_at_checked(len)?;
        }
        sections[SECTIONS - 1] = rest;
        Some(Self { flags, tid, n, sections })
    }
}

impl Header<'_> {
    fn shift(&self) -> u32 {
        (self.flags >> SHIFT_AT) as u32
    }
}

/// The thread of an EventColumns payload (`None`: no header).
pub fn tid(payload: &[u8]) -> Option<u32> {
    Header::parse(payload).map(|h| h.tid)
}

/// How many events an EventColumns payload holds, as its header says (`None`: no header).
pub fn event_count(payload: &[u8]) -> Option<usize> {
    Header::parse(payload).map(|h| h.n)
}

/// The timestamp of an EventColumns payload's first event (`None`: no events, or no header).
pub fn first_ts(payload: &[u8]) -> Option<u64> {
    let h = Header::parse(payload).filter(|h| h.n > 0)?;
    read_var(h.sections[1], &mut 0).map(|t| t << h.shift())
}

/// The time shift of an EventColumns payload: its timestamps are multiples of `2^shift` (0:
/// exact; `None`: no header). See [`ColumnEncoder::set_time_shift`].
pub fn time_shift(payload: &[u8]) -> Option<u32> {
    Header::parse(payload).map(|h| h.shift())
}

/// Reads EventColumns payloads. Keeps its buffers between payloads.
///
/// A payload is either decoded whole ([`ColumnDecoder::decode`]) or an event at a time
/// ([`ColumnDecoder::start`], then [`ColumnDecoder::next_event`]), so that a consumer can stop
/// part-way and go on later without materializing the events. Each event takes the next number
/// of every section it has a field in: the sections are read side by side, which keeps their
/// reads independent of one another.
#[derive(Default)]
pub struct ColumnDecoder {
    model: Model,
    /// The payload.
    buf: Vec<u8>,
    /// Per section: where its next number starts, and where it ends, in `buf`.
    at: [usize; SECTIONS],
    end: [usize; SECTIONS],
    tid: u32,
    /// Events whose op byte is in the payload.
    n: usize,
    /// The next event.
    i: usize,
    /// Timestamp and stack of the previous event.
    ts: u64,
    stack: u64,
    /// The payload holds fewer op bytes than its header says.
    short: bool,
    /// Slacks are coded against glibc's usable size (`SLACK_GLIBC`), else against the size.
    slack_glibc: bool,
    /// Allocation deltas name their base (`CLASS_ENDS`), else are from the previous allocation.
    class_ends: bool,
    /// A reallocation's old block may be coded by age (`OLD_AGES`).
    old_ages: bool,
    /// Time deltas are in units of `2^time_shift`.
    time_shift: u32,
    /// A record did not decode.
    failed: bool,
}

/// Bytes of zeros the decoder keeps after a payload's copy (see `ColumnDecoder::var`).
const PAD: usize = 8;

/// Section indices.
const OPS: usize = 0;
const DTS: usize = 1;
const ADDRS: usize = 2;
const SIZES: usize = 3;
const SLACKS: usize = 4;
const STACKS: usize = 5;
const OLDS: usize = 6;

impl ColumnDecoder {
    /// Decodes `payload`, calling `f` with each event in order; returns the thread id.
    ///
    /// # Errors
    /// [`Malformed`] when the payload is cut short or refers to blocks it does not hold; the
    /// events before that point have been passed to `f`.
    #[inline]
    pub fn decode(&mut self, payload: &[u8], mut f: impl FnMut(Event)) -> Result<u32, Malformed> {
        let tid = self.start(payload)?;
        while let Some(ev) = self.next_event() {
            f(ev);
        }
        if self.failed() {
            return Err(Malformed("event columns"));
        }
        Ok(tid)
    }

    /// Starts decoding `payload` (dropping what is left of the previous one); its events then
    /// come from [`ColumnDecoder::next_event`]. Returns the thread id.
    ///
    /// # Errors
    /// [`Malformed`] when the header does not decode (no event will come).
    pub fn start(&mut self, payload: &[u8]) -> Result<u32, Malformed> {
        self.model.reset();
        (self.i, self.ts, self.stack, self.n) = (0, 0, 0, 0);
        self.buf.clear();
        self.buf.extend_from_slice(payload);
        // Zeros past the end, so that `var` may read a word at any position inside a section.
        self.buf.extend_from_slice(&[0; PAD]);
        let payload = &self.buf[..self.buf.len() - PAD];
        let Some(header) = Header::parse(payload) else {
            self.failed = true;
            return Err(Malformed("event columns"));
        };
        self.time_shift = header.shift();
        let Header { flags, tid, n, sections } = header;
        let (mut at, mut end) = ([0; SECTIONS], [0; SECTIONS]);
        for (k, sec) in sections.iter().enumerate() {
            at[k] = sec.as_ptr() as usize - payload.as_ptr() as usize;
            end[k] = at[k] + sec.len();
        }
        let ops = sections[OPS].len();
        (self.at, self.end, self.tid, self.failed) = (at, end, tid, false);
        self.slack_glibc = flags & SLACK_GLIBC != 0;
        self.class_ends = flags & CLASS_ENDS != 0;
        self.old_ages = flags & OLD_AGES != 0;
        self.n = n.min(ops);
        self.short = self.n < n;
        Ok(tid)
    }

    /// The next event of the payload being decoded; `None` at its end or at a malformed
    /// record ([`ColumnDecoder::failed`] tells which).
    #[inline(always)]
    pub fn next_event(&mut self) -> Option<Event> {
        if self.i >= self.n {
            return None;
        }
        let ev = self.event();
        if ev.is_none() {
            self.n = 0;
            self.failed = true;
        }
        ev
    }

    /// Whether the payload being decoded turned out malformed (once [`ColumnDecoder::next_event`]
    /// returned `None`: the events before the fault were returned).
    pub fn failed(&self) -> bool {
        self.failed || (self.short && self.i >= self.n)
    }

    /// The next number of section `k`. Numbers of one or two bytes, nearly all of them, are
    /// read from one unaligned word (the buffer's padding makes that word readable anywhere in a
    /// section), checked against the section's end once; longer ones go to [`read_var`], whose
    /// first two cases these are. (Calling a shared word decoder for every length instead cost
    /// 2.3% more of the sqlite3 report's instructions.)
    #[inline(always)]
    fn var(&mut self, k: usize) -> Option<u64> {
        let (at, end) = (self.at[k], self.end[k]);
        if at >= end {
            return None;
        }
        debug_assert!(end + PAD <= self.buf.len());
        // SAFETY: `at < end`, and every section ends at least PAD bytes before the buffer does
        // (`start` pads it), so the 8 bytes from `at` are inside the buffer.
        let w = u64::from_le(unsafe { std::ptr::read_unaligned(self.buf.as_ptr().add(at).cast::<u64>()) });
        let (b0, b1) = (w as u8, (w >> 8) as u8);
        if b0 < 0x80 {
            self.at[k] = at + 1;
            return Some(u64::from(b0));
        }
        if b1 < 0x80 && at + 2 <= end {
            self.at[k] = at + 2;
            return Some(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
        }
        read_var(&self.buf[..end], &mut self.at[k])
    }

    #[inline(always)]
    fn event(&mut self) -> Option<Event> {
        let b = self.buf[self.at[OPS] + self.i];
        let op = Op::from_u8(b)?;
        self.ts = self.ts.wrapping_add(self.var(DTS)? << self.time_shift);
        let code = self.var(ADDRS)?;
        let mut ev = Event { ts: self.ts, tid: self.tid, op, addr: 0, old_addr: 0, size: 0, usable: 0, stack: 0 };
        if b >= Op::Free as u8 {
            if code & 1 == 0 {
                ev.addr = self.model.release_aged(code)?;
            } else {
                ev.addr = self.model.prev_free.wrapping_add(unzigzag(code >> 1) as u64);
                self.model.prev_free = ev.addr;
            }
            self.i += 1;
            return Some(ev);
        }
        ev.size = self.var(SIZES)?;
        let base = if self.slack_glibc { glibc_usable(ev.size) } else { ev.size };
        ev.usable = base.wrapping_add(unzigzag(self.var(SLACKS)?) as u64);
        self.stack = self.stack.wrapping_add(unzigzag(self.var(STACKS)?) as u64);
        ev.stack = u32::try_from(self.stack).ok()?;
        let realloc = op.class() == OpClass::Realloc;
        // A reallocation's old block coded by age is released before the new address.
        let mut old = 0;
        if realloc && self.old_ages {
            old = self.var(OLDS)?;
            if old & 1 == 0 {
                ev.old_addr = self.model.release_aged(old)?;
            }
        }
        ev.addr = if code < RECENT {
            self.model.take_recent(Model::class(ev.usable)?, code)?
        } else {
            self.model.delta_address(code - RECENT, ev.usable, self.class_ends)
        };
        if realloc && self.old_ages {
            if old & 1 == 1 {
                ev.old_addr = ev.addr.wrapping_add(unzigzag(old >> 1) as u64);
            }
        } else if realloc {
            ev.old_addr = ev.addr.wrapping_add(unzigzag(self.var(OLDS)?) as u64);
        }
        self.model.allocated(ev.addr, ev.usable);
        self.i += 1;
        Some(ev)
    }

    /// Rewrites an EventColumns payload as the row payload ([`crate::event`]) of the same
    /// events, replacing `out`'s contents.
    ///
    /// # Errors
    /// [`Malformed`] as [`ColumnDecoder::decode`]; `out` then holds the events before the fault.
    pub fn to_rows(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
        out.clear();
        let mut enc = EventEncoder::default();
        let mut pos = 0;
        let mut begun = false;
        let res = self.decode(payload, |ev| {
            if !begun {
                out.resize(crate::varint::MAX_LEN, 0);
                enc.begin(out, &mut pos, ev.tid);
                begun = true;
            }
            if out.len() < pos + MAX_EVENT_LEN {
                out.resize(pos + MAX_EVENT_LEN, 0);
            }
            enc.event(out, &mut pos, &ev);
        });
        if !begun {
            // No events: still a payload with its thread id, unless the header itself is bad.
            let Ok(tid) = res else {
                out.clear();
                return Err(Malformed("event columns"));
            };
            out.resize(crate::varint::MAX_LEN, 0);
            enc.begin(out, &mut pos, tid);
        }
        out.truncate(pos);
        res.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// A thread's events as a small LIFO allocator would produce them, with the odd free of a
    /// foreign block, failed allocation, reallocation and large block.
    fn heap_events(n: usize, seed: u64) -> Vec<Event> {
        let mut rng = seed | 1;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut free_lists: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
        let (mut top, mut ts, mut out) = (0x5555_0000_0000u64, 1_000u64, Vec::new());
        for _ in 0..n {
            ts += next() % 5000;
            let r = next() % 100;
            let ev = |op, addr, size, usable, stack| Event { ts, tid: 7, op, addr, old_addr: 0, size, usable, stack };
            if r < 45 || live.is_empty() {
                let size: u64 = [8, 24, 40, 100, 1000, 70_000][(next() % 6) as usize];
                let usable = size.div_ceil(16) * 16 + 8;
                let addr = match free_lists.get_mut(&usable).and_then(|l| l.pop()) {
                    Some(a) => a,
                    None => {
                        top += usable + 8;
                        top - usable - 8
                    }
                };
                live.push((addr, usable));
                out.push(ev(Op::Malloc, addr, size, usable, (next() % 40) as u32));
            } else if r < 90 {
                let i = (next() as usize) % live.len().min(4);
                let (addr, usable) = live.remove(live.len() - 1 - i);
                free_lists.entry(usable).or_default().push(addr);
                out.push(ev(Op::Free, addr, 0, 0, 0));
            } else if r < 94 {
                out.push(ev(Op::Delete, 0x7f00_0000_0000 + next() % 4096 * 16, 0, 0, 0));
            } else if r < 96 {
                out.push(ev(Op::Calloc, 0, 1 << 50, 0, 3));
            } else {
                let (old, _) = live.pop().expect("not empty");
                top += 4096;
                live.push((top, 4088));
                let mut e = ev(Op::Realloc, top, 4000, 4088, 5);
                e.old_addr = old;
                out.push(e);
            }
        }
        out
    }

    fn rows(evs: &[Event]) -> Vec<u8> {
        let mut buf = vec![0u8; 16 + evs.len() * MAX_EVENT_LEN];
        let (mut pos, mut enc) = (0, EventEncoder::default());
        enc.begin(&mut buf, &mut pos, 7);
        for e in evs {
            enc.event(&mut buf, &mut pos, e);
        }
        buf.truncate(pos);
        buf
    }

    #[test]
    fn columns_round_trip_exactly() {
        let (mut enc, mut dec) = (ColumnEncoder::default(), ColumnDecoder::default());
        for seed in 1..6 {
            let evs = heap_events(20_000, seed);
            let row = rows(&evs);
            let mut col = Vec::new();
            enc.encode(&row, &mut col).unwrap();
            let mut back = Vec::new();
            assert_eq!(dec.decode(&col, |e| back.push(e)).unwrap(), 7);
            assert_eq!(back, evs);
            let mut row2 = Vec::new();
            dec.to_rows(&col, &mut row2).unwrap();
            assert_eq!(row2, row);
        }
    }

    #[test]
    fn a_time_shift_rounds_every_timestamp_down_and_keeps_the_rest() {
        let (mut enc, mut dec) = (ColumnEncoder::default(), ColumnDecoder::default());
        let evs = heap_events(20_000, 3);
        let mut exact = Vec::new();
        enc.encode(&rows(&evs), &mut exact).unwrap();
        enc.set_time_shift(5);
        let mut coarse = Vec::new();
        enc.encode(&rows(&evs), &mut coarse).unwrap();
        assert_eq!((time_shift(&exact), time_shift(&coarse)), (Some(0), Some(5)));
        let mut back = Vec::new();
        dec.decode(&coarse, |e| back.push(e)).unwrap();
        let rounded: Vec<Event> = evs.iter().map(|e| Event { ts: e.ts >> 5 << 5, ..*e }).collect();
        assert_eq!(back, rounded);
        assert_eq!(first_ts(&coarse), Some(evs[0].ts >> 5 << 5));
        assert!(
            coarse.len() * 10 < exact.len() * 9,
            "coarser times make a smaller payload: {} against {} bytes",
            coarse.len(),
            exact.len()
        );
        // A damaged mark asking for a shift no clock needs is refused, not applied.
        let (mut bad, mut mark) = (Vec::new(), Vec::new());
        put(&mut bad, MARK | SLACK_GLIBC | CLASS_ENDS | OLD_AGES | 41 << SHIFT_AT);
        put(&mut mark, MARK | SLACK_GLIBC | CLASS_ENDS | OLD_AGES | 5 << SHIFT_AT);
        assert!(coarse.starts_with(&mark));
        bad.extend_from_slice(&coarse[mark.len()..]);
        assert!(dec.decode(&bad, |_| ()).is_err());
    }

    #[test]
    fn format_4_payloads_still_decode() {
        let evs = heap_events(5_000, 9);
        let mut enc = ColumnEncoder { format_4: true, ..Default::default() };
        enc.set_time_shift(3);
        let (mut old, mut new) = (Vec::new(), Vec::new());
        enc.encode(&rows(&evs), &mut old).unwrap();
        enc.format_4 = false;
        enc.encode(&rows(&evs), &mut new).unwrap();
        assert_eq!(Header::parse(&old).unwrap().flags & CLASS_ENDS, 0);
        assert_eq!(Header::parse(&new).unwrap().flags & CLASS_ENDS, CLASS_ENDS);
        let rounded: Vec<Event> = evs.iter().map(|e| Event { ts: e.ts >> 3 << 3, ..*e }).collect();
        for payload in [&old, &new] {
            let mut back = Vec::new();
            ColumnDecoder::default().decode(payload, |e| back.push(e)).unwrap();
            assert_eq!(back, rounded);
        }
    }

    /// Blocks of three sizes allocated in turn, each size carved from a run of its own (as
    /// CPython's objects come, `PYTHONMALLOC=malloc`), a quarter of them freed.
    fn sizes_in_turn(n: u64) -> Vec<Event> {
        let mut runs = [0x5555_0000_0000u64, 0x5555_4000_0000, 0x5555_8000_0000];
        let mut out = Vec::new();
        for i in 0..n {
            let k = (i * 7 % 3) as usize;
            let size = [24u64, 56, 1000][k];
            let usable = glibc_usable(size);
            let ev = Event { ts: i * 40, tid: 7, op: Op::Malloc, addr: runs[k], old_addr: 0, size, usable, stack: 1 };
            runs[k] += usable + 8;
            out.push(ev);
            if i % 4 == 3 {
                out.push(Event { op: Op::Free, size: 0, usable: 0, stack: 0, ts: i * 40 + 1, ..out[out.len() - 3] });
            }
        }
        out
    }

    #[test]
    fn sizes_from_runs_of_their_own_code_as_their_class_ends() {
        let evs = sizes_in_turn(20_000);
        let (mut old, mut new) = (Vec::new(), Vec::new());
        ColumnEncoder { format_4: true, ..Default::default() }.encode(&rows(&evs), &mut old).unwrap();
        ColumnEncoder::default().encode(&rows(&evs), &mut new).unwrap();
        let (a_old, a_new) =
            (Header::parse(&old).unwrap().sections[ADDRS], Header::parse(&new).unwrap().sections[ADDRS]);
        // Every allocation's delta is 8 (the next chunk's header) from its class's previous
        // block: one byte each, where the previous allocation's end is gigabytes away.
        assert!(
            a_new.len() * 3 < a_old.len(),
            "addresses {} bytes with class ends against {}",
            a_new.len(),
            a_old.len()
        );
        let mut back = Vec::new();
        ColumnDecoder::default().decode(&new, |e| back.push(e)).unwrap();
        assert_eq!(back, evs);
    }

    #[test]
    fn reallocations_name_their_old_block_by_age() {
        let ev = |ts, op, addr, old_addr, size: u64| Event {
            ts,
            tid: 7,
            op,
            addr,
            old_addr,
            size,
            usable: if addr == 0 || op == Op::Free { 0 } else { glibc_usable(size) },
            stack: if op == Op::Free { 0 } else { 2 },
        };
        let (a, b, c, x) = (0x5555_0000_1000u64, 0x5555_0000_2000u64, 0x5555_0000_9000u64, 0x5555_7000_0000u64);
        let evs = vec![
            ev(1, Op::Malloc, a, 0, 100),
            // In place, then moved.
            ev(2, Op::Realloc, a, a, 104),
            ev(3, Op::Realloc, b, a, 2000),
            // The old block was allocated before this payload: coded as an address.
            ev(4, Op::Realloc, c, x, 64),
            // `realloc(b, 0)` releases b; the next allocation of its class takes it back.
            ev(5, Op::Realloc, 0, b, 0),
            ev(6, Op::Malloc, b, 0, 2000),
            // A failed reallocation leaves c allocated; it is freed afterwards.
            ev(7, Op::Realloc, 0, c, 1 << 50),
            ev(8, Op::Free, c, 0, 0),
            ev(9, Op::Free, b, 0, 0),
        ];
        let mut col = Vec::new();
        ColumnEncoder::default().encode(&rows(&evs), &mut col).unwrap();
        let h = Header::parse(&col).unwrap();
        assert_eq!(h.flags & OLD_AGES, OLD_AGES);
        // Ages 1 and 1 (a, then its in-place successor), an address, 2 (b) and 2 (c: a failed
        // reallocation is coded like the others, and c's free then by its address).
        let mut olds = Vec::new();
        let mut p = 0;
        while let Some(v) = read_var(h.sections[OLDS], &mut p) {
            olds.push(v);
        }
        assert_eq!((olds.len(), olds[..2].to_vec(), olds[3..].to_vec()), (5, vec![2, 2], vec![4, 4]));
        assert_eq!(olds[2] & 1, 1, "an old block from before the payload is coded by address");
        let mut back = Vec::new();
        ColumnDecoder::default().decode(&col, |e| back.push(e)).unwrap();
        assert_eq!(back, evs);
        // Rows and format-4 columns of the same events agree.
        let mut old = Vec::new();
        ColumnEncoder { format_4: true, ..Default::default() }.encode(&rows(&evs), &mut old).unwrap();
        back.clear();
        ColumnDecoder::default().decode(&old, |e| back.push(e)).unwrap();
        assert_eq!(back, evs);
    }

    #[test]
    fn pool_blocks_round_trip_between_heap_blocks() {
        // Tagged pool addresses interleaved with the heap's: deltas of about 2^60 each way.
        let mut evs = heap_events(2_000, 3);
        for e in evs.iter_mut().filter(|e| (e.addr >> 4) % 3 == 0 && e.addr != 0 && e.op != Op::Realloc) {
            e.addr |= crate::event::POOL_TAG;
            e.op = if e.op.class() == OpClass::Dealloc { Op::PoolFree } else { Op::PoolAlloc };
        }
        let row = rows(&evs);
        let mut col = Vec::new();
        ColumnEncoder::default().encode(&row, &mut col).unwrap();
        let mut back = Vec::new();
        ColumnDecoder::default().decode(&col, |e| back.push(e)).unwrap();
        assert_eq!(back, evs);
    }

    #[test]
    fn predicted_addresses_take_less_than_half_of_deltas() {
        let evs = heap_events(50_000, 9);
        let mut col = Vec::new();
        ColumnEncoder::default().encode(&rows(&evs), &mut col).unwrap();
        let mut p = 0;
        // The mark, tid, n, then the section lengths.
        let lens: Vec<u64> = (0..3 + SECTIONS - 1).map(|_| read_var(&col, &mut p).unwrap()).skip(1).collect();
        // What the rows spend on addresses: zigzag deltas against the previous non-zero one.
        let (mut prev, mut delta_bytes) = (0u64, Vec::new());
        for e in &evs {
            put(&mut delta_bytes, zigzag(e.addr.wrapping_sub(prev) as i64));
            if e.addr != 0 {
                prev = e.addr;
            }
        }
        assert!(lens[4] * 2 < delta_bytes.len() as u64, "{} bytes against {}", lens[4], delta_bytes.len());
    }

    /// A payload of trace format 2: no mark, slacks against the size.
    fn format_2(col: &[u8], evs: &[Event]) -> Vec<u8> {
        let h = Header::parse(col).unwrap();
        let mut slacks = Vec::new();
        for e in evs.iter().filter(|e| e.op.class() != OpClass::Dealloc) {
            put(&mut slacks, zigzag(e.usable.wrapping_sub(e.size) as i64));
        }
        let mut sections = h.sections.map(<[u8]>::to_vec);
        sections[SLACKS] = slacks;
        let mut out = Vec::new();
        put(&mut out, u64::from(h.tid));
        put(&mut out, h.n as u64);
        for s in &sections[..SECTIONS - 1] {
            put(&mut out, s.len() as u64);
        }
        sections.iter().for_each(|s| out.extend_from_slice(s));
        out
    }

    #[test]
    fn format_2_payloads_still_decode() {
        let evs = heap_events(5_000, 5);
        let mut col = Vec::new();
        ColumnEncoder { format_4: true, ..Default::default() }.encode(&rows(&evs), &mut col).unwrap();
        let old = format_2(&col, &evs);
        assert_ne!(old, col);
        let mut back = Vec::new();
        assert_eq!(ColumnDecoder::default().decode(&old, |e| back.push(e)).unwrap(), 7);
        assert_eq!(back, evs);
        assert_eq!((tid(&old), tid(&col)), (Some(7), Some(7)));
    }

    #[test]
    fn slacks_of_glibc_blocks_are_zeros() {
        let evs: Vec<Event> = heap_events(5_000, 5).into_iter().filter(|e| e.usable == glibc_usable(e.size)).collect();
        let mut col = Vec::new();
        ColumnEncoder::default().encode(&rows(&evs), &mut col).unwrap();
        let h = Header::parse(&col).unwrap();
        assert!(!h.sections[SLACKS].is_empty());
        assert!(h.sections[SLACKS].iter().all(|&b| b == 0));
    }

    #[test]
    fn parts_of_one_thread_make_one_payload() {
        let evs = heap_events(3_000, 11);
        let (a, b) = evs.split_at(1_234);
        let (ra, rb) = (rows(a), rows(b));
        let mut col = Vec::new();
        ColumnEncoder::default().encode_all(&[&ra, &rb], &mut col).unwrap();
        let mut back = Vec::new();
        ColumnDecoder::default().decode(&col, |e| back.push(e)).unwrap();
        assert_eq!(back, evs);
        let mut other = rows(b);
        other[0] = 8; // another thread id
        let mut out = Vec::new();
        assert!(ColumnEncoder::default().encode_all(&[&ra, &other], &mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn empty_payload_keeps_its_thread() {
        let mut col = Vec::new();
        ColumnEncoder::default().encode(&rows(&[]), &mut col).unwrap();
        let mut row = Vec::new();
        ColumnDecoder::default().to_rows(&col, &mut row).unwrap();
        assert_eq!(EventDecoder::new(&row).unwrap().tid(), 7);
        assert_eq!(EventDecoder::new(&row).unwrap().count(), 0);
    }

    #[test]
    fn damaged_payloads_are_errors_not_panics() {
        let evs = heap_events(2_000, 3);
        let mut col = Vec::new();
        ColumnEncoder::default().encode(&rows(&evs), &mut col).unwrap();
        let mut dec = ColumnDecoder::default();
        for cut in (0..col.len()).step_by(97) {
            let mut n = 0;
            assert!(dec.decode(&col[..cut], |_| n += 1).is_err(), "cut at {cut}");
            assert!(n < evs.len());
        }
        for i in (0..col.len()).step_by(31) {
            let mut bad = col.clone();
            bad[i] ^= 0x5a;
            let mut row = Vec::new();
            let _ = dec.to_rows(&bad, &mut row);
        }
    }

    /// One malloc of 200 bytes (a two-byte number) whose sizes section holds `sizes_len` bytes
    /// of it, the rest counted in the slacks section that follows.
    fn one_malloc(sizes_len: usize) -> Vec<u8> {
        let (size, slack, stack) = ([0xc8u8, 0x01], 8u8, 2u8);
        let mut sections: Vec<Vec<u8>> = vec![vec![Op::Malloc as u8], vec![5], vec![RECENT as u8 + 2]];
        sections.push(size[..sizes_len].to_vec());
        sections.push([&size[sizes_len..], &[slack][..]].concat());
        sections.push(vec![stack]);
        let mut out = Vec::new();
        put(&mut out, 7);
        put(&mut out, 1);
        for sec in &sections {
            put(&mut out, sec.len() as u64);
        }
        sections.iter().for_each(|sec| out.extend_from_slice(sec));
        out
    }

    #[test]
    fn a_number_never_runs_past_its_section() {
        let mut dec = ColumnDecoder::default();
        let mut got = Vec::new();
        dec.decode(&one_malloc(2), |e| got.push(e)).unwrap();
        assert_eq!((got.len(), got[0].size, got[0].usable, got[0].stack), (1, 200, 204, 1));
        // The same bytes with the size's second byte in the next section: malformed, although
        // the word the decoder reads holds the whole number.
        got.clear();
        assert!(dec.decode(&one_malloc(1), |e| got.push(e)).is_err());
        assert!(got.is_empty());
    }

    #[test]
    fn malformed_rows_are_refused_whole() {
        let row = rows(&heap_events(100, 4));
        let mut col = vec![1, 2, 3];
        assert!(ColumnEncoder::default().encode(&row[..row.len() - 1], &mut col).is_err());
        assert_eq!(col, [1, 2, 3]);
    }
}
