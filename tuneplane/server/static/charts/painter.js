// The worker that draws charts' data (see paint.js and layer.js): it holds each chart's
// plot-area canvas, draws the frames it is sent and answers when they are drawn.

import { paint, update } from "./paint.js";

const canvases = new Map(); // layer id -> OffscreenCanvas
const tables = new Map(); // layer id -> its tables (see paint.js)

/**
 * The worker's own scope (the checker's DOM types have `self` as a window, whose postMessage
 * takes an origin, not what to transfer).
 * @type {{onmessage: (event: MessageEvent) => void, postMessage: (message: unknown, transfer?: Transferable[]) => void}}
 */
const scope = /** @type {any} */ (self);

// Messages come in lists (one per task of the page), and the answers go back in lists.
scope.onmessage = async ({ data }) => {
  const answers = data.map(handle).filter(Boolean);
  const drawn = answers.filter((answer) => !(answer instanceof Promise));
  if (drawn.length) scope.postMessage(drawn);
  const bitmaps = await Promise.all(answers.filter((answer) => answer instanceof Promise));
  if (bitmaps.length) scope.postMessage(bitmaps, bitmaps.flatMap(({ bitmap }) => (bitmap ? [bitmap] : [])));
};

/** Act on one message: the answer, a promise of it (a bitmap), or null. */
function handle(data) {
  const { type, id } = data;
  if (type === "attach") {
    canvases.set(id, data.canvas);
    tables.set(id, new Map());
  } else if (type === "detach") {
    canvases.delete(id);
    tables.delete(id);
  } else if (type === "draw") {
    const canvas = canvases.get(id);
    if (!canvas) return null;
    const { frame } = data;
    if (canvas.width !== frame.width) canvas.width = frame.width;
    if (canvas.height !== frame.height) canvas.height = frame.height;
    const start = performance.now();
    update(tables.get(id), frame);
    paint(canvas.getContext("2d"), frame, tables.get(id));
    return { type: "drawn", id, seq: data.seq, ms: performance.now() - start };
  } else if (type === "bitmap") {
    const canvas = canvases.get(id);
    const bitmap = canvas?.width && canvas?.height ? createImageBitmap(canvas) : Promise.resolve(null);
    return bitmap.then((made) => ({ type: "bitmap", id, seq: data.seq, bitmap: made }));
  }
  return null;
}
