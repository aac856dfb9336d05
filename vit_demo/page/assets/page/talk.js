// Talk mode: the toggle sets class vd-talk on #vd-app (app.css shows the input, the prediction and one large view,
// in large type) and keeps the address in step (?view=talk), so that a speaker can bookmark it; and its keys, in the
// tab on screen: left/right the layer, up/down the head (of raw attention, shown in place of the first map; from the
// first map, right starts at layer 1), "c" clears the drawing, "?" (or the "?" beside the keys' line) shows or hides
// the list of the keys, Escape hides it. Each step of a key lights up the control it moved, for the room to see.
import { showRaw } from "./views/first.js";

// The keys' list ("?"), in the words the help shows: [keys, what they do].
const HELP = [["← →", "the layer before, the layer after (from the first map, → starts at layer 1)"],
              ["↑ ↓", "the head before, the head after (round the list: mean, head 1, …)"],
              ["c", "clear the drawing, or the photo"], ["?", "show or hide these keys"], ["Esc", "hide them"]];

function helpOverlay(root) {
  // The list of the keys, over the page (hidden), and the "?" beside the keys' line that shows it.
  const help = Object.assign(document.createElement("div"), { id: "vd-help", hidden: true });
  help.setAttribute("role", "dialog");
  help.setAttribute("aria-labelledby", "vd-help-title");
  help.innerHTML = `<h2 id="vd-help-title">Talk mode's keys</h2><dl>${HELP.map(([keys, what]) =>
    `<dt>${keys.split(" ").map((key) => `<kbd>${key}</kbd>`).join(" ")}</dt><dd>${what}</dd>`).join("")}</dl>` +
    '<button type="button" class="vd-help-close">Close (Esc)</button>';
  root.append(help);
  const button = Object.assign(document.createElement("button"), { type: "button", id: "vd-keys-help",
                                                                   textContent: "?", title: "all the keys" });
  button.setAttribute("aria-controls", "vd-help");
  button.setAttribute("aria-expanded", "false");
  root.querySelector("#vd-keys")?.append(" · ", button);
  const show = (on) => {
    help.hidden = !on;
    button.setAttribute("aria-expanded", String(on));
  };
  button.addEventListener("click", () => show(help.hidden));
  help.querySelector(".vd-help-close").addEventListener("click", () => show(false));
  return { toggle: () => show(help.hidden), hide: () => show(false), shown: () => !help.hidden };
}

function light(element) {
  // The control a key just moved, lit up a moment (app.css: vd-stepped), even where it stays (the last layer).
  if (!element) return;
  element.classList.remove("vd-stepped");
  void element.offsetWidth; // (the animation starts again)
  element.classList.add("vd-stepped");
}

export function mountTalk(root) {
  const toggle = root.querySelector("#talk-mode input"), help = helpOverlay(root);
  const setTalk = (on) => {
    root.classList.toggle("vd-talk", on);
    if (!on) help.hide();
    const address = new URL(window.location.href);
    if (on) address.searchParams.set("view", "talk"); else address.searchParams.delete("view");
    window.history.replaceState(null, "", address);
  };
  toggle.checked = new URLSearchParams(window.location.search).get("view") === "talk";
  setTalk(toggle.checked);
  toggle.addEventListener("change", () => setTalk(toggle.checked));

  const shown = (selector) => [...document.querySelectorAll(selector)].find((el) => el.offsetParent !== null);

  const rawAttention = () => { // the keys' view, raw attention; true where the first map was on screen until now
    const map = shown(".vd-map");
    if (!map) return false;
    const prefix = map.id.replace(/-map$/, ""), first = !document.getElementById(`${prefix}-first`).hidden;
    showRaw(prefix, true);
    return first;
  };

  const stepLayer = (by) => {
    const fromFirst = rawAttention();
    const range = shown(".vd-layer input[type=range]");
    if (!range) return;
    const [low, high] = [Number(range.min), Number(range.max)];
    // From the first map, → walks the layers from the first; ← steps back from the slider's (the last, at first).
    const from = fromFirst && by > 0 ? low - 1 : Number(range.value);
    const value = Math.min(Math.max(from + by, low), high);
    light(range.closest(".vd-layer"));
    if (value === Number(range.value)) return;
    range.value = String(value);
    for (const type of ["input", "change"]) range.dispatchEvent(new Event(type, { bubbles: true }));
  };

  const stepHead = (by) => {
    rawAttention();
    const choice = shown(".vd-head"), radios = [...(choice?.querySelectorAll("input[type=radio]") ?? [])];
    if (!radios.length) return;
    const now = Math.max(0, radios.findIndex((radio) => radio.checked));
    radios[(now + by + radios.length) % radios.length].click();  // wraps round: mean, head 1, ..., mean
    light(choice);
  };

  const clearInput = () => shown("button.vd-clear")?.click(); // the tab's Clear: the drawing's, or the photo's

  const keys = { ArrowLeft: () => stepLayer(-1), ArrowRight: () => stepLayer(1), ArrowUp: () => stepHead(-1),
                 ArrowDown: () => stepHead(1), c: clearInput, C: clearInput, "?": help.toggle };

  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && help.shown()) return help.hide();
    const action = keys[event.key];
    if (!action || !root.classList.contains("vd-talk") || event.ctrlKey || event.metaKey || event.altKey) return;
    // Typing in a text or number box is typing, not a talk key; a slider, radio or the talk toggle in focus is not.
    const typing = "textarea, select, [contenteditable], input:not([type=range], [type=radio], [type=checkbox])";
    if (event.target.closest(typing)) return;
    event.preventDefault();  // no page scroll, and a focused slider or radio doesn't move a second time
    action();
  });
}
