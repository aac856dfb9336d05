// The static page's Inside-the-model tab (vit_demo/deploy/static_space.py writes it): pictures the app's own functions
// made for each model, loaded once the tab first opens; the model choice; and the position grid, where a click on a
// cell outlines it and shows that patch's map (one picture holds every patch's map, in patch order), as the app's tab
// does (vit_demo/app/inside_tab.py). ``positions``: for each model, each cell's box in shares of the grid picture's
// size (left, top, right, bottom), each patch's caption, the grid's size and the map's, and the patch shown first.

export function mountInside(section, positions) {
  const blocks = [...section.querySelectorAll(".vd-inside-model")];
  const fetched = []; // the pictures, kept: a hidden model's are fetched now too, so that they show offline later

  function open() {
    if (fetched.length) return;
    for (const element of section.querySelectorAll("[data-src]")) {
      const picture = element.tagName === "IMG" ? element : new Image(); // (a hidden background is not fetched)
      picture.src = element.dataset.src;
      fetched.push(picture);
      if (picture !== element) element.style.backgroundImage = `url("${element.dataset.src}")`;
    }
  }

  function select(block, patch) {
    const { boxes, captions, grid } = positions[block.dataset.model];
    const [left, top, right, bottom] = boxes[patch].map((share) => 100 * share);
    Object.assign(block.querySelector(".vd-positions-mark").style,
                  { left: `${left}%`, top: `${top}%`, width: `${right - left}%`, height: `${bottom - top}%` });
    const large = block.querySelector(".vd-position-large"), [row, col] = [Math.floor(patch / grid), patch % grid];
    large.style.backgroundPosition = `${(100 * col) / (grid - 1)}% ${(100 * row) / (grid - 1)}%`;
    large.dataset.patch = String(patch);
    large.setAttribute("aria-label", captions[patch]);
    block.querySelector(".vd-position-caption").textContent = captions[patch];
  }

  for (const block of blocks) {
    select(block, positions[block.dataset.model].start);
    const picture = block.querySelector(".vd-positions-grid img");
    picture?.addEventListener("click", (event) => {
      const frame = picture.getBoundingClientRect();
      const [x, y] = [(event.clientX - frame.left) / frame.width, (event.clientY - frame.top) / frame.height];
      const patch = positions[block.dataset.model].boxes.findIndex(
        ([left, top, right, bottom]) => x >= left && x < right && y >= top && y < bottom);
      if (patch >= 0) select(block, patch); // (a click between the cells or on a label changes nothing)
    });
  }
  section.addEventListener("change", (event) => { // the model choice
    if (event.target.name !== "inside-model") return;
    for (const block of blocks) block.hidden = block.dataset.model !== event.target.value;
  });
  return { open };
}
