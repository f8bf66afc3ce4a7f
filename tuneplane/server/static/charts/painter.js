// The worker that draws charts' data (see paint.js and layer.js): it holds each chart's
// plot-area canvas, draws the frames it is sent and answers when they are drawn.

import { paint } from "./paint.js";

const canvases = new Map(); // layer id -> OffscreenCanvas

self.onmessage = async ({ data }) => {
  const { type, id } = data;
  if (type === "attach") {
    canvases.set(id, data.canvas);
  } else if (type === "detach") {
    canvases.delete(id);
  } else if (type === "draw") {
    const canvas = canvases.get(id);
    if (!canvas) return;
    const { frame } = data;
    if (canvas.width !== frame.width) canvas.width = frame.width;
    if (canvas.height !== frame.height) canvas.height = frame.height;
    paint(canvas.getContext("2d"), frame);
    self.postMessage({ type: "drawn", id, seq: data.seq });
  } else if (type === "bitmap") {
    const canvas = canvases.get(id);
    const bitmap = canvas?.width && canvas?.height ? await createImageBitmap(canvas) : null;
    self.postMessage({ type: "bitmap", id, seq: data.seq, bitmap }, bitmap ? [bitmap] : []);
  }
};
