//! `heaplens map`: the time x address picture of the trace (see `heaplens-map`).

use std::io::{BufWriter, Write};

use anyhow::Context;
use heaplens_interpret::names::for_terminal;
use heaplens_map::{map_file, Align, Bins, ColorBy, Cushion, MapOptions};

use crate::picture::{is_svg, options, write_to};
use crate::{MapAlign, MapArgs, MapBins, MapColor, MapCushion};

/// Runs `heaplens map`; a failed map leaves no file behind (and an earlier one as it was).
pub fn execute(a: &MapArgs) -> anyhow::Result<()> {
    let opts = MapOptions {
        width: a.width as usize,
        height: a.height as usize,
        alpha: a.alpha,
        antialias: !a.no_antialias,
        cushion: match a.cushion {
            MapCushion::None => Cushion::None,
            MapCushion::Plateau => Cushion::Plateau,
            MapCushion::Parabolic => Cushion::Parabolic,
        },
        color_by: match a.color {
            MapColor::Function => ColorBy::Function,
            MapColor::Thread => ColorBy::Thread,
            MapColor::Size => ColorBy::Size,
            MapColor::Waste => ColorBy::Waste,
            MapColor::Lifetime => ColorBy::Lifetime,
        },
        bins: match a.bins {
            None => Bins::None,
            Some(MapBins::Size) => Bins::Size,
            Some(MapBins::Arena) => Bins::Arena,
        },
        align: match a.align {
            MapAlign::Time => Align::Time,
            MapAlign::Address => Align::Address,
        },
        split_min_bytes: a.split_min_bytes.unwrap_or(heaplens_interpret::split::MIN_BYTES),
        ..options(&a.sites, &a.time, a.addresses)?
    };
    let map = write_to(&a.output, &a.trace, &a.sites, |file| {
        let map = map_file(&a.trace, &opts)?;
        let mut out = BufWriter::new(file);
        let r = if is_svg(&a.output) { map.scene.write_svg(&mut out) } else { map.scene.write_png(&mut out) };
        r.and_then(|()| out.flush()).with_context(|| format!("cannot write {}", a.output.display()))?;
        Ok(map)
    })?;
    for d in &map.damage {
        eprintln!("heaplens: warning: {}: damaged trace, drawn as far as it reads: {d}", a.trace.display());
    }
    let (x, y, w, h) = map.area;
    eprintln!(
        "heaplens: drew {} blocks over {} address ranges in {} views{} to {} (the map: x={x} y={y} w={w} h={h} pixels of the picture)",
        map.blocks,
        map.axis.segments.len(),
        map.views,
        if map.halves { ", two halves at once" } else { "" },
        a.output.display()
    );
    for e in &map.legend {
        eprintln!("heaplens:   {} {}", heaplens_map::color::hex(e.rgb), for_terminal(&e.label));
    }
    Ok(())
}
