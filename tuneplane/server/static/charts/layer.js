// The canvas over a chart's plot area that its data is drawn on (see paint.js). Where the
// browser can hand a canvas to a worker, one worker draws every chart's (painter.js): a live
// point that moves twenty runs' lines on eight charts then costs the page the few
// milliseconds of sending them, not the tens of drawing and rasterizing them. Elsewhere the
// page draws them itself.

import { debug } from "../lib/debug.js";
import { paint, update } from "./paint.js";

let worker; // shared by every layer; null where a canvas cannot be handed to one
const layers = new Map(); // id -> PlotLayer, for the worker's answers
let lastId = 0;
// Messages for the worker, sent together once the running script is done (a microtask): a
// live update that redraws eight charts sends one message, not eight.
let outbox = null;

function send(message, transfer = []) {
  if (!outbox) {
    outbox = { messages: [], transfer: [] };
    queueMicrotask(() => {
      const { messages, transfer: all } = outbox;
      outbox = null;
      worker.postMessage(messages, all);
    });
  }
  outbox.messages.push(message);
  outbox.transfer.push(...transfer);
}

function painter() {
  if (worker !== undefined) return worker;
  worker = null;
  if (typeof OffscreenCanvas === "undefined" || !HTMLCanvasElement.prototype.transferControlToOffscreen) return worker;
  worker = new Worker(new URL("./painter.js", import.meta.url), { type: "module" });
  worker.onmessage = ({ data }) => {
    for (const answer of data) layers.get(answer.id)?.answered(answer);
  };
  // The charts' data would be missing: say why where a developer looks.
  worker.onerror = (event) => console.error(`the worker drawing the charts failed: ${event.message}`);
  return worker;
}

export class PlotLayer {
  /** A canvas above `under` (uPlot's), below the cursor overlay that follows it. */
  constructor(under) {
    this.id = ++lastId;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "plot-layer";
    under.after(this.canvas);
    this.posted = 0; // the last frame sent
    this.done = 0; // the last frame drawn
    this.waiting = []; // [seq, resolve] for drawn() and bitmap()
    this.worker = painter();
    if (this.worker) {
      const offscreen = this.canvas.transferControlToOffscreen();
      send({ type: "attach", id: this.id, canvas: offscreen }, [offscreen]);
      layers.set(this.id, this);
    } else {
      this.ctx = this.canvas.getContext("2d");
      this.tables = new Map();
    }
    this.box = "";
  }

  /**
   * Draw a frame (see paint.js) over `box`, the plot area in CSS pixels {left, top, width,
   * height}. Its arrays are handed over, not copied: they must not be used again.
   */
  draw(frame, box) {
    const place = `${box.left} ${box.top} ${box.width} ${box.height}`;
    if (place !== this.box) {
      this.box = place;
      Object.assign(this.canvas.style, {
        left: `${box.left}px`,
        top: `${box.top}px`,
        width: `${box.width}px`,
        height: `${box.height}px`,
      });
    }
    const seq = ++this.posted;
    if (!this.worker) {
      if (this.canvas.width !== frame.width) this.canvas.width = frame.width;
      if (this.canvas.height !== frame.height) this.canvas.height = frame.height;
      const start = performance.now();
      update(this.tables, frame);
      paint(this.ctx, frame, this.tables);
      debug.paintMs += performance.now() - start;
      this.done = seq;
      return;
    }
    send({ type: "draw", id: this.id, seq, frame }, buffers(frame));
  }

  /** Resolves once every frame sent so far is drawn. */
  drawn() {
    if (this.done >= this.posted) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push([this.posted, resolve]));
  }

  /** What the layer shows, as something drawImage() takes (null while empty). */
  async bitmap() {
    if (!this.worker) return this.canvas.width && this.canvas.height ? this.canvas : null;
    const seq = this.posted;
    const answer = new Promise((resolve) => this.waiting.push([`bitmap ${seq}`, resolve]));
    send({ type: "bitmap", id: this.id, seq });
    return (await answer).bitmap;
  }

  answered(message) {
    if (message.type === "drawn") {
      this.done = Math.max(this.done, message.seq);
      debug.paintMs += message.ms;
    }
    const key = message.type === "bitmap" ? `bitmap ${message.seq}` : null;
    this.waiting = this.waiting.filter(([want, resolve]) => {
      const ready = key ? want === key : typeof want === "number" && want <= this.done;
      if (ready) resolve(message);
      return !ready;
    });
  }

  destroy() {
    this.canvas.remove();
    if (!this.worker) return;
    send({ type: "detach", id: this.id });
    layers.delete(this.id);
    for (const [, resolve] of this.waiting) resolve({ bitmap: null });
    this.waiting = [];
  }
}

/** The buffers of a frame's arrays (its updates' rows share one), to hand over with it. */
function buffers(frame) {
  const all = new Set(frame.updates.flatMap(({ columns }) => columns.map((column) => column.buffer)));
  for (const mark of frame.marks) all.add(mark.xs.buffer);
  return [...all];
}
