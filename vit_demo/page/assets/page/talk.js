// Talk mode: the toggle sets class vd-talk on #vd-app (app.css shows the input, the prediction and one large view,
// in large type) and keeps the address in step (?view=talk), so that a speaker can bookmark it; and its keys:
// left/right the layer, up/down the head (of raw attention, shown in place of the first map), "c" clears the
// drawing, in the tab on screen.
import { showRaw } from "./views/first.js";

export function mountTalk(root) {
  const toggle = root.querySelector("#talk-mode input");
  const setTalk = (on) => {
    root.classList.toggle("vd-talk", on);
    const address = new URL(window.location.href);
    if (on) address.searchParams.set("view", "talk"); else address.searchParams.delete("view");
    window.history.replaceState(null, "", address);
  };
  toggle.checked = new URLSearchParams(window.location.search).get("view") === "talk";
  setTalk(toggle.checked);
  toggle.addEventListener("change", () => setTalk(toggle.checked));

  const shown = (selector) => [...document.querySelectorAll(selector)].find((el) => el.offsetParent !== null);

  const rawAttention = (map = shown(".vd-map")) => map && showRaw(map.id.replace(/-map$/, ""), true); // the keys' view

  const stepLayer = (by) => {
    rawAttention();
    const range = shown(".vd-layer input[type=range]");
    if (!range) return;
    const value = Math.min(Math.max(Number(range.value) + by, Number(range.min)), Number(range.max));
    if (value === Number(range.value)) return;
    range.value = String(value);
    for (const type of ["input", "change"]) range.dispatchEvent(new Event(type, { bubbles: true }));
  };

  const stepHead = (by) => {
    rawAttention();
    const radios = [...(shown(".vd-head")?.querySelectorAll("input[type=radio]") ?? [])];
    if (!radios.length) return;
    const now = Math.max(0, radios.findIndex((radio) => radio.checked));
    radios[(now + by + radios.length) % radios.length].click();  // wraps round: mean, head 1, ..., mean
  };

  const clearInput = () => shown("button.vd-clear")?.click(); // the tab's Clear: the drawing's, or the photo's

  const keys = { ArrowLeft: () => stepLayer(-1), ArrowRight: () => stepLayer(1), ArrowUp: () => stepHead(-1),
                 ArrowDown: () => stepHead(1), c: clearInput, C: clearInput };

  document.addEventListener("keydown", (event) => {
    const action = keys[event.key];
    if (!action || !root.classList.contains("vd-talk") || event.ctrlKey || event.metaKey || event.altKey) return;
    // Typing in a text or number box is typing, not a talk key; a slider, radio or the talk toggle in focus is not.
    const typing = "textarea, select, [contenteditable], input:not([type=range], [type=radio], [type=checkbox])";
    if (event.target.closest(typing)) return;
    event.preventDefault();  // no page scroll, and a focused slider or radio doesn't move a second time
    action();
  });
}
