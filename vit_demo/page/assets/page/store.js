// One tab's store: the current image's numbers and every answer for it, which the tab's views draw from
// (live.js mounts them). It lives at window.vdLive[prefix], where the canvas (canvas.js) and the photo reader
// (photo.js) hand it an image's numbers (``receive``), the app's controls call its handle (``draw``, ``choose``,
// ``explain``, ``train``), and tests and scripts read it (``numbers()``: the image's numbers as JSON).
//
// An image's numbers are typed arrays, as the page made them (numbers.js: imageNumbers says which); its key is a
// counter. What a view lacks (another patch, class or snapshot, heads off, the scores) it asks the tab's source for
// once (``need``: source.js), through one cache (``ask``), where answers with heads switched off (the board:
// ``knockout``) are kept apart from the intact model's (``heldAs``).
const FRESH = () => ({
  state: null, // the image in hand: {key (a counter), numbers}, and what picture.js made of them for it
  message: null, // what is said in place of a prediction, where there is no image (HTML)
  reading: null, // the prediction alone, while the pen is down (the views show the last drawing the pen left)
  dimming: null, // the timer that dims the views while a new image is read (setWaiting)
  views: [], // the mounted views (view.js: View, with live.js giving each its draw, prediction and knockout)
  kept: new Map(), // "kind/key" -> {value} | {error} | {pending: true}: every answer asked for (``ask``)
  source: null, // what answers the views (source.js: pageSource), once its forward pass is chosen (host.js)
  patch: null, // the query patch
  pointed: false, // the visitor chose it (a click on the patches): the patches view shows where it looks
  choice: null, // the class picker's choice
  position: null, // the training slider's position
  onScreen: new Set(), // the views on screen now (or nearly): relevance, the lens and the steps ask only then
  knockout: { off: [], mode: "mean" }, // the heads switched off (layer * heads + head, sorted) and how
  patching: { clean: null, corrupt: null, residual: null }, // the two images kept for patching (their states)
});

export const asking = (live) => (live.source?.inPage ? "working it out in this page…" : "asking the server…");
// An answer as JSON, its typed arrays as lists: for tests and scripts.
export const json = (value) => JSON.stringify(value, (key, v) => (ArrayBuffer.isView(v) ? Array.from(v) : v));

export function tabStore(prefix) {
  // The tab's store and its handle, made on first use.
  const live = ((window.vdLive ??= {})[prefix] ??= {});
  for (const [name, value] of Object.entries(FRESH())) live[name] ??= value;
  live.receive ??= (answer) => receive(live, answer);
  live.numbers ??= () => (live.state ? json(live.state.numbers) : "");
  live.draw ??= () => redrawAll(live, (v) => v.name === "selected"); // the large view (its layer and head)
  live.choose ??= (patch) => choose(live, { patch });
  live.explain ??= (choice) => choose(live, { choice });
  live.train ??= (position) => choose(live, { position });
  return live;
}

const DIM_AFTER_MS = 150; // a read quicker than this dims nothing (nor costs the page a repaint on the way)

export function setWaiting(live, on) {
  // Dim the tab's views (class vd-waiting) while a new image is read, once it has taken DIM_AFTER_MS, so that a stale
  // answer never looks current; the next numbers (receive) end it.
  clearTimeout(live.dimming);
  const dim = (dimmed) => live.views.forEach((v) => v.element.classList.toggle("vd-waiting", dimmed));
  if (on) live.dimming = setTimeout(() => dim(true), DIM_AFTER_MS);
  else dim(false);
}

// Every view of the tab, or those ``which`` picks, drawn again.
export const redrawAll = (live, which = () => true) => live.views.filter(which).forEach((v) => v.draw());

const redrawKnockout = (live) => redrawAll(live, (v) => v.knockout); // a head toggle redraws these alone

function choose(live, choice) {
  // A choice of the tab's controls (query patch, class to explain, training position): every view redraws, and what
  // failed before is asked again.
  Object.assign(live, choice);
  forgetFailures(live);
  redrawAll(live);
}

// ---- The one cache of answers ----------------------------------------------------------------------------------

export function ask(live, kind, key, compute, redraw) {
  // The answer to ``kind`` kept under ``key``: {value}, {error: why} (it failed: kept until the next choice), or
  // {pending: true} while ``compute()`` (called once: a Promise of the answer, which rejects on failure) is under way;
  // once it lands it is kept and ``redraw`` is called.
  const id = `${kind}/${key}`, found = live.kept.get(id);
  if (found) return found;
  const entry = { pending: true };
  live.kept.set(id, entry);
  Promise.resolve().then(compute)
    .then((value) => ({ value }), (error) => ({ error: String(error?.message ?? error) }))
    .then((settled) => {
      if (live.kept.get(id) !== entry) return; // forgotten meanwhile (a new image)
      live.kept.set(id, settled);
      redraw();
    });
  return entry;
}

export const asked = (live, kind, key) => live.kept.get(`${kind}/${key}`); // what ``ask`` keeps, not asking

export function forgetFailures(live) {
  // What failed is asked again (a choice of the tab's controls, or a view's button, asks for it).
  for (const [id, entry] of live.kept) if (entry.error) live.kept.delete(id);
}

export function waiting(live, kind, which, request, followsKnockout = true) {
  // What a view says while what it needs is asked for (``need``), or why it failed.
  const entry = need(live, kind, which, request, followsKnockout);
  return entry.error ? `${entry.error}. Choose again to retry.` : asking(live);
}

// The heads switched off and how, as the answers for them are kept ("" every head on).
const knockoutId = ({ knockout: { off, mode } }) => (off.length ? `${mode}:${off.join(".")}` : "");

function heldAs(live, which, followsKnockout) {
  // What an answer for ``which`` (a patch, a class...) is kept under: the image in hand, and the heads off if followed.
  const id = followsKnockout ? knockoutId(live) : "";
  return `${live.state.key}/${which}${id ? `@${id}` : ""}`;
}

export function answer(live, kind, which, followsKnockout = true) {
  // The answer kept for the image in hand, or null: of the model as the board has it, unless not ``followsKnockout``.
  return (live.state && asked(live, kind, heldAs(live, which, followsKnockout))?.value) || null;
}

function offRequest(live) {
  // The heads switched off as the source reads them: {off: [[layer, head], ...] (0-based), mode}.
  const k = live.knockout, heads = live.state.numbers.heads;
  return { off: k.off.map((i) => [Math.floor(i / heads), i % heads]), mode: k.mode };
}

export function need(live, kind, which, request = {}, followsKnockout = true, redraw = redrawAll) {
  // What a view needs for the image in hand, asked once of the tab's source: ``kind`` ("query", "relevance",
  // "snapshot", "lens", "faithfulness", "knockout") for ``which`` (a patch, a class...), with the heads the board
  // switched off (unless not ``followsKnockout``); once it lands, ``redraw`` redraws the tab's views, unless a later
  // image came meanwhile. Returns the cache's entry.
  const held = heldAs(live, which, followsKnockout), { key, numbers } = live.state;
  const off = followsKnockout && live.knockout.off.length ? offRequest(live) : {};
  if (!live.source) return { pending: true }; // (the source is still loading)
  return ask(live, kind, held, () => live.source[kind]({ image: numbers.image, ...request, ...off }),
             () => live.state?.key === key && redraw(live));
}

export function knockoutNow(live) {
  // The heads switched off, for the image in hand: null when every head is on (or there is no image); else which
  // (a Set), the id its answer is kept under, the answer (null until it comes) and why there is none (error).
  if (!live.state || !live.knockout.off.length) return null;
  const id = knockoutId(live), found = need(live, "knockout", id, offRequest(live), false, redrawKnockout);
  return { off: new Set(live.knockout.off), id, reply: found.value ?? null, error: found.error ?? null };
}

export function setKnockout(live, off, mode) {
  // Switch these heads off (layer * heads + head; [] all on) with this ablation: the views that follow redraw, what
  // failed before asked again.
  live.knockout = { off: [...new Set(off)].sort((a, b) => a - b), mode: mode ?? live.knockout.mode };
  forgetFailures(live);
  redrawKnockout(live);
}

// The [CLS] maps the views show: the knocked-out model's where heads are off and its answer has come.
export const shownMaps = (live, knocked) => (knocked?.reply ? knocked.reply.maps : live.state.numbers.maps);

// ---- A new image ------------------------------------------------------------------------------------------------

let images = 0; // the page's images so far: each new one's key

function receive(live, numbers) {
  // A new image's numbers from the canvas or the photo reader ("": none; a message in place of numbers), with the
  // answer that came with them (where the first query patch looks): earlier images' answers go, all but the patching
  // view's. While the pen is down, the prediction alone, which only the prediction view shows.
  live.reading = numbers?.reading ? numbers : null;
  if (live.reading) return redrawAll(live, (v) => v.prediction);
  setWaiting(live, false);
  live.message = numbers?.message ?? null;
  live.state = numbers && !numbers.message ? { key: String(++images), numbers } : null;
  for (const id of live.kept.keys()) if (!id.startsWith("patching/")) live.kept.delete(id);
  if (live.state) live.kept.set(`query/${live.state.key}/${numbers.patch}`, { value: numbers.query });
  live.patch = numbers?.patch ?? null;
  live.pointed = false;
  redrawAll(live);
}
