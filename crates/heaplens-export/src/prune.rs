//! A flame graph's size bounded by what a person can see, not by the trace. inferno draws every
//! frame at least `min_width` percent of the total wide (0.01% by default, so up to 10,000 a
//! level): 4,000 equal stacks 1,024 frames deep (a few hundred kilobytes of trace) made an 800
//! MB SVG, and inferno held every frame in memory first. [`prune`] raises the minimum width
//! until at most [`MAX_FRAMES`] frames are drawn, and cuts each stack where its frames get
//! narrower than that, so inferno is handed only what it would draw: the frames it draws and
//! their widths are exactly those it would have drawn with the raised minimum from the whole
//! stacks.

/// The most frames a flame graph draws (about 300 bytes of SVG each: some 15 MB).
pub const MAX_FRAMES: usize = 50_000;

/// inferno's own minimum width, percent of the total (`inferno::flamegraph::Options`).
pub const INFERNO_MIN_WIDTH_PCT: f64 = 0.01;

/// Buckets of the width histogram per factor of two.
const PER_OCTAVE: f64 = 16.0;

/// The folded stacks cut for drawing.
#[derive(Debug)]
pub struct Pruned {
    /// For each input line, how many of its outer frames to keep (0: none of them).
    pub keep: Vec<usize>,
    /// The minimum width to give inferno, percent of the total: inferno's own, or higher when
    /// that would draw more than the bound.
    pub min_width_pct: f64,
}

impl Pruned {
    /// Whether the minimum width was raised above inferno's own (frames were left out that
    /// inferno would have drawn).
    pub fn raised(&self) -> bool {
        self.min_width_pct > INFERNO_MIN_WIDTH_PCT
    }
}

/// Chooses the minimum width for `stacks` (`(folded stack, weight)`, frames separated by `;`,
/// the weight the one the graph's widths come from) so that at most `max_frames` frames are
/// at least that wide, and how much of each stack to keep. Time and memory are linear in the
/// frames of the input (plus a sort of the stacks).
pub fn prune(stacks: &[(&str, u64)], max_frames: usize) -> Pruned {
    let total: u64 = stacks.iter().fold(0u64, |a, &(_, n)| a.saturating_add(n));
    let mut keep: Vec<usize> = stacks.iter().map(|(s, _)| frames(s)).collect();
    if total == 0 {
        return Pruned { keep, min_width_pct: INFERNO_MIN_WIDTH_PCT };
    }
    // Frame by frame, so that the stacks under one node are neighbours: bytes compared with
    // `;` below every other (frames are escaped for a line: no control bytes), which orders
    // them as their frames in turn would be, without splitting them.
    let key = |b: &u8| if *b == b';' { 0 } else { *b };
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_unstable_by(|&a, &b| stacks[a].0.as_bytes().iter().map(key).cmp(stacks[b].0.as_bytes().iter().map(key)));
    let pct = |n: u64| n as f64 * 100.0 / total as f64;

    // The widths of all the graph's nodes, as a histogram on a log scale.
    let bucket = |p: f64| ((p / INFERNO_MIN_WIDTH_PCT).log2() * PER_OCTAVE).floor().max(-1.0) as i64;
    let mut histogram: std::collections::BTreeMap<i64, usize> = Default::default();
    walk(stacks, &order, |_, value, _| *histogram.entry(bucket(pct(value))).or_default() += 1);
    // The lowest bucket from which up all fit; a bucket is drawn whole or not at all.
    let mut drawn = 0usize;
    let mut lowest = None;
    for (&b, &n) in histogram.range(0..).rev() {
        if drawn + n > max_frames {
            break;
        }
        drawn += n;
        lowest = Some(b);
    }
    let all: usize = histogram.range(0..).map(|(_, n)| n).sum();
    let min_width_pct = match lowest {
        _ if all <= max_frames => INFERNO_MIN_WIDTH_PCT,
        Some(b) => INFERNO_MIN_WIDTH_PCT * 2f64.powf(b as f64 / PER_OCTAVE),
        // Not even the widest fits: only what is as wide as the whole graph.
        None => 100.0,
    };
    // Cut each stack at its first node narrower than that (nodes get narrower inwards).
    walk(stacks, &order, |depth, value, lines| {
        if pct(value) < min_width_pct {
            for &i in lines {
                keep[i] = keep[i].min(depth);
            }
        }
    });
    Pruned { keep, min_width_pct }
}

/// Calls `node(depth, value, lines)` for every node of the graph of `stacks` taken in `order`
/// (frame-wise sorted): the node at `depth` (0 outermost) is the frames the `lines` (indices
/// into `stacks`) share up to it, and `value` their summed weights. Children come before their
/// parents.
fn walk(stacks: &[(&str, u64)], order: &[usize], mut node: impl FnMut(usize, u64, &[usize])) {
    // Per open depth: its value and where its lines start in `order`.
    let mut open: Vec<(u64, usize)> = Vec::new();
    let mut previous: Option<&str> = None;
    for (at, &i) in order.iter().enumerate() {
        let (stack, n) = stacks[i];
        let shared = previous.map_or(0, |p| shared_frames(p, stack));
        close(&mut open, shared, at, order, &mut node);
        let depth = frames(stack);
        while open.len() < depth {
            open.push((0, at));
        }
        for level in open.iter_mut() {
            level.0 = level.0.saturating_add(n);
        }
        previous = Some(stack);
    }
    close(&mut open, 0, order.len(), order, &mut node);
}

/// The frames of a folded stack.
fn frames(stack: &str) -> usize {
    stack.bytes().filter(|&b| b == b';').count() + 1
}

/// How many outer frames two folded stacks share.
fn shared_frames(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let whole = |s: &[u8]| i == s.len() || s[i] == b';';
    let before = a[..i].iter().filter(|&&c| c == b';').count();
    before + usize::from(whole(a) && whole(b))
}

/// Closes the open nodes deeper than `keep`, their lines ending before `end`.
fn close(
    open: &mut Vec<(u64, usize)>,
    keep: usize,
    end: usize,
    order: &[usize],
    node: &mut impl FnMut(usize, u64, &[usize]),
) {
    while open.len() > keep {
        let depth = open.len() - 1;
        let (value, start) = open.pop().expect("an open node");
        node(depth, value, &order[start..end]);
    }
}

/// The frame that stands for the frames a cut stack left out: those narrower than the
/// minimum, so that the graph shows where their weight went (4,000 narrow stacks side by side
/// are one frame of their summed width, not an empty space).
pub const LEFT_OUT: &str = "[narrower frames left out]";

/// The stacks cut as [`Pruned::keep`] says, each ending in [`LEFT_OUT`] where it was cut when
/// `mark`, merged (their values by `add`) where cutting made them equal, in the input's order
/// of first appearance. Without `mark` a stack keeps at least its outermost frame.
pub fn cut<T: Copy>(lines: &[(String, T)], keep: &[usize], mark: bool, add: impl Fn(&mut T, T)) -> Vec<(String, T)> {
    let mut merged: Vec<(String, T)> = Vec::with_capacity(lines.len());
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for ((stack, value), &k) in lines.iter().zip(keep) {
        let k = if mark { k } else { k.max(1) };
        let short = match stack.match_indices(';').nth(k.wrapping_sub(1)) {
            _ if k == 0 => LEFT_OUT.to_string(),
            Some((at, _)) if mark => format!("{};{LEFT_OUT}", &stack[..at]),
            Some((at, _)) => stack[..at].to_string(),
            None => stack.clone(),
        };
        let short = short.as_str();
        match index.get(short) {
            Some(&at) => add(&mut merged[at].1, *value),
            None => {
                index.insert(short.to_string(), merged.len());
                merged.push((short.to_string(), *value));
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_graphs_are_drawn_as_inferno_would() {
        let p = prune(&[("main;a;b", 3), ("main;a;c", 1), ("main;d", 1)], MAX_FRAMES);
        assert_eq!(p.keep, [3, 3, 2]);
        assert!(!p.raised());
    }

    #[test]
    fn many_equal_deep_stacks_are_cut_where_they_part() {
        // 1,000 stacks share `main;run`, then each goes 100 frames deep on its own: 100,002
        // nodes. With a bound of 1,000 frames only the shared two (each 100%) are drawn.
        let stacks: Vec<String> = (0..1000)
            .map(|i| {
                let own: Vec<String> = (0..100).map(|d| format!("f{i}_{d}")).collect();
                format!("main;run;{}", own.join(";"))
            })
            .collect();
        let input: Vec<(&str, u64)> = stacks.iter().map(|s| (s.as_str(), 7)).collect();
        let p = prune(&input, 1000);
        assert!(p.raised());
        assert!(p.min_width_pct > 0.1 && p.min_width_pct <= 100.0, "{}", p.min_width_pct);
        assert!(p.keep.iter().all(|&k| k == 2), "{:?}", &p.keep[..5]);
        let lines: Vec<(String, u64)> = stacks.iter().map(|s| (s.clone(), 7)).collect();
        assert_eq!(cut(&lines, &p.keep, false, |a, b| *a += b), [("main;run".to_string(), 7000)]);
        let marked = format!("main;run;{LEFT_OUT}");
        assert_eq!(cut(&lines, &p.keep, true, |a, b| *a += b), [(marked, 7000)]);
    }

    #[test]
    fn the_wide_frames_stay_and_only_the_narrow_tails_go() {
        // One stack of 90% of the weight, 20 deep; 200 stacks of 0.05% each, 50 deep.
        let heavy: Vec<String> = (0..20).map(|d| format!("h{d}")).collect();
        let mut stacks = vec![(format!("main;{}", heavy.join(";")), 180_000u64)];
        for i in 0..200 {
            let own: Vec<String> = (0..50).map(|d| format!("s{i}_{d}")).collect();
            stacks.push((format!("main;{}", own.join(";")), 100));
        }
        let input: Vec<(&str, u64)> = stacks.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        let p = prune(&input, 100);
        assert!(p.raised());
        assert_eq!(p.keep[0], 21, "the heavy stack is whole");
        assert!(p.keep[1..].iter().all(|&k| k == 1), "the light ones keep `main` only");
        let lines: Vec<(String, u64)> = stacks.clone();
        let cut = cut(&lines, &p.keep, true, |a, b| *a += b);
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[1], (format!("main;{LEFT_OUT}"), 20_000));
        // Nothing below the width is drawn, and no more than the bound.
        assert!(p.min_width_pct > 0.05);
    }

    #[test]
    fn frames_are_shared_whole_or_not_at_all() {
        assert_eq!(shared_frames("x;y", "x;z"), 1);
        assert_eq!(shared_frames("x;y", "x;y;z"), 2);
        assert_eq!(shared_frames("x;y", "x;yz"), 1);
        assert_eq!(shared_frames("x;y", "x;y"), 2);
        assert_eq!(shared_frames("a", "b"), 0);
        // `b!x` sorts before `b;...` bytewise: the node `a;b` must still be one run.
        let p = prune(&[("a;b", 1), ("a;b!x", 1), ("a;b;c", 1)], MAX_FRAMES);
        assert_eq!(p.keep, [2, 2, 3]);
    }

    #[test]
    fn a_graph_without_weight_is_left_alone() {
        let p = prune(&[("a;b", 0)], 1);
        assert_eq!(p.keep, [2]);
        assert!(!p.raised());
    }
}
