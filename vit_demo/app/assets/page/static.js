// The static page's host (vit_demo/deploy/static_space.py writes the page and its data, #vd-page). It mounts the app's
// own views (live.js) and canvas as Gradio mounts a gr.HTML (the template, then its script, with element, props, server
// and watch), each tab's source (source.js) running the model in the page, and wires what Gradio's components do
// in the app: the tabs, the layer and head controls, the training slider, the photo upload with its examples, and the
// Inside-the-model tab (inside.js).
import { mountInside } from "./inside.js";
import { mount as mountView } from "./live.js";
import { available } from "./model.js";
import { readPhoto } from "./photo.js";
import { answerFrom, setWaiting } from "./store.js";
import { tabSource } from "./source.js";

const page = JSON.parse(document.getElementById("vd-page").textContent);
const status = document.getElementById("vd-status");
const sources = Object.fromEntries(Object.entries(page.models).map(([prefix, model]) =>
  [prefix, guarded(tabSource(prefix, model, document.baseURI))]));

function guarded(source) {
  // A source whose every answer is an answer: a model that fails to load or run is said in place of a prediction.
  const guard = (name, ask) => async (...args) => {
    try {
      return await ask(...args);
    } catch (error) {
      console.error(error);
      const why = `The model could not run in this page (${error.message ?? error}). Reload the page to try again.`;
      return name === "photo" || name === "example" ? { message: why } : { error: why }; // (in place of numbers)
    }
  };
  return Object.fromEntries(Object.entries(source).map(([name, value]) =>
    [name, typeof value === "function" ? guard(name, value) : value]));
}

function mountScript(element, script, server, value = "") {
  // A gr.HTML's js_on_load, with what Gradio hands it (the canvas': vit_demo/app/canvas.py).
  const props = { value };
  const upload = async () => { throw new Error("upload is not available in this page"); };
  try {
    new Function("element", "trigger", "props", "server", "upload", "watch", script)(
      element, () => {}, props, server, upload, () => {});
  } catch (error) {
    console.error(`Error mounting #${element.id}:`, error);
  }
}

const live = (prefix) => window.vdLive?.[prefix];

if (!available()) {
  status.hidden = false;
  status.textContent = "This browser cannot run WebAssembly, which this page runs the model with: use the Python app.";
}

for (const spec of page.views) {
  // As components.live_script mounts them in the app, with the page's model in place of the server.
  const element = document.getElementById(spec.id);
  element.innerHTML = spec.template;
  try {
    mountView({ element, props: { value: spec.value }, watch: () => {} }, spec.prefix, spec.view);
  } catch (error) {
    console.error(`Error mounting #${spec.id}:`, error);
  }
}
mountScript(document.getElementById("canvas"), page.canvas.script, null);

for (const prefix of Object.keys(page.models)) {
  // The large view's layer and head, and the training slider: as the app's gr.Slider and gr.Radio change events.
  const layer = document.getElementById(`${prefix}-layer`);
  const [number, range] = layer.querySelectorAll("input");
  number.addEventListener("input", () => ((range.value = number.value), live(prefix)?.draw()));
  range.addEventListener("input", () => ((number.value = range.value), live(prefix)?.draw()));
  document.getElementById(`${prefix}-head`).addEventListener("change", () => live(prefix)?.draw());
  document.querySelector(`#${prefix}-training-position input`)
    ?.addEventListener("input", (event) => live(prefix)?.train(Number(event.target.value)));
  document.getElementById(`${prefix}-explain-class`)
    ?.addEventListener("change", (event) => live(prefix)?.explain(event.target.value));
}

// Talk mode with the app's own code (vit_demo/app/demo.py, assets/talk.js): the class on #vd-app, ?view=talk, the keys.
const script = (source) => new Function(`return (${source});`)();
const talk = document.querySelector("#talk-mode input"), setTalk = script(page.talk.toggle);
talk.checked = script(page.talk.fromAddress)();
setTalk(talk.checked);
talk.addEventListener("change", () => setTalk(talk.checked));
script(page.talk.keys)();

const inside = mountInside(document.getElementById("tab-inside"), page.inside);
// A tab's model is loaded once the tab opens (guarded: a failure is said when a reading is asked for); the
// Inside-the-model tab's pictures too.
const offline = document.getElementById("vd-offline");
const megabytes = (bytes) => `${(bytes / 1e6).toFixed(0)} MB`;

async function keepForOffline() {
  // Every file of the site, kept in this browser (its Cache Storage, which the service worker, sw.js, answers from),
  // one at a time, those kept already skipped; said under the header, from the start to "works offline". Where the
  // page has no service worker (plain http on a LAN address, or a browser without one), nothing is kept.
  if (!("serviceWorker" in navigator) || !globalThis.caches) return;
  try {
    await navigator.serviceWorker.register(page.offline);
    const cache = await caches.open("vit-demo"); // sw.js: KEPT
    const missing = [];
    for (const file of page.files) if (!(await cache.match(file))) missing.push(file);
    offline.hidden = false;
    for (const [i, file] of missing.entries()) {
      offline.textContent = `Saving this page for offline use (${megabytes(page.bytes)}): ${i} of ${missing.length} ` +
        "files…";
      await cache.add(file);
    }
    offline.textContent = "Ready to go offline: this page is saved in your browser, and reloads and runs with the " +
      "network gone.";
    offline.dataset.ready = "true"; // for tests
  } catch (error) {
    offline.textContent = `Not saved for offline use (${error.message ?? error}): it runs while the network lasts.`;
  }
}

const started = {}; // tab -> Promise: its source ready, its views answered by it, and its example read
let photoAsked = false; // a photo was uploaded or picked: the example the tab starts with is not shown over it
const warm = (tab) => (tab === "inside" ? inside.open() : (started[tab] ??= sources[tab].ready().then(async () => {
  answerFrom(tab, tabSource(tab));
  if (tab !== "photo" || photoAsked) return;
  const numbers = await sources.photo.example();
  if (!photoAsked) live("photo")?.receive(numbers); // (unless a photo came first)
}).catch(() => delete started[tab]))); // (a failure is said when a reading is asked for; the next click tries again)
for (const button of document.querySelectorAll(".vd-tabs [data-tab]")) {
  button.addEventListener("click", () => {
    for (const other of document.querySelectorAll(".vd-tabs [data-tab]"))
      other.setAttribute("aria-selected", String(other === button));
    for (const section of document.querySelectorAll(".vd-tab")) section.hidden = section.dataset.panel !== button.dataset.tab;
    warm(button.dataset.tab);
  });
}
warm("digit").then(() => setTimeout(keepForOffline, 1000)); // after the first answer, once the page is idle

// The photo tab: an upload or an example, decoded by the browser, preprocessed and classified in the page.
const photo = document.querySelector(".vd-photo");

async function classifyPhoto(blob) {
  photoAsked = true;
  const shown = photo.querySelector(".vd-photo-shown");
  setWaiting(live("photo"), true); // the views dim until the new photo's numbers are in
  try {
    const answer = await readPhoto(sources.photo, blob, page.models.photo.texts.unreadable);
    // The photo the views are of, shown beside them: none for a file that can't be read (or is too large to
    // decode safely), since the views are cleared for it too; a blank one is shown with what the page says of it.
    if (shown.src.startsWith("blob:")) URL.revokeObjectURL(shown.src);
    if (answer.refused) shown.removeAttribute("src");
    else shown.src = URL.createObjectURL(blob);
    live("photo")?.receive(answer);
  } finally {
    setWaiting(live("photo"), false); // (an answer ends it too; a failure must as well)
  }
}

if (photo) {
  photo.querySelector("input[type=file]").addEventListener("change", (event) => {
    const file = event.target.files?.[0];
    if (file) classifyPhoto(file);
  });
  // The examples' files (some 2 KB each) are fetched once the tab opens, so that a click waits for no round trip
  // and works with the network gone.
  const examples = new Map(); // address -> Promise of its Blob
  const example = (address) => {
    if (!examples.has(address)) {
      const blob = fetch(address).then((answer) => answer.blob());
      blob.catch(() => examples.delete(address)); // the next click tries again
      examples.set(address, blob);
    }
    return examples.get(address);
  };
  const buttons = [...photo.querySelectorAll(".vd-examples button")];
  for (const button of buttons) button.addEventListener("click", async () => classifyPhoto(await example(button.dataset.src)));
  document.querySelector(".vd-tabs [data-tab=photo]")
    ?.addEventListener("click", () => buttons.forEach((button) => example(button.dataset.src)), { once: true });
}
