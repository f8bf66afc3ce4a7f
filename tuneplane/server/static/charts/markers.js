// Steps that reported NaN or ±inf are drawn as marks on the chart instead of being hidden:
// +inf as a triangle at the top edge, -inf at the bottom edge, NaN as a cross at the bottom.

const SIZE = 5;

/** A uPlot plugin; `marks()` returns [{color, xs, kinds}] for the current data. */
export function invalidMarkers(marks) {
  return {
    hooks: {
      draw: [
        (u) => {
          const groups = marks();
          if (!groups.length) return;
          const { ctx } = u;
          const ratio = u.pxRatio ?? devicePixelRatio;
          const size = SIZE * ratio;
          const { left, top, width, height } = u.bbox;
          ctx.save();
          ctx.lineWidth = 1.5 * ratio;
          for (const { color, xs, kinds } of groups) {
            ctx.strokeStyle = color;
            ctx.fillStyle = color;
            xs.forEach((x, i) => {
              if (x == null) return;
              const px = u.valToPos(x, "x", true);
              if (px < left - 1 || px > left + width + 1) return;
              ctx.beginPath();
              if (kinds[i] === "inf") {
                ctx.moveTo(px, top + 1);
                ctx.lineTo(px - size, top + 1 + size * 1.6);
                ctx.lineTo(px + size, top + 1 + size * 1.6);
                ctx.closePath();
                ctx.fill();
              } else if (kinds[i] === "-inf") {
                const y = top + height - 1;
                ctx.moveTo(px, y);
                ctx.lineTo(px - size, y - size * 1.6);
                ctx.lineTo(px + size, y - size * 1.6);
                ctx.closePath();
                ctx.fill();
              } else {
                const y = top + height - size - 2;
                ctx.moveTo(px - size, y - size);
                ctx.lineTo(px + size, y + size);
                ctx.moveTo(px + size, y - size);
                ctx.lineTo(px - size, y + size);
                ctx.stroke();
              }
            });
          }
          ctx.restore();
        },
      ],
    },
  };
}
