// The page's host: it starts the page of vit_demo/page/page.html, in the static Space (index.html) and in the app
// (its gr.HTML, with the server's functions), from the page's data (vit_demo/page/site.py): each tab's source, whose
// forward pass runs in the page or on the server (model.js: choose), views, canvas or photo input and controls; the
// tabs, talk mode, the Inside-the-model tab, export for slides; and, where the data names a service worker (the
// static Space), the copy of the site kept for offline use.
import { mountCanvas } from "./canvas.js";
import { mountExport } from "./export.js";
import { mountInside } from "./inside.js";
import { mount as mountView } from "./live.js";
import { available, remembered } from "./model.js";
import { readPhoto } from "./photo.js";
import { setWaiting, tabStore } from "./store.js";
import { pageSource } from "./source.js";
import { mountTalk } from "./talk.js";

export function start(root, page, server) {
  // ``root``: the page's <main>; ``page``: its data ({models: {tab: description}, inside, offline?}); ``server``: the
  // app's server functions (forward), or null.
  const asked = new URLSearchParams(window.location.search); // ?model=server, ?runtime=wasm|webgpu (model.js: choose)
  const [forced, runtime] = [asked.get("model") === "server", asked.get("runtime")];
  const sources = {}; // tab -> its one source (source.js)
  const source = (tab) => (sources[tab] ??= pageSource(page.models[tab], document.baseURI, { forced, runtime,
    server: server && ((request) => server.forward({ model: page.models[tab].name, ...request })) }));

  if (!available() && !server)
    Object.assign(root.querySelector("#vd-status"), { hidden: false, textContent: "This browser cannot run " +
      "WebAssembly, which this page runs the model with: use the Python app." });
  for (const element of root.querySelectorAll("[data-view]")) {
    try {
      mountView(element, element.dataset.prefix, element.dataset.view);
    } catch (error) {
      console.error(`Error mounting #${element.id}:`, error);
    }
  }

  const started = {}; // tab -> its source, ready, its views answered by it (remembered; a failure: said by a reading)
  const photoAsked = new Set(); // tabs a photo was uploaded or picked in: the example they start with is not shown
  const loaded = (tab) => (started[tab] ??= remembered(() => source(tab).ready().then(() => {
    tabStore(tab).source = source(tab); // the tab's views ask it what they lack (store.js: need)
    root.querySelector(`#tab-${tab}`).dataset.ready = "true"; // for tests and scripts: its model is loaded
    return source(tab);
  })))();
  const inside = mountInside(root.querySelector("#tab-inside"), page.inside);
  const keeper = page.offline && offlineKeeper(root, page.offline);
  const warm = (tab) => {
    keeper?.opened(tab);
    if (tab === "inside") return inside.open();
    if (!page.models[tab]) return; // no model: its tab says why
    loaded(tab).then(async (ready) => {
      if (!root.querySelector(`#${tab}-input`) || photoAsked.has(tab) || tabStore(tab).state) return; // (shown already)
      const numbers = await ready.example();
      if (!photoAsked.has(tab)) tabStore(tab).receive(numbers); // (unless a photo came first)
    }).catch(() => {}); // (a failure is said when a reading is asked for)
  };
  const pad = root.querySelector("#canvas");
  if (pad && page.models.digit) mountCanvas(pad, "digit", () => loaded("digit"), page.models.digit.texts.unreadable);

  for (const prefix of Object.keys(page.models)) {
    // The large view's layer and head, the class to explain, the training slider, the export and the photo input.
    const [number, range] = root.querySelectorAll(`#${prefix}-layer input`);
    number.addEventListener("input", () => ((range.value = number.value), tabStore(prefix).draw()));
    range.addEventListener("input", () => ((number.value = range.value), tabStore(prefix).draw()));
    root.querySelector(`#${prefix}-head`).addEventListener("change", () => tabStore(prefix).draw());
    root.querySelector(`#${prefix}-training-position input`)
      ?.addEventListener("input", (event) => tabStore(prefix).train(Number(event.target.value)));
    root.querySelector(`#${prefix}-explain-class`)
      ?.addEventListener("change", (event) => tabStore(prefix).explain(event.target.value));
    const exporter = root.querySelector(`#${prefix}-export`), photo = root.querySelector(`#${prefix}-input`);
    if (exporter) mountExport(exporter, prefix, page.models[prefix].name);
    if (photo) mountPhoto(photo, { prefix, loaded: () => loaded(prefix), source: source(prefix), live: tabStore(prefix),
                                   photoAsked, unreadable: page.models[prefix].texts.unreadable });
  }
  mountTalk(root);
  for (const type of ["pointerdown", "click", "change"]) root.addEventListener(type, (event) => {
    // An "Also try" example's lesson, said under it once clicked, until the next input of its tab (a file dropped
    // on the upload changes it with no click).
    const input = event.target.closest(".vd-input"), lesson = input?.querySelector(".vd-lesson");
    if (!lesson || event.target.closest(".vd-lesson")) return;
    lesson.textContent = event.target.closest("[data-lesson]")?.dataset.lesson ?? "";
    lesson.hidden = !lesson.textContent;
  });
  root.addEventListener("click", (event) => {
    // A link to a section of the page scrolls to it, the address as it is: under the page's <base>, "#id" would be
    // another address, a reload without ?model=server or ?view=talk.
    const link = event.target.closest("a[href^='#']");
    if (!link) return;
    event.preventDefault();
    document.getElementById(link.getAttribute("href").slice(1))?.scrollIntoView();
  });

  for (const button of root.querySelectorAll(".vd-tabs [data-tab]")) button.addEventListener("click", () => {
    for (const other of root.querySelectorAll(".vd-tabs [data-tab]"))
      other.setAttribute("aria-selected", String(other === button));
    for (const section of root.querySelectorAll(".vd-tab"))
      section.hidden = section.dataset.panel !== button.dataset.tab;
    warm(button.dataset.tab);
  });
  if (keeper) loaded("digit").then(() => setTimeout(keeper.start, 1000), () => {});
}

function mountPhoto(photo, { prefix, loaded, source, live, photoAsked, unreadable }) {
  // A photo tab's input: an upload or an example, decoded by the browser, preprocessed and classified where the model
  // runs (``loaded()``: a Promise of the tab's source, ready; ``unreadable``: the model's {why} template).
  const shown = photo.querySelector(".vd-photo-shown");
  const show = (blob) => { // the photo the views are of, beside them (null: none)
    if (shown.src.startsWith("blob:")) URL.revokeObjectURL(shown.src);
    if (blob) shown.src = URL.createObjectURL(blob);
    else shown.removeAttribute("src");
  };
  let latest = null; // the photo asked for last: an earlier one's answer is not shown over it
  async function classifyPhoto(file) {
    // ``file``: a Blob, or a Promise of one (an example on its way).
    photoAsked.add(prefix);
    const asked = (latest = file);
    setWaiting(live, true); // the views dim until the new photo's numbers (or why there are none) are in: receive
    let answer, blob;
    try {
      blob = await file;
      answer = await readPhoto(await loaded(), blob, unreadable);
    } catch (error) {
      answer = { message: `The model could not run (${error.message ?? error}). Try again.` };
    }
    if (asked !== latest) return; // (a later photo's answer ends the dimming)
    photo.dataset.model = source.inPage ? "page" : "server"; // for tests and scripts
    // None for a file that can't be read (or is too large to decode safely), since the views are cleared for it too.
    show(answer.refused ? null : blob);
    live.receive(answer);
  }
  photo.querySelector("button.vd-clear").addEventListener("click", () => {
    photoAsked.add(prefix);
    latest = null; // (a photo still being read is not shown)
    show(null);
    live.receive("");
  });
  photo.querySelector("input[type=file]").addEventListener("change", (event) => {
    const file = event.target.files?.[0];
    if (file) classifyPhoto(file);
  });
  for (const button of photo.querySelectorAll(".vd-examples button"))  // (a file of some 2 KB)
    button.addEventListener("click", () => classifyPhoto(fetch(button.dataset.src).then((answer) => answer.blob())));
}

function offlineKeeper(root, { worker, files, bytes, tabs = {} }) {
  // Every file of the site kept in this browser (its Cache Storage, which the service worker, sw.js, answers from),
  // said under the header, from the start to "works offline": ``start()`` keeps the site's files, once the page has
  // answered its first image; ``opened(tab)``, an added model's tab's, once the tab is opened (a large model is kept
  // only by those who look at it). Each keeping follows the one before, those kept already skipped. Where the page
  // has no service worker (plain http on a LAN address, or a browser without one), nothing is kept.
  const offline = root.querySelector("#vd-offline"), opened = new Set();
  let started = false, last = Promise.resolve();
  const keep = () => {
    const list = [...files, ...[...opened].flatMap((tab) => tabs[tab].files)];
    const size = [...opened].reduce((sum, tab) => sum + tabs[tab].bytes, bytes);
    delete offline.dataset.ready;
    const keeping = last.then(() => keepForOffline(offline, worker, list, size)).then((kept) => {
      if (kept && last === keeping) offline.dataset.ready = "true"; // for tests: all asked for is kept
    });
    last = keeping;
  };
  return {
    start() {
      if (started) return;
      started = true;
      keep();
    },
    opened(tab) {
      if (!tabs[tab] || opened.has(tab)) return;
      opened.add(tab);
      if (started) keep(); // (else the site's keeping takes it)
    },
  };
}

async function keepForOffline(offline, worker, files, bytes) {
  // ``files`` kept, one at a time, as offlineKeeper asks; whether they are.
  if (!("serviceWorker" in navigator) || !globalThis.caches) return false;
  try {
    await navigator.serviceWorker.register(worker);
    const cache = await caches.open("vit-demo"); // sw.js: KEPT
    const missing = [];
    for (const file of files) if (!(await cache.match(file))) missing.push(file);
    offline.hidden = false;
    for (const [i, file] of missing.entries()) {
      offline.textContent = `Saving for offline use (${(bytes / 1e6).toFixed(0)} MB): ${i} of ${missing.length} files…`;
      await cache.add(file);
    }
    offline.textContent = "Saved: it works offline."; // in this browser: it reloads and runs with the network gone
    return true;
  } catch (error) {
    offline.textContent = `Not saved for offline use (${error.message ?? error}): it runs while the network lasts.`;
    return false;
  }
}
