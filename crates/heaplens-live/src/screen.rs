//! What one screen shows, from one replay of the trace, and the follower that makes one per
//! round and remembers what it needs from the previous ones (site names, totals for rates).

use std::collections::HashMap;
use std::path::PathBuf;

use heaplens_interpret::names::for_terminal;
use heaplens_interpret::paths::{resolve_attributed, Attribution, Naming};
use heaplens_interpret::view::replay;
use heaplens_interpret::Trace;

use crate::tally::Tally;
use crate::Options;

/// A call site's row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteRow {
    /// The site: the program's own innermost function (escaped for the terminal).
    pub site: String,
    /// Bytes (held now, allocated per second, or held by old blocks, by table).
    pub bytes: u64,
    /// Blocks (held now, allocations per second, or old blocks).
    pub blocks: u64,
    /// The oldest block's age in nanoseconds (old blocks only).
    pub age_ns: u64,
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
    /// Sites holding the most bytes now.
    pub holding: Vec<SiteRow>,
    /// Sites allocating the most bytes per second (since the last screen).
    pub allocating: Vec<SiteRow>,
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

/// Follows one trace: each [`Follower::refresh`] replays it as far as it is written.
pub struct Follower {
    path: PathBuf,
    options: Options,
    /// Site name by stack id (stack ids are stable within a trace).
    names: HashMap<u32, String>,
    /// The previous round's time and allocations, and bytes/allocations per stack, for rates.
    previous: Option<Previous>,
    /// The file's length at the last replay, and the screen then.
    last: Option<(u64, Screen)>,
    screen: Screen,
}

impl Follower {
    /// Follows the trace at `path`.
    pub fn new(path: PathBuf, options: Options) -> Self {
        Follower { path, options, names: HashMap::new(), previous: None, last: None, screen: Screen::default() }
    }

    /// Replays the trace as far as it is written (when it grew) and returns the screen. A
    /// trace that cannot be read yet gives a screen saying so; the next round tries again.
    pub fn refresh(&mut self) -> &mut Screen {
        let len = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        if let Some((l, s)) = &self.last {
            if *l == len {
                self.screen = s.clone();
                return &mut self.screen;
            }
        }
        let mut tally = Tally::new(self.options.old_after_ns);
        self.screen = match replay(&self.path, &mut tally) {
            Ok(trace) => self.make(&trace, &tally),
            Err(e) => Screen {
                note: Some(format!("waiting for the trace {}: {}", self.path.display(), e)),
                old_after_ns: self.options.old_after_ns,
                ..Screen::default()
            },
        };
        if self.screen.note.is_none() {
            self.last = Some((len, self.screen.clone()));
        }
        &mut self.screen
    }

    fn make(&mut self, trace: &Trace, t: &Tally) -> Screen {
        let top = self.options.top;
        let (program, attached, start) = match &trace.process {
            Some(p) => {
                let name = p.argv.first().cloned().unwrap_or_else(|| p.exe.clone());
                (format!("{} (pid {})", for_terminal(&name), p.pid), p.attached, p.start_mono_ns)
            }
            None => ("?".into(), false, t.first_ts),
        };
        let now = t.last_ts.max(trace.end.map_or(0, |e| e.end_mono_ns));
        // Rates: since the previous round, or since recording started on the first.
        let (since, since_allocs, before) = match self.previous.take() {
            Some((ts, n, per)) if ts < now => (ts, n, per),
            _ => (start.min(now), 0, HashMap::new()),
        };
        let span_s = (now.saturating_sub(since)).max(1) as f64 / 1e9;
        let per_s = |x: u64| (x as f64 / span_s).round() as u64;
        let mut holding = Vec::new();
        let mut allocating = Vec::new();
        let mut old = Vec::new();
        for (&id, s) in &t.stacks {
            if s.live_bytes > 0 {
                holding.push((id, s.live_bytes, s.live_blocks, 0));
            }
            let (b0, n0) = before.get(&id).copied().unwrap_or((0, 0));
            if s.allocations > n0 {
                allocating.push((id, per_s(s.allocated_bytes - b0), per_s(s.allocations - n0), 0));
            }
            if s.old_blocks > 0 {
                old.push((id, s.old_bytes, s.old_blocks, s.oldest_ns));
            }
        }
        self.previous = Some((
            now,
            t.allocations,
            t.stacks.iter().map(|(&id, s)| (id, (s.allocated_bytes, s.allocations))).collect(),
        ));
        let mut rows = |mut v: Vec<(u32, u64, u64, u64)>| -> Vec<SiteRow> {
            v.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
            // Stacks of one site add up: take more stacks than rows.
            v.truncate(top * 8);
            self.name(trace, v.iter().map(|r| r.0));
            let mut by_site: Vec<SiteRow> = Vec::new();
            for (id, bytes, blocks, age_ns) in v {
                let site = self.names.get(&id).cloned().unwrap_or_else(|| format!("stack {id}"));
                match by_site.iter_mut().find(|r| r.site == site) {
                    Some(r) => {
                        r.bytes += bytes;
                        r.blocks += blocks;
                        r.age_ns = r.age_ns.max(age_ns);
                    }
                    None => by_site.push(SiteRow { site, bytes, blocks, age_ns }),
                }
            }
            by_site.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
            by_site.truncate(top);
            by_site
        };
        let (holding, allocating, old) = (rows(holding), rows(allocating), rows(old));
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
            recorded_ns: now.saturating_sub(start),
            in_use: t.in_use,
            blocks: t.blocks,
            peak: t.peak,
            allocations: t.allocations,
            allocations_per_s: per_s(t.allocations.saturating_sub(since_allocs)),
            unmatched: t.unmatched,
            series: t.series.clone(),
            holding,
            allocating,
            old,
            old_after_ns: self.options.old_after_ns,
            threads,
            note: None,
        }
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
