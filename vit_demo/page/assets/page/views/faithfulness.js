// How far to trust each map: a button scores the maps of the image in hand ("faithfulness": the tab's source, some 200
// forward passes), then the deletion and insertion curves of each map (attention, rollout, relevance, and random as
// the floor, with its spread) are drawn one panel above the other, with a key and the verdict in words. Scored with
// every head on: the board's choice does not change the scores (the caption says so while heads are off).
import { asked as answered, forgetFailures, need } from "../store.js";
import { escape } from "../view.js";

const STYLES = { // faithfulness.py's kinds, in pictures/figures.py's colours (matplotlib's tab10), drawn in this
  // order, each narrower than the one before and random dashed on top, so that curves that coincide show every colour.
  attention: { colour: "#1f77b4", name: "attention (last layer)", width: 8 },
  rollout: { colour: "#ff7f0e", name: "attention rollout", width: 5 },
  relevance: { colour: "#2ca02c", name: "relevance", width: 2 },
  random: { colour: "#7f7f7f", name: "random order", dash: [6, 4], width: 2 },
};
const PANELS = [
  ["deletion", "Deletion: the top patches removed", "% of patches removed (most relevant first)"],
  ["insertion", "Insertion: the top patches put back", "% of patches put back (most relevant first)"],
];

function panel(context, box, field, title, axis, reply) {
  // One curve kind in ``box`` {x, y, w, h}: axes from 0 to 100% of the patches and 0 to 100% probability.
  const left = box.x + 46, right = box.x + box.w - 16, top = box.y + 22, bottom = box.y + box.h - 34;
  const px = (share) => left + share * (right - left), py = (p) => bottom - p * (bottom - top);
  Object.assign(context, { font: "bold 13px sans-serif", fillStyle: "#222", textAlign: "left", textBaseline: "top" });
  context.fillText(title, box.x + 4, box.y + 2);
  Object.assign(context, { font: "11px sans-serif", strokeStyle: "#ddd", lineWidth: 1 });
  context.setLineDash([]);
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    context.beginPath();
    context.moveTo(left, py(tick) + 0.5);
    context.lineTo(right, py(tick) + 0.5);
    context.moveTo(px(tick) + 0.5, top);
    context.lineTo(px(tick) + 0.5, bottom);
    context.stroke();
    Object.assign(context, { fillStyle: "#444", textAlign: "right", textBaseline: "middle" });
    context.fillText(`${100 * tick}%`, left - 4, py(tick));
    Object.assign(context, { textAlign: "center", textBaseline: "top" });
    context.fillText(`${100 * tick}%`, px(tick), bottom + 3);
  }
  context.fillText(axis, (left + right) / 2, bottom + 17);
  context.save();
  context.translate(box.x + 9, (top + bottom) / 2);
  context.rotate(-Math.PI / 2);
  context.textBaseline = "middle";
  context.fillText(`probability of ${reply.label}`, 0, 0);
  context.restore();
  context.lineJoin = "round";
  for (const [kind, style] of Object.entries(STYLES)) {
    const curve = reply.curves[kind][field];
    Object.assign(context, { strokeStyle: style.colour, lineWidth: style.width });
    context.setLineDash(style.dash ?? []);
    context.beginPath();
    curve.forEach((p, i) => context[i ? "lineTo" : "moveTo"](px(i / (curve.length - 1)), py(p)));
    context.stroke();
  }
  context.setLineDash([]);
}

function key(reply) {
  // Each map's colour and name, and the area under its two curves (deletion: lower is better; insertion: higher),
  // random's with its spread over its rankings.
  const area = (kind, field) => reply.curves[kind][`${field}_auc`].toFixed(2);
  const spread = (field) => `<span class="vd-spread">±${reply.noise[field].toFixed(2)}</span>`;
  const rows = Object.entries(STYLES).map(([kind, style]) => {
    const random = kind === "random", name = random ? `${style.name} (mean of ${reply.rankings})` : style.name;
    const line = `<span class="vd-swatch${style.dash ? " vd-dashed" : ""}" style="--swatch: ${style.colour}; ` +
      `--swatch-width: ${Math.max(style.width, 3)}px"></span>`;
    return `<li data-kind="${kind}">${line}<span>${escape(name)}</span><span>${area(kind, "deletion")}` +
      `${random ? spread("deletion") : ""}</span><span>${area(kind, "insertion")}` +
      `${random ? spread("insertion") : ""}</span></li>`;
  });
  return '<li class="vd-key-head"><span></span><span>area under the curve</span><span>deletion<br>(lower is ' +
    `better)</span><span>insertion<br>(higher is better)</span></li>${rows.join("")}`;
}

function caption(view, reply, asked) {
  // What the view says above the chart: what the button does, that it is working, why it failed, or what is shown.
  const { live } = view;
  if (!live.state) return "Draw or upload an image first: the maps are scored for the image in hand.";
  if (asked?.pending) return `Scoring the maps ${live.source?.inPage ? "in this page" : "on the server"}…`;
  if (asked?.error) return `${escape(asked.error)}. Press the button again to retry.`;
  if (!reply) return view.element.querySelector(".vd-caption").dataset.prompt;
  const heads = live.knockout.off.length ? " · <i>scored with every head on, not with the heads switched off</i>" : "";
  return `How fast each map's top patches take <b>${escape(reply.label)}</b> away, or bring it back (scored in ` +
    `${Math.round(reply.ms)} ms ${escape(reply.where)})${heads}`;
}

export default {
  draw(view) { // (redrawn when heads are switched off too, to say that the scores keep every head on)
    const { live, element } = view, canvas = view.canvas;
    const asked = live.state && answered(live, "faithfulness", `${live.state.key}/scores`), reply = asked?.value;
    element.querySelector("button.vd-score").disabled = !live.state || asked?.pending || !live.source;
    canvas.hidden = !reply;
    canvas.dataset.numbers = reply ? JSON.stringify({ curves: reply.curves, noise: reply.noise }) : ""; // for tests
    const context = view.clear(reply ? "curves" : null, caption(view, reply, asked));
    element.querySelector(".vd-faithfulness-key").innerHTML = reply ? key(reply) : "";
    element.querySelector(".vd-faithfulness-verdict").innerHTML = reply?.text ?? "";
    if (!context) return;
    const half = canvas.height / 2;
    PANELS.forEach(([field, title, axis], i) =>
      panel(context, { x: 0, y: i * half, w: canvas.width, h: half }, field, title, axis, reply));
  },
  setup(view) {
    view.element.querySelector("button.vd-score").addEventListener("click", () => {
      // Score the maps of the image in hand, once per image (scored with every head on); a failure is asked again.
      if (!view.live.state) return;
      forgetFailures(view.live);
      need(view.live, "faithfulness", "scores", {}, false);
      view.draw();
    });
  },
};
