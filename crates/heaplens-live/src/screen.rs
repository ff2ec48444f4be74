//! What one screen shows, and the follower that makes one per round: it reads only what the
//! trace gained since the previous round ([`heaplens_interpret::follow`]) into a tally kept
//! from round to round, and remembers site names and the previous round's totals (for rates).

use std::collections::HashMap;
use std::path::PathBuf;

use heaplens_interpret::follow::{Follow, Step};
use heaplens_interpret::names::for_terminal;
use heaplens_interpret::paths::{resolve_attributed, Attribution, Naming};
use heaplens_interpret::Trace;

use crate::sort::Sort;
use crate::tally::{StackTally, Tally};
use crate::Options;

/// A call site's row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteRow {
    /// The site: the program's own innermost function (escaped for the terminal).
    pub site: String,
    /// Bytes held now (in the old blocks' table: by the old blocks).
    pub bytes: u64,
    /// Blocks held now (old blocks).
    pub blocks: u64,
    /// Bytes allocated per second since the previous screen.
    pub rate: u64,
    /// Allocations per second since the previous screen.
    pub allocs_rate: u64,
    /// Bytes allocated since recording started.
    pub total: u64,
    /// The oldest block's age in nanoseconds (old blocks only).
    pub age_ns: u64,
}

impl SiteRow {
    /// The number `sort` orders by.
    fn key(&self, sort: Sort) -> u64 {
        match sort {
            Sort::InUse => self.bytes,
            Sort::Rate => self.rate,
            Sort::Total => self.total,
        }
    }

    /// Adds another stack's numbers of the same site (saturating: a damaged trace's counters
    /// can be anything).
    fn add(&mut self, o: &SiteRow) {
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.blocks = self.blocks.saturating_add(o.blocks);
        self.rate = self.rate.saturating_add(o.rate);
        self.allocs_rate = self.allocs_rate.saturating_add(o.allocs_rate);
        self.total = self.total.saturating_add(o.total);
        self.age_ns = self.age_ns.max(o.age_ns);
    }
}

/// A thread's row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadRow {
    /// Thread id.
    pub tid: u32,
    /// Its name (escaped for the terminal).
    pub name: String,
    /// Allocations it made since recording started.
    pub allocations: u64,
    /// Bytes of the live blocks it allocated.
    pub live_bytes: u64,
}

/// One screen's content.
#[derive(Debug, Clone, Default)]
pub struct Screen {
    /// The program and its pid (escaped).
    pub program: String,
    /// Whether recording started by attaching to the running program.
    pub attached: bool,
    /// Whether the trace is sealed (the program ended, or was detached).
    pub sealed: bool,
    /// The trace is not sealed and nothing writes it any more (the program was killed, or
    /// the file is a cut copy).
    pub writer_gone: bool,
    /// Nanoseconds recorded so far.
    pub recorded_ns: u64,
    /// Bytes and blocks in use now, and the peak bytes.
    pub in_use: u64,
    /// See [`Screen::in_use`].
    pub blocks: u64,
    /// See [`Screen::in_use`].
    pub peak: u64,
    /// Allocations since recording started, and per second since the last screen.
    pub allocations: u64,
    /// See [`Screen::allocations`].
    pub allocations_per_s: u64,
    /// Frees of blocks allocated before recording started.
    pub unmatched: u64,
    /// Bytes in use at the end of each 100 ms step.
    pub series: Vec<u64>,
    /// The call sites, most first by [`Screen::sort`].
    pub sites: Vec<SiteRow>,
    /// What the call sites are sorted by.
    pub sort: Sort,
    /// Sites with blocks older than the threshold, most bytes first.
    pub old: Vec<SiteRow>,
    /// The leak candidates' threshold, nanoseconds.
    pub old_after_ns: u64,
    /// Threads, most live bytes first.
    pub threads: Vec<ThreadRow>,
    /// A line on the state of the view (waiting for the trace, the program ended).
    pub note: Option<String>,
}

/// A round's time and allocations, and (bytes, allocations) per stack.
type Previous = (u64, u64, HashMap<u32, (u64, u64)>);

/// Follows one trace: each [`Follower::refresh`] reads what it gained since the last one.
pub struct Follower {
    follow: Follow,
    rounds: Rounds,
    /// The file's length at the last round that read it, whether it had settled, and the
    /// screen then.
    last: Option<(u64, bool, Screen)>,
    screen: Screen,
}

/// What the screens are made from, apart from the trace being followed.
struct Rounds {
    path: PathBuf,
    options: Options,
    tally: Tally,
    /// Site name by stack id (stack ids are stable within a trace).
    names: HashMap<u32, String>,
    /// The previous round's time and allocations, and bytes/allocations per stack, for rates.
    previous: Option<Previous>,
    /// What the last screen's rates were counted from (kept for a screen with nothing new,
    /// such as one sorted again at once).
    basis: Option<Previous>,
    /// Of a trace of counters (`heaplens run --aggregate`): bytes in use at each snapshot seen,
    /// (ns since the start, bytes), for the screen's series.
    snapshots: Vec<(u64, u64)>,
}

impl Follower {
    /// Follows the trace at `path`.
    pub fn new(path: PathBuf, options: Options) -> Self {
        Follower {
            follow: Follow::new(&path),
            rounds: Rounds {
                tally: Tally::new(options.old_after_ns),
                path,
                options,
                names: HashMap::new(),
                previous: None,
                basis: None,
                snapshots: Vec::new(),
            },
            last: None,
            screen: Screen::default(),
        }
    }

    /// The call sites' order from now on (the screen shows it from the next refresh).
    pub fn set_sort(&mut self, sort: Sort) {
        self.rounds.options.sort = sort;
        self.last = None;
    }

    /// The order of the call sites now.
    pub fn sort(&self) -> Sort {
        self.rounds.options.sort
    }

    /// The tally of the events replayed so far (for checking it against a report).
    pub fn tally(&self) -> &Tally {
        &self.rounds.tally
    }

    /// Times the replay had to start over from the start of the trace (a block came older
    /// than what it had replayed).
    pub fn restarts(&self) -> u64 {
        self.follow.restarts()
    }

    /// Bytes of the trace read so far, over every round (each block once, unless the replay
    /// had to start over).
    pub fn bytes_read(&self) -> u64 {
        self.follow.bytes_read()
    }

    /// Reads what the trace gained since the last round (nothing when its length did not
    /// change) and returns the screen. A trace that cannot be read yet gives a screen saying
    /// so; the next round tries again.
    pub fn refresh(&mut self) -> &mut Screen {
        let len = self.follow.metadata().map(|m| m.len()).unwrap_or(0);
        // A trace that stopped growing unsealed (its writer gone) is replayed to its end once
        // it has settled: a round then, though its length did not change.
        let settled = self.follow.settled();
        let writing = self.writer_alive();
        let unchanged = self.last.as_ref().is_some_and(|(l, was, _)| *l == len && *was == settled);
        if unchanged && !writing {
            self.screen = self.last.as_ref().expect("checked").2.clone();
            return &mut self.screen;
        }
        if unchanged {
            // A program that allocates nothing for a while: the same events, later. Its
            // clock, rates and leak candidates go on.
            let now = heaplens_trace::monotonic_now_ns();
            self.rounds.tally.extend_to(now);
            self.rounds.tally.mark_old(&mut self.follow.live(), now);
            self.screen = self.rounds.make(self.follow.trace(), Some(now));
            return &mut self.screen;
        }
        let mut step = self.follow.advance(&mut self.rounds.tally);
        if let (Err(heaplens_interpret::LoadError::NoEvents { .. }), Some(_)) = (&step, &self.follow.trace().aggregate)
        {
            // Counters, not events: the newest snapshot, and a fresh one asked for while the
            // program runs (its monitor writes it within 50 ms, for the next round). The
            // first round learns only now which process writes it.
            let writing = writing || self.writer_alive();
            if writing {
                let _ = heaplens_output::create_request(&heaplens_trace::snapshot_request_path(&self.rounds.path));
            }
            let mut screen = self.rounds.make_aggregated(self.follow.trace());
            screen.writer_gone = !writing && settled && !screen.sealed;
            self.screen = screen;
            self.last = Some((len, settled, self.screen.clone()));
            return &mut self.screen;
        }
        if step.as_ref().is_ok_and(|s| *s == Step::Restarted) {
            // A block broke the order the replay assumed: the whole trace again, afresh.
            self.rounds.tally = Tally::new(self.rounds.options.old_after_ns);
            (self.rounds.previous, self.rounds.basis) = (None, None);
            step = self.follow.advance(&mut self.rounds.tally);
        }
        self.screen = match step {
            Ok(_) => {
                let now = (writing && !self.follow.trace().health.end_seen).then(heaplens_trace::monotonic_now_ns);
                if let Some(now) = now {
                    self.rounds.tally.extend_to(now);
                }
                self.rounds.tally.mark_old(&mut self.follow.live(), now.unwrap_or(0));
                let mut screen = self.rounds.make(self.follow.trace(), now);
                screen.writer_gone = !writing && settled && !screen.sealed;
                screen
            }
            Err(e) => Screen {
                note: Some(if self.rounds.path.exists() {
                    format!("waiting for the trace {}: {}", self.rounds.path.display(), e)
                } else {
                    format!("waiting for the trace {} to appear", self.rounds.path.display())
                }),
                old_after_ns: self.rounds.options.old_after_ns,
                sort: self.rounds.options.sort,
                ..Screen::default()
            },
        };
        if self.screen.note.is_none() {
            self.last = Some((len, settled, self.screen.clone()));
        }
        &mut self.screen
    }
}

impl Follower {
    /// Whether the process that writes the trace still holds it open, by the pid of its
    /// Process record: a program idle for a while is still being recorded, a killed one is not.
    fn writer_alive(&self) -> bool {
        let Some(pid) = self.follow.trace().process.as_ref().map(|p| p.pid) else { return false };
        let Ok(want) = std::fs::canonicalize(&self.rounds.path) else { return false };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
        fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == want))
    }
}

/// See [`Rounds::rate_basis`].
fn rate_basis(
    previous: &mut Option<Previous>,
    basis: &mut Option<Previous>,
    clock: u64,
    start: u64,
    sealed: bool,
) -> (u64, f64) {
    match previous {
        _ if sealed => *basis = None,
        Some(p) if p.0 < clock => *basis = previous.take(),
        Some(_) => {}
        None => *basis = None,
    }
    let (since, allocations) = basis.as_ref().map_or((start.min(clock), 0), |b| (b.0, b.1));
    (allocations, clock.saturating_sub(since).max(1) as f64 / 1e9)
}

/// The program and its pid (escaped), whether it was attached to, and when recording started
/// (`fallback` without a Process record).
fn header(trace: &Trace, fallback: u64) -> (String, bool, u64) {
    match &trace.process {
        Some(p) => {
            let name = p.argv.first().cloned().unwrap_or_else(|| p.exe.to_string_lossy().into_owned());
            (format!("{} (pid {})", for_terminal(&name), p.pid), p.attached, p.start_mono_ns)
        }
        None => ("?".into(), false, fallback),
    }
}

impl Rounds {
    /// The screen of the tally so far; `now` (`CLOCK_MONOTONIC` ns) while the program is
    /// still recorded, else the time of the last event or of the end.
    fn make(&mut self, trace: &Trace, now: Option<u64>) -> Screen {
        let t = &self.tally;
        let top = self.options.top;
        let (program, attached, start) = header(trace, t.first_ts);
        let now = t.last_ts.max(trace.end.map_or(0, |e| e.end_mono_ns)).max(now.unwrap_or(0));
        // Rates: since the previous round, or since recording started on the first; a round
        // with nothing new shows the last screen's. Counted on the events' own clock (the last
        // event's time): the events of a wall-clock moment reach the file up to a sweep
        // later, which made a short span after a detach count a second's worth twice. Once the
        // trace is sealed, the rates are the whole recording's.
        let clock = t.last_ts.max(start);
        let (since_allocs, span_s) =
            rate_basis(&mut self.previous, &mut self.basis, clock, start, trace.health.end_seen);
        let per_s = |x: u64| (x as f64 / span_s).round() as u64;
        let site_of = |id: u32, s: &StackTally| {
            let (b0, n0) = self.before(id);
            let rate = per_s(s.allocated_bytes.saturating_sub(b0));
            let allocs_rate = per_s(s.allocations.saturating_sub(n0));
            let row = SiteRow { bytes: s.live_bytes, blocks: s.live_blocks, rate, allocs_rate, ..SiteRow::default() };
            (id, SiteRow { total: s.allocated_bytes, ..row })
        };
        let sites: Vec<(u32, SiteRow)> = t.stacks.iter().map(|(&id, s)| site_of(id, s)).collect();
        let old: Vec<(u32, SiteRow)> = t
            .stacks
            .iter()
            .filter(|(_, s)| s.old_blocks > 0)
            .map(|(&id, s)| {
                (id, SiteRow { bytes: s.old_bytes, blocks: s.old_blocks, age_ns: s.oldest_ns, ..SiteRow::default() })
            })
            .collect();
        self.previous = Some((
            clock,
            t.allocations,
            t.stacks.iter().map(|(&id, s)| (id, (s.allocated_bytes, s.allocations))).collect(),
        ));
        let sort = self.options.sort;
        let sites = self.by_site(trace, sites, sort);
        let old = self.by_site(trace, old, Sort::InUse);
        let t = &self.tally;
        let names: HashMap<u32, &str> = trace.thread_names.iter().map(|n| (n.tid, n.name.as_str())).collect();
        let mut threads: Vec<ThreadRow> = t
            .threads
            .iter()
            .map(|(&tid, x)| ThreadRow {
                tid,
                name: for_terminal(names.get(&tid).copied().unwrap_or("")).into_owned(),
                allocations: x.allocations,
                live_bytes: x.live_bytes,
            })
            .collect();
        threads.sort_by(|a, b| {
            b.live_bytes.cmp(&a.live_bytes).then(b.allocations.cmp(&a.allocations)).then(a.tid.cmp(&b.tid))
        });
        threads.truncate(top);
        Screen {
            program,
            attached,
            sealed: trace.health.end_seen,
            writer_gone: false,
            recorded_ns: now.saturating_sub(start),
            in_use: t.in_use,
            blocks: t.blocks,
            peak: t.peak,
            allocations: t.allocations,
            allocations_per_s: per_s(t.allocations.saturating_sub(since_allocs)),
            unmatched: t.unmatched,
            series: t.series.clone(),
            sites,
            sort,
            old,
            old_after_ns: self.options.old_after_ns,
            threads,
            note: None,
        }
    }

    /// Moves the rates' basis on to the previous round when `clock` (ns) moved past it (to none
    /// once the trace is `sealed`: the rates are then the whole recording's, from `start`), and
    /// gives the allocations at the basis and the seconds since it.
    fn rate_basis(&mut self, clock: u64, start: u64, sealed: bool) -> (u64, f64) {
        rate_basis(&mut self.previous, &mut self.basis, clock, start, sealed)
    }

    /// Stack `id`'s (bytes, allocations) at the rates' basis.
    fn before(&self, id: u32) -> (u64, u64) {
        self.basis.as_ref().and_then(|b| b.2.get(&id).copied()).unwrap_or((0, 0))
    }

    /// The screen of a trace of counters (`heaplens run --aggregate`) from its newest snapshot:
    /// bytes in use and per call site, rates since the previous snapshot. Such a trace keeps
    /// no block's age and no thread's counts: the screen says so where those would be.
    fn make_aggregated(&mut self, trace: &Trace) -> Screen {
        let Some(a) = &trace.aggregate else { return Screen::default() };
        let (program, attached, start) = header(trace, 0);
        let now = trace.clock.to_ns(a.ts).max(start);
        let allocations: u64 = a.stacks.iter().fold(0, |n, s| n.saturating_add(s.allocs));
        let (since_allocs, span_s) = self.rate_basis(now, start, trace.health.end_seen);
        let per_s = |x: u64| (x as f64 / span_s).round() as u64;
        let sites: Vec<(u32, SiteRow)> = a
            .stacks
            .iter()
            .map(|c| {
                let (b0, n0) = self.before(c.stack);
                let row = SiteRow {
                    bytes: c.bytes.saturating_sub(c.freed_bytes),
                    blocks: c.allocs.saturating_sub(c.frees),
                    rate: per_s(c.bytes.saturating_sub(b0)),
                    allocs_rate: per_s(c.allocs.saturating_sub(n0)),
                    total: c.bytes,
                    ..SiteRow::default()
                };
                (c.stack, row)
            })
            .collect();
        self.previous = Some((now, allocations, a.stacks.iter().map(|c| (c.stack, (c.bytes, c.allocs))).collect()));
        let at = now.saturating_sub(start);
        if self.snapshots.last().is_none_or(|&(t, _)| t < at) {
            self.snapshots.push((at, a.in_use_bytes));
        }
        // The series' 100 ms steps, each at the bytes in use of the last snapshot before it
        // (the last MAX_STEPS of them: a damaged snapshot's time can be centuries on).
        let steps = at / crate::tally::STEP_NS + 1;
        let first = steps.saturating_sub(crate::tally::MAX_STEPS as u64);
        let mut series = Vec::with_capacity((steps - first) as usize);
        let mut k = 0;
        for step in first..steps {
            while k + 1 < self.snapshots.len() && self.snapshots[k + 1].0 <= step * crate::tally::STEP_NS {
                k += 1;
            }
            series.push(if self.snapshots[k].0 <= step * crate::tally::STEP_NS { self.snapshots[k].1 } else { 0 });
        }
        let sort = self.options.sort;
        let sites = self.by_site(trace, sites, sort);
        Screen {
            program,
            attached,
            sealed: trace.health.end_seen,
            writer_gone: false,
            recorded_ns: at,
            in_use: a.in_use_bytes,
            blocks: a.stacks.iter().fold(0, |n, c| n.saturating_add(c.allocs.saturating_sub(c.frees))),
            peak: a.peak_bytes,
            allocations,
            allocations_per_s: per_s(allocations.saturating_sub(since_allocs)),
            unmatched: a.unmatched_frees,
            series,
            sites,
            sort,
            old: Vec::new(),
            old_after_ns: self.options.old_after_ns,
            threads: Vec::new(),
            note: Some(
                "counters (--aggregate): a snapshot a round; no block ages (leak candidates) or threads recorded"
                    .into(),
            ),
        }
    }

    /// The `top` sites with the most by `sort` among the rows of `stacks` (each a stack's),
    /// the rows of one site's stacks added up.
    fn by_site(&mut self, trace: &Trace, mut stacks: Vec<(u32, SiteRow)>, sort: Sort) -> Vec<SiteRow> {
        let top = self.options.top;
        // A site that holds nothing now but allocates fast is still shown (below those that
        // hold bytes): short-lived blocks are often what a live view is watched for.
        let order = |r: &SiteRow| (r.key(sort), r.rate, r.total, r.blocks);
        stacks.retain(|(_, r)| r.bytes > 0 || r.rate > 0 || r.total > 0);
        stacks.sort_by(|a, b| order(&b.1).cmp(&order(&a.1)).then(a.0.cmp(&b.0)));
        // Stacks of one site add up: take more stacks than rows.
        stacks.truncate(top * 8);
        self.name(trace, stacks.iter().map(|r| r.0));
        let mut by_site: Vec<SiteRow> = Vec::new();
        for (id, row) in stacks {
            let site = self.names.get(&id).cloned().unwrap_or_else(|| format!("stack {id}"));
            match by_site.iter_mut().find(|r| r.site == site) {
                Some(r) => r.add(&row),
                None => by_site.push(SiteRow { site, ..row }),
            }
        }
        by_site.sort_by(|a, b| order(b).cmp(&order(a)).then(a.site.cmp(&b.site)));
        by_site.truncate(top);
        by_site
    }

    /// Names the stacks `ids` not named yet.
    fn name(&mut self, trace: &Trace, ids: impl Iterator<Item = u32>) {
        let ids: Vec<u32> = ids.filter(|id| !self.names.contains_key(id)).collect();
        if ids.is_empty() {
            return;
        }
        let (mut sym, _) = heaplens_interpret::symbolize::for_trace(&self.path, trace);
        let (frames, paths) = resolve_attributed(
            &trace.stacks,
            &ids,
            sym.as_mut(),
            false,
            Naming::default(),
            &Attribution::own_code(Vec::new()),
        );
        for (i, id) in ids.into_iter().enumerate() {
            let name = paths.get(i).first().map_or("<unknown>", |&s| frames.name(frames.function_of(s)));
            self.names.insert(id, for_terminal(name).into_owned());
        }
    }
}
