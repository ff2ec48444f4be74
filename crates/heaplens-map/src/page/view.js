// heaplens view: the memory map drawn from the blocks at every zoom, with the bias-weighted
// antialiasing of Moreta & Telea (equation 1, as crates/heaplens-map/src/canvas.rs), a context
// view, the occupancy bar and the heap over time on one time axis with a shared cursor.
"use strict";
(async function () {
  // All the page's data, in one JSON element; names from the trace only ever become text.
  const data = JSON.parse(document.getElementById("data").textContent);
  const meta = data.meta;
  const $ = (id) => document.getElementById(id);
  document.title = "heaplens: " + meta.title;
  $("title").textContent = meta.title;
  $("report").textContent = data.report;
  data.flames.forEach((f, i) => {
    const b = document.createElement("button");
    b.className = i === 0 ? "tab on" : "tab";
    b.dataset.tab = "flame" + i;
    b.textContent = f.title;
    $("tabs").appendChild(b);
  });
  data.flames.forEach((f, i) => {
    // An SVG document of its own, sandboxed: its script and ids stay apart from the page's.
    const frame = document.createElement("iframe");
    frame.id = "flame" + i;
    frame.className = i === 0 ? "flame on" : "flame";
    frame.setAttribute("sandbox", "allow-scripts");
    frame.src = "data:image/svg+xml;base64," + f.svg;
    $("tabs").appendChild(frame);
  });
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  const OTHER = [158, 158, 158];
  const rgbOf = (h) => [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)];
  const STOPS = [[48, 54, 204], [26, 166, 217], [77, 191, 77], [242, 204, 38], [217, 31, 26]];
  function blueToRed(v) {
    v = Math.max(0, Math.min(1, v || 0)) * (STOPS.length - 1);
    const i = Math.min(Math.floor(v), STOPS.length - 2), t = v - i, a = STOPS[i], b = STOPS[i + 1];
    return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t];
  }
  const bytes = (n) => {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return i ? n.toFixed(1) + " " + u[i] : n + " B";
  };
  const ns = (t) => t < 0 ? "-" + ns(-t) : t < 1e3 ? t.toFixed(0) + " ns" : t < 1e6 ? (t / 1e3).toFixed(1) + " us" : t < 1e9 ? (t / 1e6).toFixed(2) + " ms" : (t / 1e9).toFixed(3) + " s";

  // The blocks: gzipped little-endian columns (see page/collect.rs).
  const b64 = data.blocks;
  const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const buf = await new Response(new Blob([raw]).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  const n = meta.blocks;
  let off = 0;
  const take = (T, k) => { const a = new T(buf.slice(off, off + k * T.BYTES_PER_ELEMENT)); off += k * T.BYTES_PER_ELEMENT; return a; };
  const B = {
    alloc: take(Float64Array, n), free: take(Float64Array, n), addr: take(Float64Array, n),
    size: take(Float64Array, n), usable: take(Float64Array, n), stack: take(Uint32Array, n),
    thread: take(Uint16Array, n), live: take(Uint8Array, n),
  };
  // Rows of the compacted address axis (1000 for the whole height, from the bottom).
  const segs = meta.segments;
  const yOf = (a) => {
    let lo = 0, hi = segs.length - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (segs[m].lo <= a) lo = m; else hi = m - 1; }
    const s = segs[lo];
    return s.y0 + (Math.min(Math.max(a, s.lo), s.hi) - s.lo) * (s.y1 - s.y0) / (s.hi - s.lo);
  };
  B.y0 = new Float64Array(n); B.y1 = new Float64Array(n);
  for (let i = 0; i < n; i++) { B.y0[i] = yOf(B.addr[i]); B.y1[i] = yOf(B.addr[i] + Math.max(B.usable[i], 1)); }
  const FULL = { ta: 0, tb: meta.span_ns, ya: 0, yb: segs.length ? segs[segs.length - 1].y1 : 1000 };
  const st = { ...FULL, alpha: 0.3, mode: "function", cursor: null };

  const siteRgb = meta.sites.map((s) => rgbOf(s.color));
  const stackRgb = meta.stacks.map((s) => (s.site >= 0 ? siteRgb[s.site] : OTHER));
  function colour(i) {
    switch (st.mode) {
      case "thread": return B.thread[i] < PALETTE.length ? rgbOf(PALETTE[B.thread[i]]) : OTHER;
      case "size": return blueToRed((Math.log2(Math.max(B.usable[i], 1)) - 4) / 16);
      case "lifetime": return B.live[i] ? blueToRed(1) : blueToRed((Math.log10(Math.max(B.free[i] - B.alloc[i], 1)) - 3) / (Math.log10(Math.max(meta.span_ns, 1e4)) - 3));
      default: return stackRgb[B.stack[i]];
    }
  }

  // Equation 1 over a canvas: sums per pixel, whole columns through running sums per row.
  function draw(canvas, v, alpha) {
    const W = canvas.width, H = canvas.height, N = W * H;
    const F = new Float32Array(N), R = new Float32Array(N), G = new Float32Array(N), Bl = new Float32Array(N), S = new Float32Array(N);
    const W1 = W + 1, dF = new Float32Array(W1 * H), dR = new Float32Array(W1 * H), dG = new Float32Array(W1 * H), dB = new Float32Array(W1 * H), dS = new Float32Array(W1 * H);
    const sx = W / (v.tb - v.ta), sy = H / (v.yb - v.ya);
    const add = (row, col, f, c) => {
      if (f <= 0) return;
      const w = Math.pow(f, alpha), p = row * W + col;
      F[p] += w; R[p] += w * c[0]; G[p] += w * c[1]; Bl[p] += w * c[2]; S[p] += f;
    };
    for (let i = 0; i < n; i++) {
      if (B.free[i] < v.ta || B.alloc[i] > v.tb || B.y1[i] < v.ya || B.y0[i] > v.yb) continue;
      const x0 = Math.max((B.alloc[i] - v.ta) * sx, 0), x1 = Math.min((B.free[i] - v.ta) * sx, W);
      const y0 = Math.max((B.y0[i] - v.ya) * sy, 0), y1 = Math.min((B.y1[i] - v.ya) * sy, H);
      if (x1 <= x0 || y1 <= y0) continue;
      const c = colour(i);
      const c0 = Math.floor(x0), c1 = Math.min(Math.max(Math.ceil(x1), c0 + 1) - 1, W - 1);
      const r0 = Math.floor(y0), r1 = Math.min(Math.max(Math.ceil(y1), r0 + 1) - 1, H - 1);
      for (let r = r0; r <= r1; r++) {
        const fy = Math.min(y1, r + 1) - Math.max(y0, r);
        if (fy <= 0) continue;
        if (c0 === c1) { add(r, c0, (x1 - x0) * fy, c); continue; }
        add(r, c0, (c0 + 1 - x0) * fy, c);
        add(r, c1, (x1 - c1) * fy, c);
        if (c1 > c0 + 1) {
          const w = Math.pow(fy, alpha), a = r * W1 + c0 + 1, b = r * W1 + c1;
          dF[a] += w; dR[a] += w * c[0]; dG[a] += w * c[1]; dB[a] += w * c[2]; dS[a] += fy;
          dF[b] -= w; dR[b] -= w * c[0]; dG[b] -= w * c[1]; dB[b] -= w * c[2]; dS[b] -= fy;
        }
      }
    }
    const img = new ImageData(W, H), d = img.data;
    for (let r = 0; r < H; r++) {
      let f = 0, rr = 0, g = 0, bb = 0, s = 0;
      for (let col = 0; col < W; col++) {
        const q = r * W1 + col, p = r * W + col;
        f += dF[q]; rr += dR[q]; g += dG[q]; bb += dB[q]; s += dS[q];
        const wf = F[p] + f, o = ((H - 1 - r) * W + col) * 4;
        if (wf <= 1e-6) { d[o] = d[o + 1] = d[o + 2] = 255; d[o + 3] = 255; continue; }
        const bg = Math.pow(Math.max(0, 1 - Math.min(S[p] + s, 1)), alpha), t = wf + bg;
        d[o] = (R[p] + rr + 255 * bg) / t; d[o + 1] = (G[p] + g + 255 * bg) / t; d[o + 2] = (Bl[p] + bb + 255 * bg) / t; d[o + 3] = 255;
      }
    }
    return img;
  }

  // The occupancy bar and the heap over time, from the series (bytes in use per site).
  const series = meta.series, cols = series.length;
  const totals = series.map((c) => c.reduce((a, b) => a + b, 0));
  const peak = Math.max(1, ...totals);
  function seriesAt(x, W, v) {
    // The column of highest total among those this pixel covers.
    const a = Math.floor((v.ta + (x / W) * (v.tb - v.ta)) / meta.span_ns * cols);
    const b = Math.max(a, Math.floor((v.ta + ((x + 1) / W) * (v.tb - v.ta)) / meta.span_ns * cols) - 1);
    let best = -1;
    for (let k = Math.max(a, 0); k <= Math.min(b, cols - 1); k++) if (best < 0 || totals[k] > totals[best]) best = k;
    return best;
  }
  function drawBars(v) {
    const oc = $("occupancy"), octx = oc.getContext("2d"), hc = $("heap"), hctx = hc.getContext("2d");
    octx.clearRect(0, 0, oc.width, oc.height); hctx.fillStyle = "#fff"; hctx.fillRect(0, 0, hc.width, hc.height);
    for (let x = 0; x < oc.width; x++) {
      const k = seriesAt(x, oc.width, v);
      if (k < 0) continue;
      const c = blueToRed(totals[k] / peak);
      octx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`; octx.fillRect(x, 0, 1, oc.height);
      let y = hc.height;
      series[k].forEach((b, s) => {
        const h = (b / peak) * (hc.height - 2);
        hctx.fillStyle = s < meta.sites.length ? meta.sites[s].color : "#9e9e9e";
        hctx.fillRect(x, y - h, 1, h); y -= h;
      });
    }
    // The peak, marked and labelled.
    const px = ((meta.peak[1] - v.ta) / (v.tb - v.ta)) * hc.width;
    if (px >= 0 && px < hc.width) {
      hctx.fillStyle = "#222"; hctx.fillRect(Math.round(px), 0, 1, hc.height);
      const label = `peak ${bytes(meta.peak[0])}`;
      hctx.font = "11px sans-serif";
      const w = hctx.measureText(label).width;
      hctx.fillText(label, px + 4 + w < hc.width ? px + 4 : px - 4 - w, 11);
    }
  }

  let mapImg = null, ctxImg = null;
  const map = $("map"), mctx = map.getContext("2d"), ctxc = $("context"), cctx = ctxc.getContext("2d");
  function axes() {
    const xa = $("xaxis"); xa.replaceChildren();
    for (let k = 0; k <= 5; k++) {
      const d = document.createElement("div");
      d.style.left = (k * (map.width - 1)) / 5 - (k === 5 ? 70 : 0) + "px";
      d.textContent = ns(meta.offset_ns + st.ta + ((st.tb - st.ta) * k) / 5);
      xa.appendChild(d);
    }
    const ya = $("yaxis"); ya.replaceChildren();
    // Each visible address range labelled at its foot; a label that would overlap the one
    // below it (ranges a few pixels tall) is left out.
    let lastTop = Infinity;
    for (const s of segs) {
      if (s.y1 < st.ya || s.y0 > st.yb) continue;
      const top = Math.max(0, Math.min(map.height - 12, map.height - ((Math.max(s.y0, st.ya) - st.ya) / (st.yb - st.ya)) * map.height - 12));
      if (lastTop - top < 12) continue;
      lastTop = top;
      const d = document.createElement("div");
      d.style.top = top + "px";
      d.textContent = "0x" + Math.max(s.lo, s.lo + ((st.ya - s.y0) / (s.y1 - s.y0)) * (s.hi - s.lo)).toString(16).split(".")[0];
      ya.appendChild(d);
    }
  }
  function overlay() {
    mctx.putImageData(mapImg, 0, 0);
    cctx.putImageData(ctxImg, 0, 0);
    const fx = (t) => (t / FULL.tb) * ctxc.width, fy = (y) => ctxc.height - (y / FULL.yb) * ctxc.height;
    cctx.strokeStyle = "red"; cctx.lineWidth = 2;
    cctx.strokeRect(fx(st.ta), fy(st.yb), Math.max(fx(st.tb) - fx(st.ta), 2), Math.max(fy(st.ya) - fy(st.yb), 2));
    drawBars(st);
    if (st.cursor !== null) {
      const x = ((st.cursor - st.ta) / (st.tb - st.ta)) * map.width;
      for (const c of [map, $("occupancy"), $("heap")]) {
        const g = c.getContext("2d"); g.fillStyle = "rgba(0,0,0,.6)"; g.fillRect(Math.round(x), 0, 1, c.height);
      }
    }
  }
  let pending = false;
  function render() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      mapImg = draw(map, st, st.alpha);
      axes();
      overlay();
    });
  }
  function renderContext() { ctxImg = draw(ctxc, FULL, st.alpha); }

  // The block under a point of the map, the smallest of those within a pixel.
  function blockAt(mx, my) {
    const t = st.ta + (mx / map.width) * (st.tb - st.ta), y = st.ya + ((map.height - my) / map.height) * (st.yb - st.ya);
    const dt = (st.tb - st.ta) / map.width, dy = (st.yb - st.ya) / map.height;
    let best = -1, area = Infinity;
    for (let i = 0; i < n; i++) {
      if (B.alloc[i] > t + dt || B.free[i] < t - dt || B.y0[i] > y + dy || B.y1[i] < y - dy) continue;
      const a = (B.free[i] - B.alloc[i]) * (B.y1[i] - B.y0[i]);
      if (a < area) { area = a; best = i; }
    }
    return best;
  }
  function tip(i, ex, ey) {
    const t = $("tip");
    if (i < 0) { t.hidden = true; return; }
    const s = meta.stacks[B.stack[i]];
    const size = document.createElement("b");
    size.textContent = bytes(B.size[i]);
    const lines = [
      ` requested, ${bytes(B.usable[i])} usable at 0x${B.addr[i].toString(16)}`,
      `allocated at ${ns(meta.offset_ns + B.alloc[i])}, ` + (B.live[i] ? "live at exit" : `freed at ${ns(meta.offset_ns + B.free[i])} (lived ${ns(B.free[i] - B.alloc[i])})`),
      `thread ${meta.threads[B.thread[i]]}`,
      ...s.frames.map((f) => "  " + f),
    ];
    t.replaceChildren(size);
    lines.forEach((l, k) => { if (k) t.appendChild(document.createElement("br")); t.appendChild(document.createTextNode(l)); });
    t.hidden = false;
    t.style.left = Math.min(ex + 14, window.innerWidth - t.offsetWidth - 4) + "px";
    t.style.top = Math.min(ey + 14, window.innerHeight - t.offsetHeight - 4) + "px";
  }

  let drag = null;
  map.addEventListener("mousedown", (e) => { drag = { x: e.offsetX, y: e.offsetY, v: { ...st } }; });
  window.addEventListener("mouseup", () => { drag = null; });
  map.addEventListener("mousemove", (e) => {
    st.cursor = st.ta + (e.offsetX / map.width) * (st.tb - st.ta);
    if (drag) {
      const dt = ((e.offsetX - drag.x) / map.width) * (drag.v.tb - drag.v.ta), dy = ((e.offsetY - drag.y) / map.height) * (drag.v.yb - drag.v.ya);
      st.ta = drag.v.ta - dt; st.tb = drag.v.tb - dt; st.ya = drag.v.ya + dy; st.yb = drag.v.yb + dy;
      render();
      return;
    }
    if (mapImg) overlay();
    tip(blockAt(e.offsetX, e.offsetY), e.clientX, e.clientY);
  });
  map.addEventListener("mouseleave", () => { $("tip").hidden = true; });
  map.addEventListener("wheel", (e) => {
    e.preventDefault();
    const k = e.deltaY > 0 ? 1.25 : 0.8;
    if (e.shiftKey) {
      const y = st.ya + ((map.height - e.offsetY) / map.height) * (st.yb - st.ya);
      st.ya = y - (y - st.ya) * k; st.yb = y + (st.yb - y) * k;
    } else {
      const t = st.ta + (e.offsetX / map.width) * (st.tb - st.ta);
      st.ta = t - (t - st.ta) * k; st.tb = t + (st.tb - t) * k;
    }
    render();
  }, { passive: false });
  for (const id of ["occupancy", "heap"]) {
    $(id).addEventListener("mousemove", (e) => { st.cursor = st.ta + (e.offsetX / e.target.width) * (st.tb - st.ta); if (mapImg) overlay(); });
  }
  function goTo(e) {
    const t = (e.offsetX / ctxc.width) * FULL.tb, y = ((ctxc.height - e.offsetY) / ctxc.height) * FULL.yb;
    const wt = st.tb - st.ta, wy = st.yb - st.ya;
    st.ta = t - wt / 2; st.tb = t + wt / 2; st.ya = y - wy / 2; st.yb = y + wy / 2;
    render();
  }
  ctxc.addEventListener("mousedown", goTo);
  ctxc.addEventListener("mousemove", (e) => { if (e.buttons) goTo(e); });
  $("reset").addEventListener("click", () => { Object.assign(st, { ta: FULL.ta, tb: FULL.tb, ya: FULL.ya, yb: FULL.yb }); render(); });
  $("mode").addEventListener("change", (e) => { st.mode = e.target.value; legend(); renderContext(); render(); });
  $("alpha").addEventListener("input", (e) => { st.alpha = +e.target.value; $("alphav").textContent = e.target.value; renderContext(); render(); });
  for (const b of document.querySelectorAll(".tabs button")) {
    b.addEventListener("click", () => {
      for (const o of document.querySelectorAll(".tabs .on")) o.classList.remove("on");
      b.classList.add("on"); $(b.dataset.tab).classList.add("on");
    });
  }
  function legend() {
    const l = $("legend");
    l.replaceChildren();
    // A row: the swatch, then the text, which wraps rather than hides the site's innermost
    // frame (the end of its label); the whole label in the tooltip.
    const row = (c, text, title) => {
      const d = document.createElement("div"); const sw = document.createElement("i"); const t = document.createElement("span");
      sw.style.background = c; t.textContent = text; d.title = title || text;
      d.appendChild(sw); d.appendChild(t); l.appendChild(d);
    };
    if (st.mode === "function") { meta.sites.forEach((s) => row(s.color, `${s.short} (${bytes(s.bytes)})`, `${s.label} (${bytes(s.bytes)})`)); row("#9e9e9e", "the rest"); }
    else if (st.mode === "thread") { meta.threads.slice(0, PALETTE.length).forEach((t, k) => row(PALETTE[k], "thread " + t)); }
    else row("linear-gradient(90deg,#3036cc,#1aa6d9,#4dbf4d,#f2cc26,#d91f1a)", st.mode === "size" ? "16 B ... 1 MiB+ usable" : "1 us ... whole run");
  }
  const drawn = meta.blocks_in_window > n ? `${n} of ${meta.blocks_in_window} blocks (the largest by bytes × lifetime)` : `${n} blocks`;
  $("stats").textContent = `${drawn} over ${ns(meta.span_ns)}; peak ${bytes(meta.peak[0])} in use at ${ns(meta.offset_ns + meta.peak[1])}`;
  legend();
  renderContext();
  render();

  // For tests and scripts: where a block is on the screen, and which blocks a function made.
  window.heaplens = {
    blocks: n,
    findBlock(fn) { for (let i = 0; i < n; i++) if (meta.stacks[B.stack[i]].frames.some((f) => f.includes(fn))) return i; return -1; },
    blockCenter(i) {
      const r = map.getBoundingClientRect();
      const x = ((Math.max(B.alloc[i], st.ta) + Math.min(B.free[i], st.tb)) / 2 - st.ta) / (st.tb - st.ta) * map.width;
      const y = map.height - (((B.y0[i] + B.y1[i]) / 2 - st.ya) / (st.yb - st.ya)) * map.height;
      return [r.left + 1 + x, r.top + 1 + y];
    },
    zoomTo(i) {
      const dt = Math.max(B.free[i] - B.alloc[i], 1), dy = Math.max(B.y1[i] - B.y0[i], 1e-6);
      Object.assign(st, { ta: B.alloc[i] - dt, tb: B.free[i] + dt, ya: B.y0[i] - 4 * dy, yb: B.y1[i] + 4 * dy });
      render();
    },
    ready: false,
  };
  requestAnimationFrame(() => requestAnimationFrame(() => { window.heaplens.ready = true; }));
})().catch((e) => {
  const p = document.createElement("pre");
  p.className = "failed";
  p.textContent = `heaplens view failed: ${e}`;
  document.body.prepend(p);
});
