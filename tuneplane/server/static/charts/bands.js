// Each downsampled run's bucket min–max as a shaded band under its line, so a spike that a
// bucket's mean hides stays visible. Drawn from each run's own buckets, one filled outline
// per stretch without gaps: uPlot's own bands work on the table of all runs joined and clip
// every fill, which with many runs overlaid was most of the cost of a redraw.

/** A uPlot plugin; `bands()` returns [{xs, min, max, fill}] for the current data. */
export function minMaxBands(bands) {
  return {
    hooks: {
      // After the axes and grid, before the lines.
      drawAxes: [
        (u) => {
          const list = bands();
          if (!list.length) return;
          const { ctx } = u;
          const { left, top, width, height } = u.bbox;
          ctx.save();
          ctx.beginPath();
          ctx.rect(left, top, width, height);
          ctx.clip();
          for (const band of list) {
            ctx.fillStyle = band.fill;
            ctx.fill(outline(u, band));
          }
          ctx.restore();
        },
      ],
    },
  };
}

/**
 * Along the maxima and back along the minima, for every stretch of buckets with a maximum.
 * A minimum that cannot be drawn (at or below zero on a log scale) is the plot's bottom.
 */
function outline(u, { xs, min, max }) {
  const path = new Path2D();
  const bottom = u.bbox.top + u.bbox.height;
  const x = (i) => u.valToPos(xs[i], "x", true);
  const y = (v) => (v == null ? bottom : u.valToPos(v, "y", true));
  let from = -1;
  for (let i = 0; i <= xs.length; i++) {
    const known = i < xs.length && max[i] != null;
    if (known && from < 0) from = i;
    if (known || from < 0) continue;
    if (i - from === 1) {
      // A bucket between gaps would have no width: a bar of a pixel or so.
      const width = Math.max(1, u.pxRatio ?? devicePixelRatio) * 1.5;
      path.rect(x(from) - width / 2, y(max[from]), width, y(min[from]) - y(max[from]));
      from = -1;
      continue;
    }
    path.moveTo(x(from), y(max[from]));
    for (let j = from + 1; j < i; j++) path.lineTo(x(j), y(max[j]));
    for (let j = i - 1; j >= from; j--) path.lineTo(x(j), y(min[j]));
    path.closePath();
    from = -1;
  }
  return path;
}
