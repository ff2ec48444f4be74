//! `heaplens map`: pictures checked on their pixels. The widgets example's leaked red widgets
//! reach the right edge in make_red_widget's colour while the blue ones end before it; a
//! program of tiny short-lived blocks shows them with antialiasing and loses them without; two
//! threads' arenas are separate bands of their own colours; bad input fails cleanly.

mod common;

use std::path::Path;

use common::*;

/// A decoded PNG: width, height and RGB pixels.
struct Image {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Image {
    fn load(path: &Path) -> Image {
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).expect("the PNG")));
        let mut reader = decoder.read_info().expect("a PNG header");
        let mut px = vec![0; reader.output_buffer_size().expect("buffer size")];
        let info = reader.next_frame(&mut px).expect("PNG data");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        Image { w: info.width as usize, h: info.height as usize, px }
    }

    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        [self.px[i], self.px[i + 1], self.px[i + 2]]
    }
}

/// `(x, y, w, h)` of the map in the picture.
type Area = (usize, usize, usize, usize);
/// Legend entries: colour and label.
type Legend = Vec<([u8; 3], String)>;

/// The map's area `(x, y, w, h)` and the legend (`#rrggbb`, label) from `heaplens map`'s stderr.
fn described(stderr: &str) -> (Area, Legend) {
    let line = stderr.lines().find(|l| l.contains("(the map: ")).unwrap_or_else(|| panic!("no map area in\n{stderr}"));
    let nums: Vec<usize> = line[line.find("(the map: ").unwrap()..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let legend = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("heaplens:   #"))
        .map(|l| {
            let c = |i: usize| u8::from_str_radix(&l[i..i + 2], 16).unwrap();
            ([c(0), c(2), c(4)], l[7..].to_string())
        })
        .collect();
    ((nums[0], nums[1], nums[2], nums[3]), legend)
}

fn map(dir: &WorkDir, trace: &Path, out: &str, args: &[&str]) -> (Image, Area, Legend) {
    let png = dir.join(out);
    let mut all = vec!["map", trace.to_str().unwrap(), "-o", png.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = heaplens(dir, &all).ok("heaplens map");
    let (area, legend) = described(&o.stderr);
    (Image::load(&png), area, legend)
}

/// Squared distance between colours.
fn d2(a: [u8; 3], b: [u8; 3]) -> i32 {
    (0..3).map(|k| (a[k] as i32 - b[k] as i32).pow(2)).sum()
}

const WHITE: [u8; 3] = [255, 255, 255];

#[test]
fn widgets_red_ones_reach_the_right_edge_and_blue_ones_do_not() {
    let dir = WorkDir::new("map-widgets");
    let exe = compile_c(&dir, "widgets.c", &[]);
    let trace = dir.join("w.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("widgets under heaplens");
    let (img, (x, y, w, h), legend) = map(&dir, &trace, "w.png", &["--color", "function", "--cushion", "none"]);
    assert_eq!((img.w > x + w, img.h > y + h), (true, true));
    let colour =
        |name: &str| legend.iter().find(|(_, l)| l.contains(name)).unwrap_or_else(|| panic!("{name} in {legend:?}")).0;
    let (red, blue) = (colour("make_red_widget"), colour("make_blue_widget"));
    // Which of the two a pixel leans to (a blend with the background keeps its hue).
    let kind = |p: [u8; 3]| {
        if p == WHITE {
            0
        } else if d2(p, red) < d2(p, blue) {
            1
        } else {
            2
        }
    };
    let column = |cx: usize| -> (usize, usize) {
        let ks: Vec<i32> = (y..y + h).map(|r| kind(img.at(cx, r))).collect();
        (ks.iter().filter(|&&k| k == 1).count(), ks.iter().filter(|&&k| k == 2).count())
    };
    let (reds, blues) = column(x + w - 1);
    assert!(reds > h / 2, "the last column is mostly red widgets: {reds} of {h}");
    // Only the blue widgets consumed during the last column's own sliver of time show there.
    assert!(blues * 50 <= reds, "no blue widget is live at the end: {blues} blue pixels in the last column");
    // Blue widgets are live before the end: at the peak (all widgets made, none consumed yet)
    // they are in about half the heap's rows. Where the peak falls in time depends on the
    // machine's load, so take the column where they show most.
    let blues_most = (x..x + w).step_by(8).map(|c| column(c).1).max().unwrap_or(0);
    assert!(blues_most > h / 4, "blue widgets are there before the end: {blues_most} rows");
}

#[test]
fn tiny_blocks_show_with_antialiasing_and_vanish_without() {
    let dir = WorkDir::new("map-tiny");
    let exe = compile_c(&dir, "tiny_blocks.c", &[]);
    let trace = dir.join("t.hltrace");
    run_traced(&dir, &trace, &exe, &[] as &[&str]).ok("tiny_blocks under heaplens");
    let size = ["--color", "size", "--width", "600", "--height", "300"];
    // The 24-byte blocks are blue on the size scale, the 100000-byte ones orange.
    let bluest_row = |img: &Image, (x, y, w, h): Area| -> usize {
        (y..y + h)
            .map(|r| {
                (x..x + w)
                    .filter(|&c| {
                        let p = img.at(c, r);
                        p[2] as i32 > p[0] as i32 + 40
                    })
                    .count()
            })
            .max()
            .unwrap_or(0)
    };
    let (aa, area, _) = map(&dir, &trace, "aa.png", &size);
    let mut naive_args = size.to_vec();
    naive_args.push("--no-antialias");
    let (naive, area2, _) = map(&dir, &trace, "naive.png", &naive_args);
    assert_eq!(area, area2);
    let (shown, lost) = (bluest_row(&aa, area), bluest_row(&naive, area));
    // Where the program ran (a loaded machine leaves stretches with no event at all), the tiny
    // blocks' row shows; that is at least tens of columns of the 600.
    assert!(shown >= 30, "with antialiasing the tiny blocks' row shows: {shown} of {} columns", area.2);
    assert_eq!(lost, 0, "drawn naively, blocks smaller than a pixel vanish");
}

#[test]
fn two_threads_arenas_are_bands_of_their_colours() {
    let dir = WorkDir::new("map-threads");
    let (_, trace) = traced_churn(&dir, &["2", "100000"]);
    let (img, (x, y, w, h), legend) = map(&dir, &trace, "c.png", &["--color", "thread", "--cushion", "none"]);
    let out = heaplens(&dir, &["map", trace.to_str().unwrap(), "-o", dir.join("c2.png").to_str().unwrap()]).ok("map");
    let ranges: usize = out
        .stderr
        .split(" over ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(ranges >= 3, "the main heap and two thread arenas are separate ranges: {}", out.stderr);
    // The two workers (the threads after main) each own rows the other never touches.
    let workers: Vec<[u8; 3]> = legend.iter().skip(1).map(|(c, _)| *c).take(2).collect();
    assert_eq!(workers.len(), 2, "{legend:?}");
    let rows_of = |c: [u8; 3]| -> Vec<usize> {
        (y..y + h)
            .filter(|&r| (x..x + w).any(|col| img.at(col, r) != WHITE && d2(img.at(col, r), c) < 40 * 40))
            .collect()
    };
    let (a, b) = (rows_of(workers[0]), rows_of(workers[1]));
    assert!(a.len() > 20 && b.len() > 20, "both workers drawn: {} and {} rows", a.len(), b.len());
    let shared = a.iter().filter(|r| b.contains(r)).count();
    assert!(shared * 10 < a.len().min(b.len()), "the workers' arenas are apart: {shared} rows shared");

    // Correlated views: one per arena side by side, one per size class stacked on time.
    let v_png = dir.join("v.png");
    let views = |args: &[&str]| -> usize {
        let mut all = vec!["map", trace.to_str().unwrap(), "-o", v_png.to_str().unwrap()];
        all.extend_from_slice(args);
        let o = heaplens(&dir, &all).ok("map --bins");
        o.stderr.split(" views").next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap()
    };
    assert_eq!(views(&["--bins", "arena", "--align", "address"]), ranges, "a view per address range");
    let classes = views(&["--bins", "size"]);
    assert!(
        (2..=8).contains(&classes),
        "churn's strings, map nodes and vectors fall in several size classes: {classes}"
    );
    assert_eq!(views(&[]), 1);
}

#[test]
fn a_map_drawn_from_two_halves_at_once_is_the_map_drawn_in_one_pass() {
    let dir = WorkDir::new("map-halves");
    let (_, trace) = traced_churn(&dir, &["2", "100000"]);
    // Per size class: each view's occupancy bar is joined at the cut too.
    for args in [&["--color", "function"][..], &["--bins", "size", "--color", "lifetime"][..]] {
        let draw = |min: &str, out: &str| {
            let png = dir.join(out);
            let mut all = vec!["map", trace.to_str().unwrap(), "-o", png.to_str().unwrap(), "--split-min-bytes", min];
            all.extend_from_slice(args);
            let o = heaplens(&dir, &all).ok("heaplens map");
            (Image::load(&png), o.stderr)
        };
        let (split, said) = draw("0", "split.png");
        assert!(said.contains("two halves at once"), "{said}");
        let (whole, said_whole) = draw("18446744073709551615", "whole.png");
        assert!(!said_whole.contains("two halves"), "{said_whole}");
        let first = |s: &str, out: &str| s.lines().next().unwrap().replace(", two halves at once", "").replace(out, "");
        assert_eq!(first(&said, "split.png"), first(&said_whole, "whole.png"), "the same blocks, axis and views");
        assert_eq!((split.w, split.h), (whole.w, whole.h));
        // The sums add in another order: a pixel may round the other way, no more.
        let off: Vec<(usize, usize)> = (0..whole.h)
            .flat_map(|y| (0..whole.w).map(move |x| (x, y)))
            .filter(|&(x, y)| (0..3).any(|k| (split.at(x, y)[k] as i32 - whole.at(x, y)[k] as i32).abs() > 1))
            .collect();
        assert!(off.is_empty(), "{args:?}: {} pixels differ, the first at {:?}", off.len(), off.first());
        let drawn =
            (0..whole.h).flat_map(|y| (0..whole.w).map(move |x| (x, y))).filter(|&(x, y)| whole.at(x, y) != WHITE);
        assert!(drawn.count() > 100_000, "the picture is not empty");
    }
}

/// The timeline's two passes each replay two halves at once; the chart, its peak and the
/// peak's holders are those of the one-thread replays, with and without a time window.
#[test]
fn a_timeline_from_two_halves_at_once_is_the_timeline_from_one_pass() {
    let dir = WorkDir::new("timeline-halves");
    let (_, trace) = traced_churn(&dir, &["2", "100000"]);
    // When the peak came: "in use 30.4 ms after the first event".
    let first_ns = |o: &str| -> f64 {
        o.split("bytes in use ").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0.0)
    };
    // A window around the peak, wherever this machine's run put it.
    let peak = heaplens(&dir, &["timeline", trace.to_str().unwrap(), "-o", dir.join("p.svg").to_str().unwrap()]);
    let said = peak.ok("timeline").stderr;
    let unit = said.split("bytes in use ").nth(1).and_then(|s| s.split(' ').nth(1)).unwrap_or("");
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "µs" => 1e3,
        _ => 1.0,
    };
    let peak_ns = first_ns(&said) * scale;
    assert!(peak_ns > 0.0, "{said}");
    let (from, to) = (format!("{}ns", (peak_ns / 2.0) as u64), format!("{}ns", (peak_ns * 1.5) as u64 + 1));
    for window in [&[][..], &["--from", from.as_str(), "--to", to.as_str()][..]] {
        let chart = |min: &str, out: &str| {
            let svg = dir.join(out);
            let mut all =
                vec!["timeline", trace.to_str().unwrap(), "-o", svg.to_str().unwrap(), "--split-min-bytes", min];
            all.extend_from_slice(window);
            let o = heaplens(&dir, &all).ok("heaplens timeline");
            (std::fs::read_to_string(&svg).unwrap(), o.stderr.replace(svg.to_str().unwrap(), ""))
        };
        let (split, said) = chart("0", "split.svg");
        let (whole, said_whole) = chart("18446744073709551615", "whole.svg");
        assert_eq!(said, said_whole, "{window:?}: the same peak and holders");
        assert!(first_ns(&said) > 0.0, "{said}");
        assert_eq!(split, whole, "{window:?}: the same chart");
        assert!(split.contains("data:image/png;base64,"), "the chart is drawn");
    }
}

#[test]
fn svg_output_and_bad_input() {
    let dir = WorkDir::new("map-bad");
    let (exe, trace) = traced_widgets(&dir, &["200"]);
    // SVG: parses as XML, embeds the map, and names the call sites.
    let svg = dir.join("w.svg");
    heaplens(&dir, &["map", trace.to_str().unwrap(), "-o", svg.to_str().unwrap()]).ok("map to SVG");
    let script = "import sys, xml.etree.ElementTree as E\nr = E.parse(sys.argv[1]).getroot()\nns = '{http://www.w3.org/2000/svg}'\nprint(len(r.findall(ns + 'image')))\nprint(' '.join(t.text or '' for t in r.iter(ns + 'text')))";
    let mut py = std::process::Command::new("python3");
    py.args(["-c", script]).arg(&svg);
    let o = run_cmd(py, &dir.path).ok("python3 parses the SVG");
    let mut lines = o.stdout.lines();
    assert_eq!(lines.next(), Some("2"), "the map and the occupancy bar");
    assert!(lines.next().unwrap().contains("make_red_widget > make_widget"), "{}", o.stdout);

    // An aggregated trace has no events to draw.
    let agg = dir.join("agg.hltrace");
    let args = [
        "run".as_ref(),
        "--aggregate".as_ref(),
        "-o".as_ref(),
        agg.as_os_str(),
        "--".as_ref(),
        exe.as_os_str(),
        "50".as_ref(),
    ];
    heaplens(&dir, &args).ok("--aggregate");
    let out = dir.join("agg.png");
    let o = heaplens(&dir, &["map", agg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_one_line_error(&o, "map of an aggregated trace");
    assert!(o.stderr.contains("aggregate"), "{}", o.stderr);
    assert!(!out.exists(), "no picture is left behind");
    // An unwritable output, and a missing trace.
    let o = heaplens(&dir, &["map", trace.to_str().unwrap(), "-o", "/nonexistent-dir/m.png"]);
    assert_one_line_error(&o, "unwritable output");
    let o = heaplens(&dir, &["map", "/nonexistent.hltrace", "-o", dir.join("m.png").to_str().unwrap()]);
    assert_one_line_error(&o, "missing trace");
    // A damaged trace: drawn as far as it reads, with a warning, as the report does.
    let cut = dir.join("cut.hltrace");
    let bytes = std::fs::read(&trace).unwrap();
    // Cut inside its last blocks (the symbols): the events read, the file ends mid-block.
    std::fs::write(&cut, &bytes[..bytes.len() - 40]).unwrap();
    let cut_png = dir.join("cut.png");
    let o = heaplens(&dir, &["map", cut.to_str().unwrap(), "-o", cut_png.to_str().unwrap()]).ok("map of a cut trace");
    assert!(o.stderr.contains("warning") && o.stderr.contains("damaged trace"), "{}", o.stderr);
    assert!(Image::load(&cut_png).w > 0);
    // An empty window.
    let o = heaplens(
        &dir,
        &["map", trace.to_str().unwrap(), "-o", dir.join("e.png").to_str().unwrap(), "--addresses", "0x10-0x20"],
    );
    assert_one_line_error(&o, "empty window");
}

/// `heaplens timeline` on widgets: the peak is every widget made (they are all made before the
/// first is consumed), held by the red and blue widgets' call sites in the program's counts.
#[test]
fn timeline_peak_and_its_holders_match_the_program() {
    let dir = WorkDir::new("timeline");
    let (trace, t) = traced_example(&dir, "widgets.c", &[]);
    let (made, red, blue, size) = (num(&t, "made"), num(&t, "red"), num(&t, "blue"), num(&t, "size"));
    for file in ["t.png", "t.svg"] {
        let o = heaplens(&dir, &["timeline", trace.to_str().unwrap(), "-o", dir.join(file).to_str().unwrap()])
            .ok("timeline");
        let peak: u64 =
            o.stderr.split("peak ").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
        assert_eq!(peak, made * size, "{}", o.stderr);
        let held = |site: &str| -> u64 {
            o.stderr
                .lines()
                .find(|l| l.ends_with(site))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        assert_eq!(held("make_red_widget > make_widget"), red * size, "{}", o.stderr);
        assert_eq!(held("make_blue_widget > make_widget"), blue * size, "{}", o.stderr);
    }
    // The chart's first column is empty, its peak column full to the top.
    let png = Image::load(&dir.join("t.png"));
    let o =
        heaplens(&dir, &["timeline", trace.to_str().unwrap(), "-o", dir.join("t.png").to_str().unwrap()]).ok("again");
    let (x, y, w, h) = described(&o.stderr.replace("the chart: ", "the map: ")).0;
    let filled = |c: usize| (y..y + h).filter(|&r| png.at(c, r) != WHITE).count();
    assert!(filled(x) < h / 20, "nothing is in use at the start");
    assert!((x..x + w).any(|c| filled(c) >= h - 2), "the peak reaches the top");
}

/// A call site has one colour in every picture: the map's legend (on stderr) and the
/// timeline's (in its SVG) give make_red_widget and make_blue_widget the same colours, though
/// the red widgets, never freed, hold more bytes over time and the blue ones allocate more.
#[test]
fn map_and_timeline_give_a_call_site_one_colour() {
    let dir = WorkDir::new("colours");
    let (_exe, trace) = traced_widgets(&dir, &[]);
    let map = heaplens(&dir, &["map", trace.to_str().unwrap(), "-o", dir.join("m.png").to_str().unwrap()]).ok("map");
    let colour_in_map = |site: &str| -> String {
        let line =
            map.stderr.lines().find(|l| l.trim_end().ends_with(site)).unwrap_or_else(|| panic!("{}", map.stderr));
        line.split_whitespace().nth(1).unwrap().to_string()
    };
    let svg = dir.join("t.svg");
    heaplens(&dir, &["timeline", trace.to_str().unwrap(), "-o", svg.to_str().unwrap()]).ok("timeline");
    let svg = std::fs::read_to_string(&svg).unwrap();
    let colour_in_timeline = |site: &str| -> String {
        let at = svg.find(&format!(">{}<", site.replace('>', "&gt;"))).unwrap_or_else(|| panic!("{site} in {svg}"));
        // The swatch: the last rectangle before the label.
        let rect = &svg[svg[..at].rfind("<rect").unwrap()..at];
        let fill = rect.find("fill=\"").unwrap() + 6;
        rect[fill..fill + 7].to_string()
    };
    for site in ["make_red_widget > make_widget", "make_blue_widget > make_widget"] {
        assert_eq!(colour_in_map(site), colour_in_timeline(site), "{site}");
    }
    assert_ne!(colour_in_map("make_red_widget > make_widget"), colour_in_map("make_blue_widget > make_widget"));
}
