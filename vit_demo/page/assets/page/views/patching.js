// Activation patching (Heimersheim & Nanda 2024): two images kept from the tab (clean and corrupt), and for them, the
// share of the logit difference each head and each position of the residual stream restores, both directions
// ("patching": the tab's source), as diverging heatmaps.
import { fromBase64 } from "../numbers.js";
import { overlay } from "../picture.js";
import { ask, asked as answered, asking } from "../store.js";
import { escape } from "../view.js";

function diverging(table) {
  // The house's diverging scale (render.DIVERGING: 256 RGB, the template's data-colours) as value -> CSS colour: -1
  // blue, 0 white (the corrupt run), 1 red (the clean run); beyond, the ends.
  return (value) => {
    const at = Math.round((Math.max(-1, Math.min(1, value)) + 1) * 127.5) * 3;
    return `rgb(${table[at]},${table[at + 1]},${table[at + 2]})`;
  };
}

function headsGrid(canvas, values, colour) {
  // (L, H) restored shares as a heatmap, each written in its cell; layers down, heads across.
  const L = values.length, H = values[0].length, left = 62, top = 20, w = 46, h = 26;
  canvas.width = left + H * w;
  canvas.height = top + L * h;
  const context = Object.assign(canvas.getContext("2d"), { font: "12px sans-serif", textBaseline: "middle",
                                                          textAlign: "center", fillStyle: "#444" });
  for (let head = 0; head < H; head++) context.fillText(`head ${head + 1}`, left + head * w + w / 2, top / 2);
  for (let layer = 0; layer < L; layer++) {
    Object.assign(context, { textAlign: "right", fillStyle: "#444" });
    context.fillText(`layer ${layer + 1}`, left - 6, top + layer * h + h / 2);
    context.textAlign = "center";
    for (let head = 0; head < H; head++) {
      const value = values[layer][head], x = left + head * w, y = top + layer * h;
      context.fillStyle = colour(value);
      context.fillRect(x + 1, y + 1, w - 2, h - 2);
      context.fillStyle = Math.abs(value) > 0.6 ? "#fff" : "#111";
      context.fillText(Math.abs(value) < 0.005 ? "0.00" : value.toFixed(2), x + w / 2, y + h / 2); // no "-0.00"
    }
  }
}

function residualGrid(canvas, values, { grid, prefix }, colour) {
  // (L, T) restored shares: per layer, [CLS] as a bar over the patches laid out as in the image.
  const L = values.length, cell = grid <= 7 ? 7 : 6, tile = grid * cell, gap = 8, top = 16, bar = 10;
  canvas.width = L * (tile + gap) - gap;
  canvas.height = top + bar + 2 + tile;
  const context = Object.assign(canvas.getContext("2d"), { font: "12px sans-serif", textAlign: "center",
                                                          textBaseline: "middle" });
  // Each tile's layer ("layer 10"), or its number alone where that is wider than the tile (small patch grids).
  const named = context.measureText(`layer ${L}`).width <= tile + gap - 2;
  for (let layer = 0; layer < L; layer++) {
    const x = layer * (tile + gap), row = values[layer];
    context.fillStyle = "#444";
    context.fillText(named ? `layer ${layer + 1}` : String(layer + 1), x + tile / 2, top / 2);
    context.fillStyle = colour(row[0]);
    context.fillRect(x, top, tile, bar);
    for (let patch = 0; patch < grid * grid; patch++) {
      context.fillStyle = colour(row[prefix + patch]);
      context.fillRect(x + (patch % grid) * cell, top + bar + 2 + Math.floor(patch / grid) * cell, cell, cell);
    }
    context.strokeStyle = "#bbb";
    context.strokeRect(x + 0.5, top + bar + 2.5, tile - 1, tile - 1);
  }
}

function drawSlots(root, live) {
  for (const slot of ["clean", "corrupt"]) {
    const box = root.querySelector(`.vd-slot[data-slot="${slot}"]`), kept = live.patching[slot];
    const canvas = box.querySelector("canvas"), context = canvas.getContext("2d");
    box.querySelector(".vd-slot-label").innerHTML = kept ? `read as <b>${escape(kept.numbers.label)}</b>` : "none yet";
    if (kept) overlay(context, kept, null, canvas.width); // the image as the model read it, as the views draw it
    else context.clearRect(0, 0, canvas.width, canvas.height);
    box.querySelector("button.vd-use").disabled = !live.state;
  }
}

function drawGrids(grids, reply, colour) {
  const [clean, corrupt] = reply.classes.map(escape);
  const directions = [["clean_into_corrupt", `Clean into corrupt: the ${corrupt}'s run, given one part of the ` +
                       `${clean}'s`], ["corrupt_into_clean", `Corrupt into clean: the ${clean}'s run, given one ` +
                       `part of the ${corrupt}'s`]];
  grids.innerHTML = directions.map(([name, title]) => `<div class="vd-direction" data-direction="${name}">` +
    `<div class="vd-caption"><b>${title}</b></div><canvas class="vd-patch-heads" role="img" aria-label="${title}: ` +
    `each head"></canvas>${reply.residual ? '<div class="vd-caption">The residual stream after each layer: ' +
    "[CLS] (bar), then each patch where it sits</div>" + '<canvas class="vd-patch-residual" role="img" ' +
    `aria-label="${title}: each position of the residual stream"></canvas>` : ""}</div>`).join("");
  for (const [name] of directions) {
    const block = grids.querySelector(`[data-direction="${name}"]`);
    headsGrid(block.querySelector("canvas.vd-patch-heads"), reply[name].heads, colour);
    if (reply.residual) residualGrid(block.querySelector("canvas.vd-patch-residual"), reply[name].residual, reply,
                                     colour);
  }
}

export default {
  knockout: false, // two kept images, every head on
  draw(view) {
    const { live, element } = view, root = element.querySelector(".vd-patching"), kept = live.patching;
    drawSlots(root, live);
    const status = root.querySelector(".vd-patching-status"), grids = root.querySelector(".vd-patching-grids");
    const more = root.querySelector("button.vd-residual");
    more.hidden = true;
    root.dataset.drawn = "";
    const none = (text) => ((grids.innerHTML = ""), (status.innerHTML = text));
    if (!kept.clean || !kept.corrupt)
      return none(kept.clean || kept.corrupt ? "Now keep a second image, one the model reads as another class." :
        "Draw or pick an image, keep it as clean; then another, and keep it as corrupt.");
    const label = kept.clean.numbers.label;
    if (label === kept.corrupt.numbers.label)
      return none(`The model reads both images as <b>${escape(label)}</b>: keep two it tells apart.`);
    const pair = `${kept.clean.key}/${kept.corrupt.key}`, atOnce = root.dataset.residual === "true";
    const wanted = atOnce || kept.residual === pair; // the photos' residual grid: asked for on a button
    const request = { clean: kept.clean.numbers.image, corrupt: kept.corrupt.numbers.image, residual: wanted };
    const asked = live.source ? ask(live, "patching", `${pair}/${wanted}`, () => live.source.patching(request),
                                    () => view.draw()) : { pending: true }; // (only this view shows them)
    const reply = asked.value ?? answered(live, "patching", `${pair}/${!wanted}`)?.value;
    if (!reply)
      return none(asked.error ? `${escape(asked.error)}.` : `Patching every head and position: ${asking(live)}`);
    const [clean, corrupt] = reply.classes.map(escape);
    const took = `${reply.ms} ms ${reply.where}`; // "in this page" or "on the server"
    status.innerHTML = `Logit difference ${clean} − ${corrupt}: <b>${reply.logit_diff.clean.toFixed(2)}</b> for the ` +
      `clean image, <b>${reply.logit_diff.corrupt.toFixed(2)}</b> for the corrupt one (${took})` +
      (asked.error ? `. ${escape(asked.error)}.` : asked.pending ? `. The residual stream: ${asking(live)}` : ".");
    more.hidden = reply.residual || asked.pending || root.dataset.residual === "none"; // (none: too large to patch)
    drawGrids(grids, reply, (root.colour ??= diverging(fromBase64(root.dataset.colours))));
    root.dataset.drawn = `${pair}/${reply.residual}`;
  },
  setup(view) {
    view.element.addEventListener("click", (event) => {
      const button = event.target.closest("button"), { live } = view, kept = live.patching;
      if (button?.classList.contains("vd-use") && live.state) kept[button.dataset.slot] = live.state; // (and its key)
      else if (button?.classList.contains("vd-residual") && kept.clean && kept.corrupt)
        kept.residual = `${kept.clean.key}/${kept.corrupt.key}`;
      else return;
      view.draw();
    });
  },
};
