// Saving something the page made (a chart's PNG) as a file.

export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** A file name made of safe characters only. */
export const fileName = (...parts) =>
  parts.map((p) => String(p).replace(/[^A-Za-z0-9_.-]+/g, "_")).join("-");
