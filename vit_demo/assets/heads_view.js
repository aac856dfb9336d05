// What each head does (vit_demo/ui/heads_view.py): three views, drawn in the page. This script runs inside
// assets/live_view.js's scope (in place of its __MORE_VIEWS__ mark), on the tab's live state:
//   "board"    a toggle per layer and head (and per layer), a reset and the ablation (mean or zero); a change sets
//              live.knockout, and every view that follows it redraws (live_view.js: knockoutNow asks the server
//              function "knockout" once per image and choice); under the board, the logit difference of the
//              predicted class against the runner-up, all heads on and with them off;
//   "lens"     what [CLS] would answer after each layer (a strip) and, per patch, the probability of the final
//              answer after each layer (a map per layer, on one scale); asked for (server function "lens") once per
//              image, and only while the view is on screen, so that a stroke costs nothing more;
//   "patching" two images kept from the tab (clean and corrupt), and for them, the share of the logit difference
//              each head and each position of the residual stream restores, both directions (server function
//              "patching"), as diverging heatmaps.

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const escape = (text) => String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

function diverging(value) {
  // -1 blue, 0 white (the corrupt run), 1 red (the clean run); beyond, the ends.
  const t = Math.max(-1, Math.min(1, value)), end = t >= 0 ? [178, 24, 43] : [33, 102, 172], a = Math.abs(t);
  return `rgb(${end.map((c) => Math.round(255 + a * (c - 255))).join(",")})`;
}

function drawKept(canvas, kept) {
  // An image kept for patching, its pixels as the model read them, filling the canvas.
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  if (!kept) return;
  const bytes = decode(kept.image), small = document.createElement("canvas");
  small.width = kept.width;
  small.height = kept.height;
  const picture = small.getContext("2d").createImageData(kept.width, kept.height);
  for (let p = 0; p < kept.width * kept.height; p++) {
    for (let c = 0; c < 3; c++) picture.data[p * 4 + c] = bytes[p * kept.channels + (kept.channels === 1 ? 0 : c)];
    picture.data[p * 4 + 3] = 255;
  }
  small.getContext("2d").putImageData(picture, 0, 0);
  context.imageSmoothingEnabled = kept.smooth;
  context.drawImage(small, 0, 0, canvas.width, canvas.height);
}

function headsGrid(canvas, values) {
  // (L, H) restored shares as a heatmap, each written in its cell; layers down, heads across.
  const L = values.length, H = values[0].length, left = 62, top = 20, w = 46, h = 26;
  canvas.width = left + H * w;
  canvas.height = top + L * h;
  const context = canvas.getContext("2d");
  context.font = "12px sans-serif";
  context.textBaseline = "middle";
  context.textAlign = "center";
  context.fillStyle = "#444";
  for (let head = 0; head < H; head++) context.fillText(`head ${head + 1}`, left + head * w + w / 2, top / 2);
  for (let layer = 0; layer < L; layer++) {
    context.textAlign = "right";
    context.fillStyle = "#444";
    context.fillText(`layer ${layer + 1}`, left - 6, top + layer * h + h / 2);
    context.textAlign = "center";
    for (let head = 0; head < H; head++) {
      const value = values[layer][head], x = left + head * w, y = top + layer * h;
      context.fillStyle = diverging(value);
      context.fillRect(x + 1, y + 1, w - 2, h - 2);
      context.fillStyle = Math.abs(value) > 0.6 ? "#fff" : "#111";
      context.fillText(Math.abs(value) < 0.005 ? "0.00" : value.toFixed(2), x + w / 2, y + h / 2); // no "-0.00"
    }
  }
}

function residualGrid(canvas, values, grid) {
  // (L, T) restored shares: per layer, [CLS] as a bar over the patches laid out as in the image.
  const L = values.length, cell = grid <= 7 ? 7 : 6, tile = grid * cell, gap = 8, top = 16, bar = 10;
  canvas.width = L * (tile + gap) - gap;
  canvas.height = top + bar + 2 + tile;
  const context = canvas.getContext("2d");
  context.font = "12px sans-serif";
  context.textAlign = "center";
  context.textBaseline = "middle";
  for (let layer = 0; layer < L; layer++) {
    const x = layer * (tile + gap), row = values[layer];
    context.fillStyle = "#444";
    context.fillText(`layer ${layer + 1}`, x + tile / 2, top / 2);
    context.fillStyle = diverging(row[0]);
    context.fillRect(x, top, tile, bar);
    for (let patch = 0; patch < grid * grid; patch++) {
      context.fillStyle = diverging(row[1 + patch]);
      context.fillRect(x + (patch % grid) * cell, top + bar + 2 + Math.floor(patch / grid) * cell, cell, cell);
    }
    context.strokeStyle = "#bbb";
    context.strokeRect(x + 0.5, top + bar + 2.5, tile - 1, tile - 1);
  }
}

function askPatching(id, residual) {
  // The patching grids for the two images kept, once per pair (and with or without the residual stream); a failure
  // is kept, and said, until another image is kept.
  const kept = live.patching;
  if (kept.replies[id] || kept.pending[id] || !live.ask.patching) return;
  kept.pending[id] = true;
  live.ask.patching({ clean: kept.clean.image, corrupt: kept.corrupt.image, residual })
    .catch(() => null)
    .then((reply) => {
      if (reply && !reply.error) {
        kept.replies[id] = reply;
        delete kept.pending[id];
      } else kept.pending[id] = reply?.error ? `The server says: ${reply.error}.` : "The server did not answer.";
      draws.patching(); // this view's own: only it shows the grids
    });
}

Object.assign(draws, {
  board() {
    const box = element.querySelector(".vd-board"), layers = Number(box.dataset.layers);
    const heads = Number(box.dataset.heads), off = new Set(live.knockout.off);
    if (!box.childElementCount) {
      let cells = '<span></span>';
      for (let head = 0; head < heads; head++) cells += `<span class="vd-board-head">head ${head + 1}</span>`;
      for (let layer = 0; layer < layers; layer++) {
        cells += `<button type="button" class="vd-board-layer" data-layer="${layer}" aria-pressed="false" ` +
          `aria-label="switch off every head of layer ${layer + 1}">layer ${layer + 1}</button>`;
        for (let head = 0; head < heads; head++)
          cells += `<button type="button" class="vd-board-toggle" data-index="${layer * heads + head}" ` +
            `aria-pressed="false" aria-label="switch off head ${head + 1} of layer ${layer + 1}">${head + 1}</button>`;
      }
      box.style.gridTemplateColumns = `auto repeat(${heads}, minmax(0, 1fr))`;
      box.innerHTML = cells;
    }
    for (const button of box.querySelectorAll(".vd-board-toggle")) {
      const isOff = off.has(Number(button.dataset.index));
      button.setAttribute("aria-pressed", String(isOff));
      button.textContent = isOff ? "off" : String((Number(button.dataset.index) % heads) + 1);
    }
    for (const button of box.querySelectorAll(".vd-board-layer")) {
      const layer = Number(button.dataset.layer);
      const all = Array.from({ length: heads }, (_, h) => off.has(layer * heads + h)).every(Boolean);
      button.setAttribute("aria-pressed", String(all));
    }
    for (const radio of element.querySelectorAll("input[type=radio]")) radio.checked = radio.value === live.knockout.mode;
    const status = element.querySelector(".vd-board-status"), bars = element.querySelector(".vd-logit-diff");
    const knocked = knockoutNow(), reply = knocked?.reply;
    box.dataset.shown = reply ? knocked.id : "";
    bars.innerHTML = "";
    if (!off.size) status.innerHTML = "Every head is on: click one to switch it off.";
    else if (!live.state) status.innerHTML = `${plural(off.size, "head")} off, for the next image.`;
    else if (!reply) status.innerHTML = `${plural(off.size, "head")} off: ${knocked.error ?? "asking the server…"}`;
    else {
      status.innerHTML = reply.info;
      const { intact, ablated } = reply.logit_diff, top = Math.max(Math.abs(intact), Math.abs(ablated), 1e-9);
      const row = (name, value) => `<div class="vd-ld-row"><span>${name}</span><span class="vd-ld-bar"><span ` +
        `class="${value < 0 ? "vd-ld-negative" : ""}" style="width: ${(100 * Math.abs(value)) / top}%"></span>` +
        `</span><span class="vd-ld-value">${value.toFixed(2)}</span></div>`;
      bars.innerHTML = `<div class="vd-ld-title">Logit difference, ${escape(reply.predicted)} − ` +
        `${escape(reply.runner_up)}</div>${row("all heads on", intact)}${row(`${plural(off.size, "head")} off`, ablated)}`;
    }
  },
  lens() {
    const strip = element.querySelector(".vd-lens-strip");
    if (!live.state) {
      strip.innerHTML = "";
      return clear(null);
    }
    const reply = viewAnswer("lens", "strip");
    if (!reply) {
      strip.innerHTML = "";
      view().dataset.ablated = "";
      return clear(null, live.onScreen.has(VIEW) ? waiting("lens", "strip", {}) : ""); // asks once in view
    }
    const knocked = knockedCaption(knockoutNow(), true);
    const context = clear("lens", `What [CLS] would answer after each layer${knocked}; the bar: its probability ` +
                                  `of the final answer, <b>${escape(reply.label)}</b>`);
    strip.style.gridTemplateColumns = `repeat(${reply.layers.length}, minmax(0, 1fr))`;
    strip.innerHTML = reply.layers.map((layer, i) =>
      `<div class="vd-lens-cell${layer.label === reply.label ? " vd-lens-final" : ""}"><span>layer ${i + 1}</span>` +
      `<b>${escape(layer.label)}</b><span>${percent(layer.probability)}</span><span class="vd-prob"><span ` +
      `style="width: ${percent(layer.answer)}"></span></span></div>`).join("");
    const levels = (reply.levels ??= decode(reply.maps)), g = reply.grid, tile = view().height;
    reply.layers.forEach((_, i) => overlay(context, levels.subarray(i * g * g, (i + 1) * g * g), g, tile, i * (tile + 6), 0));
  },
  patching() {
    const root = element.querySelector(".vd-patching"), kept = live.patching;
    for (const slot of ["clean", "corrupt"]) {
      const box = root.querySelector(`.vd-slot[data-slot="${slot}"]`), image = kept[slot];
      box.querySelector(".vd-slot-label").innerHTML = image ? `read as <b>${escape(image.label)}</b>` : "none yet";
      drawKept(box.querySelector("canvas"), image);
      box.querySelector("button.vd-use").disabled = !live.state;
    }
    const status = root.querySelector(".vd-patching-status"), grids = root.querySelector(".vd-patching-grids");
    const more = root.querySelector("button.vd-residual");
    more.hidden = true;
    root.dataset.drawn = "";
    if (!kept.clean || !kept.corrupt) {
      grids.innerHTML = "";
      status.innerHTML = kept.clean || kept.corrupt ? `Now keep a second image, one the model reads as another class.` :
        "Draw or pick an image, keep it as clean; then another, and keep it as corrupt.";
      return;
    }
    if (kept.clean.label === kept.corrupt.label) {
      grids.innerHTML = "";
      status.innerHTML = `The model reads both images as <b>${escape(kept.clean.label)}</b>: keep two it tells apart.`;
      return;
    }
    const pair = `${kept.clean.key}/${kept.corrupt.key}`, atOnce = root.dataset.residual === "true";
    const wanted = atOnce || kept.residual === pair; // the photos' residual grid: asked for on a button
    askPatching(`${pair}/${wanted}`, wanted);
    const reply = kept.replies[`${pair}/${wanted}`] ?? kept.replies[`${pair}/${!wanted}`];
    const asked = kept.pending[`${pair}/${wanted}`];
    if (!reply) {
      grids.innerHTML = "";
      status.innerHTML = typeof asked === "string" ? escape(asked) : "Patching every head and position: asking the server…";
      return;
    }
    const [clean, corrupt] = reply.classes.map(escape);
    status.innerHTML = `Logit difference ${clean} − ${corrupt}: <b>${reply.logit_diff.clean.toFixed(2)}</b> for the ` +
      `clean image, <b>${reply.logit_diff.corrupt.toFixed(2)}</b> for the corrupt one (${reply.ms} ms on the server)` +
      (typeof asked === "string" ? `. ${escape(asked)}` : asked ? ". The residual stream: asking the server…" : ".");
    more.hidden = reply.residual || asked === true;
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
      headsGrid(block.querySelector("canvas.vd-patch-heads"), reply[name].heads);
      if (reply.residual) residualGrid(block.querySelector("canvas.vd-patch-residual"), reply[name].residual,
                                       Math.round(Math.sqrt(reply[name].residual[0].length - 1)));
    }
    root.dataset.drawn = `${pair}/${reply.residual}`;
  },
});

if (VIEW === "board") {
  const box = element.querySelector(".vd-board");
  if (box.dataset.means !== "true") live.knockout.mode = "zero"; // no stored means: zero-ablation only
  element.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    const heads = Number(box.dataset.heads), off = new Set(live.knockout.off);
    if (button.dataset.index !== undefined) {
      const index = Number(button.dataset.index);
      if (!off.delete(index)) off.add(index);
    } else if (button.dataset.layer !== undefined) {
      const row = Array.from({ length: heads }, (_, h) => Number(button.dataset.layer) * heads + h);
      const all = row.every((index) => off.has(index));
      for (const index of row) if (all) off.delete(index); else off.add(index);
    } else if (button.classList.contains("vd-heads-reset")) off.clear();
    else return;
    setKnockout([...off]);
  });
  element.addEventListener("change", (event) => {
    if (event.target.matches("input[type=radio]")) setKnockout(live.knockout.off, event.target.value);
  });
} else if (VIEW === "patching") {
  element.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    const kept = live.patching;
    if (button?.classList.contains("vd-use") && live.state) {
      const { image, key, label, height, width, channels, smooth } = live.state.numbers;
      kept[button.dataset.slot] = { image, key, label, height, width, channels, smooth };
      for (const [id, value] of Object.entries(kept.pending)) if (typeof value === "string") delete kept.pending[id];
    } else if (button?.classList.contains("vd-residual") && kept.clean && kept.corrupt) {
      kept.residual = `${kept.clean.key}/${kept.corrupt.key}`;
    } else return;
    draws.patching();
  });
}
