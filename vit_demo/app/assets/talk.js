() => {
  // Talk mode's keys: left/right the layer, up/down the head, "c" clears the input, in the tab on screen.
  const shown = (selector) => [...document.querySelectorAll(selector)].find((el) => el.offsetParent !== null);

  const stepLayer = (by) => {
    const range = shown(".vd-layer input[type=range]");
    if (!range) return;
    const value = Math.min(Math.max(Number(range.value) + by, Number(range.min)), Number(range.max));
    if (value === Number(range.value)) return;
    range.value = String(value);
    range.dispatchEvent(new Event("input", { bubbles: true }));
    range.dispatchEvent(new Event("change", { bubbles: true }));
  };

  const stepHead = (by) => {
    const radios = [...(shown(".vd-head")?.querySelectorAll("input[type=radio]") ?? [])];
    if (!radios.length) return;
    const now = Math.max(0, radios.findIndex((radio) => radio.checked));
    radios[(now + by + radios.length) % radios.length].click();  // wraps round: mean, head 1, ..., mean
  };

  const clearInput = () => {
    // The drawing canvas' own Clear, or the photo's clear button.
    (shown(".vd-pad button.vd-clear") ?? shown("#photo-input button[aria-label='Remove Image']"))?.click();
  };

  const keys = {
    ArrowLeft: () => stepLayer(-1), ArrowRight: () => stepLayer(1),
    ArrowUp: () => stepHead(-1), ArrowDown: () => stepHead(1),
    c: clearInput, C: clearInput,
  };

  document.addEventListener("keydown", (event) => {
    const action = keys[event.key];
    if (!action || !document.querySelector("#vd-app.vd-talk")) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    // Typing in a text or number box is typing, not a talk key; a slider, radio or the talk toggle in focus is not.
    if (event.target.closest("textarea, select, [contenteditable], input:not([type=range], [type=radio], [type=checkbox])")) return;
    event.preventDefault();  // no page scroll, and a focused slider or radio doesn't move a second time
    action();
  });
}
