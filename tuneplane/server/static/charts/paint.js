// Drawing a chart's data: each downsampled run's bucket min–max as a band, its lines, dots
// where the points are few, and the NaN/±inf marks. uPlot draws the axes, grid and cursor
// (see chart.js); this draws on the plot-area canvas above them, in a worker when the
// browser can (see layer.js), so that redrawing many runs costs the page almost nothing.
//
// The runs' values are kept where they are drawn, as tables (one per run: its columns [xs,
// ...ys] as the chart's part() makes them), and a frame brings them up to date with only the
// rows that changed: a live point sends a row or two per run, not every run's every value.
//
// A frame: {width, height, ratio (device pixels per CSS pixel), x: {min, max}, y: {min, max,
// log}, background (the dots' fill), updates: [{table, length, from, columns: rows from..length-1 of each}], bands:
// [{table, fill}] (columns 1 and 2 are the minima and maxima), lines: [{table, column,
// stroke, width}], marks: [{color, xs, kinds}]}. Values are Float64Arrays, NaN for a gap.

/** Half the size of a NaN/±inf mark, in CSS pixels. */
const MARK_SIZE = 5;

/**
 * Bring `tables` (id -> {length, columns}) up to date with a frame's updates, and forget the
 * tables it no longer draws.
 */
export function update(tables, frame) {
  for (const { table, length, from, columns } of frame.updates) {
    let held = tables.get(table);
    if (!held || held.columns[0].length < length) {
      // Room to grow: live points add rows one at a time.
      const room = Math.max(length, Math.ceil(length * 1.5), 16);
      const grown = columns.map((_, c) => {
        const column = new Float64Array(room);
        if (held) column.set(held.columns[c].subarray(0, from));
        return column;
      });
      held = { length, columns: grown };
      tables.set(table, held);
    }
    held.length = length;
    columns.forEach((rows, c) => held.columns[c].set(rows, from));
  }
  const used = new Set([...frame.bands, ...frame.lines].map((item) => item.table));
  for (const id of tables.keys()) if (!used.has(id)) tables.delete(id);
}

/** Draw a frame on a 2D context of a canvas `frame.width` x `frame.height` device pixels. */
export function paint(ctx, frame, tables) {
  const { width, height, ratio } = frame;
  ctx.clearRect(0, 0, width, height);
  const place = placing(frame);
  for (const band of frame.bands) {
    const { length, columns } = tables.get(band.table);
    ctx.fillStyle = band.fill;
    ctx.fill(outline(columns[0], columns[1], columns[2], length, place, height, ratio));
  }
  ctx.lineJoin = "round";
  for (const line of frame.lines) {
    const { length, columns } = tables.get(line.table);
    const [xs, ys] = [columns[0], columns[line.column]];
    ctx.strokeStyle = line.stroke;
    ctx.lineWidth = line.width * ratio;
    ctx.stroke(path(xs, ys, length, place));
    if (sparse(xs, length, line.width, place, ratio)) dots(ctx, xs, ys, length, line, place, ratio, frame.background);
  }
  marks(ctx, frame.marks, place.x, width, height, ratio);
}

/** x and y of a value in device pixels of the plot area (uPlot's scales, as it places them). */
function placing({ width, height, x, y }) {
  const xSpan = x.max - x.min;
  const fx = xSpan > 0 ? width / xSpan : 0;
  const scale = y.log ? Math.log10 : (v) => v;
  const y0 = scale(y.min);
  const ySpan = scale(y.max) - y0;
  const fy = ySpan > 0 ? height / ySpan : 0;
  return {
    x: (v) => (v - x.min) * fx,
    y: (v) => height - (scale(v) - y0) * fy,
  };
}

/** A line through every value, broken where one is missing (NaN). */
function path(xs, ys, length, place) {
  const line = new Path2D();
  let drawing = false;
  for (let i = 0; i < length; i++) {
    const v = ys[i];
    if (Number.isNaN(v)) {
      drawing = false;
      continue;
    }
    const px = place.x(xs[i]);
    const py = place.y(v);
    if (drawing) line.lineTo(px, py);
    else line.moveTo(px, py);
    drawing = true;
  }
  return line;
}

/** Points a dot's width apart or more, on average, get dots (uPlot's rule for its points). */
function sparse(xs, length, width, place, ratio) {
  if (length < 2) return length === 1;
  const span = Math.abs(place.x(xs[length - 1]) - place.x(xs[0]));
  return (length - 1) * dotSize(width) * 2 * ratio <= span;
}

function dotSize(width) {
  return 3 + Math.max(1, width) * 2;
}

function dots(ctx, xs, ys, length, { stroke, width }, place, ratio, background) {
  const radius = (dotSize(width) * ratio) / 2;
  const all = new Path2D();
  for (let i = 0; i < length; i++) {
    if (Number.isNaN(ys[i])) continue;
    const px = place.x(xs[i]);
    const py = place.y(ys[i]);
    all.moveTo(px + radius, py);
    all.arc(px, py, radius, 0, 2 * Math.PI);
  }
  ctx.fillStyle = background;
  ctx.fill(all);
  ctx.strokeStyle = stroke;
  ctx.lineWidth = Math.max(1, radius * 0.4);
  ctx.stroke(all);
}

/**
 * Along the maxima and back along the minima, for every stretch of buckets with a maximum.
 * A minimum that cannot be drawn (at or below zero on a log scale: NaN) is the plot's bottom.
 */
function outline(xs, min, max, length, place, bottom, ratio) {
  const shape = new Path2D();
  const y = (v) => (Number.isNaN(v) ? bottom : place.y(v));
  let from = -1;
  for (let i = 0; i <= length; i++) {
    const known = i < length && !Number.isNaN(max[i]);
    if (known && from < 0) from = i;
    if (known || from < 0) continue;
    if (i - from === 1) {
      // A bucket between gaps would have no width: a bar of a pixel or so.
      const width = Math.max(1, ratio) * 1.5;
      const top = y(max[from]);
      shape.rect(place.x(xs[from]) - width / 2, top, width, y(min[from]) - top);
      from = -1;
      continue;
    }
    shape.moveTo(place.x(xs[from]), y(max[from]));
    for (let j = from + 1; j < i; j++) shape.lineTo(place.x(xs[j]), y(max[j]));
    for (let j = i - 1; j >= from; j--) shape.lineTo(place.x(xs[j]), y(min[j]));
    shape.closePath();
    from = -1;
  }
  return shape;
}

/** +inf as a triangle at the top edge, -inf at the bottom edge, NaN as a cross at the bottom. */
function marks(ctx, groups, x, width, height, ratio) {
  const size = MARK_SIZE * ratio;
  ctx.lineWidth = 1.5 * ratio;
  for (const { color, xs, kinds } of groups) {
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    xs.forEach((value, i) => {
      if (Number.isNaN(value)) return;
      const px = x(value);
      if (px < -1 || px > width + 1) return;
      ctx.beginPath();
      if (kinds[i] === "inf") {
        ctx.moveTo(px, 1);
        ctx.lineTo(px - size, 1 + size * 1.6);
        ctx.lineTo(px + size, 1 + size * 1.6);
        ctx.closePath();
        ctx.fill();
      } else if (kinds[i] === "-inf") {
        ctx.moveTo(px, height - 1);
        ctx.lineTo(px - size, height - 1 - size * 1.6);
        ctx.lineTo(px + size, height - 1 - size * 1.6);
        ctx.closePath();
        ctx.fill();
      } else {
        const y = height - size - 2;
        ctx.moveTo(px - size, y - size);
        ctx.lineTo(px + size, y + size);
        ctx.moveTo(px + size, y - size);
        ctx.lineTo(px - size, y + size);
        ctx.stroke();
      }
    });
  }
}
