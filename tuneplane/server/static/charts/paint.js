// Drawing a chart's data: each downsampled run's bucket min–max as a band, its lines, dots
// where the points are few, and the NaN/±inf marks. uPlot draws the axes, grid and cursor
// (see chart.js); this draws on the plot-area canvas above them, in a worker when the
// browser can (see layer.js), so that redrawing many runs costs the page almost nothing.
//
// A frame: {width, height, ratio (device pixels per CSS pixel), x: {min, max}, y: {min, max,
// log}, bands: [{xs, min, max, fill}], lines: [{xs, ys, stroke, width}], marks: [{color, xs,
// kinds}]}. Values are Float64Arrays, NaN where nothing is drawn (a gap).

/** Half the size of a NaN/±inf mark, in CSS pixels. */
const MARK_SIZE = 5;

/** Draw a frame on a 2D context of a canvas `frame.width` x `frame.height` device pixels. */
export function paint(ctx, frame) {
  const { width, height, ratio } = frame;
  ctx.clearRect(0, 0, width, height);
  const place = placing(frame);
  for (const band of frame.bands) {
    ctx.fillStyle = band.fill;
    ctx.fill(outline(band, place, height, ratio));
  }
  ctx.lineJoin = "round";
  for (const line of frame.lines) {
    ctx.strokeStyle = line.stroke;
    ctx.lineWidth = line.width * ratio;
    ctx.stroke(path(line, place));
    if (sparse(line, place, ratio)) dots(ctx, line, place, ratio);
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
function path({ xs, ys }, place) {
  const line = new Path2D();
  let drawing = false;
  for (let i = 0; i < xs.length; i++) {
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
function sparse({ xs, width }, place, ratio) {
  if (xs.length < 2) return xs.length === 1;
  const span = Math.abs(place.x(xs[xs.length - 1]) - place.x(xs[0]));
  return (xs.length - 1) * dotSize(width) * 2 * ratio <= span;
}

function dotSize(width) {
  return 3 + Math.max(1, width) * 2;
}

function dots(ctx, { xs, ys, stroke, width }, place, ratio) {
  const radius = (dotSize(width) * ratio) / 2;
  const all = new Path2D();
  for (let i = 0; i < xs.length; i++) {
    if (Number.isNaN(ys[i])) continue;
    const px = place.x(xs[i]);
    const py = place.y(ys[i]);
    all.moveTo(px + radius, py);
    all.arc(px, py, radius, 0, 2 * Math.PI);
  }
  ctx.fillStyle = "#fff";
  ctx.fill(all);
  ctx.strokeStyle = stroke;
  ctx.lineWidth = Math.max(1, radius * 0.4);
  ctx.stroke(all);
}

/**
 * Along the maxima and back along the minima, for every stretch of buckets with a maximum.
 * A minimum that cannot be drawn (at or below zero on a log scale: NaN) is the plot's bottom.
 */
function outline({ xs, min, max }, place, bottom, ratio) {
  const shape = new Path2D();
  const y = (v) => (Number.isNaN(v) ? bottom : place.y(v));
  let from = -1;
  for (let i = 0; i <= xs.length; i++) {
    const known = i < xs.length && !Number.isNaN(max[i]);
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
