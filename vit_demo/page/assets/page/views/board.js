// Switching heads off (vit_demo/app/heads_view.py): a toggle per layer and head (and per layer), a reset and the
// ablation (mean or zero). A change sets live.knockout, and every view that follows it redraws (store.js:
// knockoutNow asks "knockout" once per image and choice); under the board, the logit difference of the predicted
// class against the runner-up, all heads on and with them off.
import { asking, knockoutNow, setKnockout } from "../store.js";
import { escape, plural } from "../view.js";

const layerHeads = (layer, heads) => Array.from({ length: heads }, (_, h) => Number(layer) * heads + h); // indices

function toggles(box, layers, heads, marked) {
  // The board's buttons, made once; the heads that matter most (``marked``) are marked.
  let cells = "<span></span>";
  for (let head = 0; head < heads; head++) cells += `<span class="vd-board-head">head ${head + 1}</span>`;
  for (let layer = 0; layer < layers; layer++) {
    cells += `<button type="button" class="vd-board-layer" data-layer="${layer}" aria-pressed="false" ` +
      `aria-label="switch off every head of layer ${layer + 1}">layer ${layer + 1}</button>`;
    for (let head = 0; head < heads; head++) {
      const index = layer * heads + head, matters = marked.has(index);
      cells += `<button type="button" class="vd-board-toggle${matters ? " vd-matters" : ""}" data-index="${index}" ` +
        `aria-pressed="false" aria-label="switch off head ${head + 1} of layer ${layer + 1}` +
        `${matters ? " (one of those that matter most)" : ""}">${head + 1}</button>`;
    }
  }
  box.style.gridTemplateColumns = `auto repeat(${heads}, minmax(0, 1fr))`;
  box.innerHTML = cells;
}

function aboutHeads(matter) {
  // What the board says of the heads before any is switched off (heads_view.which_heads_matter's numbers).
  return !matter ? "" : ` The marked ones matter most (their importance, measured over ` +
    `${matter.images.toLocaleString("en")} ${matter.split} images); no head alone costs more than ` +
    `${(100 * matter.worst_drop).toFixed(1)} points of accuracy on those images when it is switched off: the ` +
    "others carry its work.";
}

function holds(reply) {
  // Whether the answer survives the heads switched off: then say so, lest the board look broken.
  const { intact, ablated } = reply.logit_diff;
  return reply.label === reply.intact.label && ablated >= 0.8 * intact ?
    " <b>The answer holds without them</b>: other heads carry what they did (switch off more, or the marked " +
    "ones)." : "";
}

function logitBars(reply, count) {
  const { intact, ablated } = reply.logit_diff, top = Math.max(Math.abs(intact), Math.abs(ablated), 1e-9);
  const row = (name, value) => `<div class="vd-ld-row"><span>${name}</span><span class="vd-ld-bar"><span ` +
    `class="${value < 0 ? "vd-ld-negative" : ""}" style="width: ${(100 * Math.abs(value)) / top}%"></span>` +
    `</span><span class="vd-ld-value">${value.toFixed(2)}</span></div>`;
  return `<div class="vd-ld-title">Logit difference, ${escape(reply.intact.label)} − ${escape(reply.runner_up)}</div>` +
    `${row("all heads on", intact)}${row(`${plural(count, "head")} off`, ablated)}`;
}

export default {
  draw({ element, live }) {
    const box = element.querySelector(".vd-board"), layers = Number(box.dataset.layers);
    const heads = Number(box.dataset.heads), off = new Set(live.knockout.off);
    const matter = box.dataset.matter ? JSON.parse(box.dataset.matter) : null;
    if (!box.childElementCount) toggles(box, layers, heads, new Set(matter?.marked ?? []));
    for (const button of box.querySelectorAll(".vd-board-toggle")) {
      const isOff = off.has(Number(button.dataset.index));
      button.setAttribute("aria-pressed", String(isOff));
      button.textContent = isOff ? "off" : String((Number(button.dataset.index) % heads) + 1);
    }
    for (const button of box.querySelectorAll(".vd-board-layer"))
      button.setAttribute("aria-pressed", String(layerHeads(button.dataset.layer, heads).every((i) => off.has(i))));
    for (const radio of element.querySelectorAll("input[type=radio]"))
      radio.checked = radio.value === live.knockout.mode;
    const status = element.querySelector(".vd-board-status"), bars = element.querySelector(".vd-logit-diff");
    const knocked = knockoutNow(live), reply = knocked?.reply;
    box.dataset.shown = reply ? knocked.id : "";
    bars.innerHTML = reply ? logitBars(reply, off.size) : "";
    status.innerHTML = !off.size ? `Every head is on: click one to switch it off.${aboutHeads(matter)}` :
      !live.state ? `${plural(off.size, "head")} off, for the next image.` :
      !reply ? `${plural(off.size, "head")} off: ${knocked.error ?? asking(live)}` : reply.info + holds(reply);
  },
  setup({ element, live }) {
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
        const row = layerHeads(button.dataset.layer, heads), all = row.every((index) => off.has(index));
        for (const index of row) if (all) off.delete(index); else off.add(index);
      } else if (button.classList.contains("vd-heads-reset")) off.clear();
      else return;
      setKnockout(live, [...off]);
    });
    element.addEventListener("change", (event) => {
      if (event.target.matches("input[type=radio]")) setKnockout(live, live.knockout.off, event.target.value);
    });
  },
};
