// The worker that draws charts' data (see paint.js and layer.js): it holds each chart's
// plot-area canvas, draws the frames it is sent and answers when they are drawn.

import { paint, update } from "./paint.js";

const canvases = new Map(); // layer id -> OffscreenCanvas
const tables = new Map(); // layer id -> its tables (see paint.js)

self.onmessage = async ({ data }) => {
  const { type, id } = data;
  if (type === "attach") {
    canvases.set(id, data.canvas);
    tables.set(id, new Map());
  } else if (type === "detach") {
    canvases.delete(id);
    tables.delete(id);
  } else if (type === "draw") {
    const canvas = canvases.get(id);
    if (!canvas) return;
    const { frame } = data;
    if (canvas.width !== frame.width) canvas.width = frame.width;
    if (canvas.height !== frame.height) canvas.height = frame.height;
    update(tables.get(id), frame);
    paint(canvas.getContext("2d"), frame, tables.get(id));
    self.postMessage({ type: "drawn", id, seq: data.seq });
  } else if (type === "bitmap") {
    const canvas = canvases.get(id);
    const bitmap = canvas?.width && canvas?.height ? await createImageBitmap(canvas) : null;
    self.postMessage({ type: "bitmap", id, seq: data.seq, bitmap }, bitmap ? [bitmap] : []);
  }
};
