// What a view draws on: its element (its place in the page: vit_demo/page/page.html), the tab's store, and the
// steps every view shares: its canvas, clearing it with a caption, and saying that heads are switched off.
import { asking } from "./store.js";

export const percentText = (p) => `${(100 * p).toFixed(1)}%`; // (numbers.percent: a caption's field)
export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
export const escape = (text) =>
  String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

export class View {
  constructor(element, live, prefix, name) {
    Object.assign(this, { element, live, prefix, name, canvas: element.querySelector("canvas.vd-live-canvas") });
  }

  get onScreen() {
    return this.live.onScreen.has(this.name);
  }

  clear(drawn, caption) {
    // This view's canvas, cleared, and its caption; the context to draw on, or null when there is nothing to draw.
    // For tests, data-drawn says what it shows ("" nothing), data-ablated which heads off (knockedCaption's, else "").
    const { state } = this.live, canvas = this.canvas, context = canvas.getContext("2d");
    context.clearRect(0, 0, canvas.width, canvas.height);
    canvas.showing = null; // what picture.drawTiles drew on it, gone
    Object.assign(canvas.dataset, { drawn: state && drawn ? drawn : "", ablated: this.ablated ?? "" });
    this.ablated = null;
    const scale = this.element.querySelector(".vd-scale"); // a key with nothing above it says nothing
    if (scale) scale.style.visibility = state && drawn ? "" : "hidden";
    const box = this.element.querySelector(".vd-caption"), text = caption || "";
    if (box && box.written !== text) box.innerHTML = box.written = text; // (the same caption: no layout to redo)
    return state && drawn ? context : null;
  }

  knockedCaption(knocked, own = false) {
    // What a view that follows the knockout adds to its caption, and which heads off the next clear marks its canvas
    // with; ``own``: the view drew an answer of its own, asked for with these heads off (not the board's answer).
    this.ablated = knocked && (own || knocked.reply) ? knocked.id : "";
    if (!knocked) return "";
    if (!own && !knocked.reply) return ` · <i>switching heads off: ${knocked.error ?? asking(this.live)}</i>`;
    return ` · <b class="vd-knocked">with ${plural(knocked.off.size, "head")} off</b>`;
  }
}
