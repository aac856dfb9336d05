// One tab's store: the current image's numbers and every answer for it, which the tab's views draw from
// (live.js mounts them). It lives at window.vdLive[prefix], where the canvas (canvas.js) and the photo reader
// (photo.js) hand it an image's numbers (``receive``), the app's controls call its handle (``draw``, ``choose``,
// ``explain``, ``train``), and tests and scripts read it.
//
// What a view lacks (another patch, class or snapshot, heads off, the scores) it asks the tab's source for once
// (``live.ask``: source.js), through one cache (``ask``): an answer is kept with the image's key, a failure as its
// reason until the next choice, and a late answer for an earlier image is never drawn over a later one. With heads
// switched off (the board: ``knockout``), answers are kept apart from the intact model's (``heldAs``).
import { decode } from "./picture.js";

const FRESH = () => ({
  state: null, // the image's numbers, decoded: {numbers, key (a counter), image, maps, colormap}
  text: "", // the same, as JSON: tells the same numbers sent again, and scripts read it (live.numbers())
  message: null, // what is said in place of a prediction, where there is no image (HTML)
  reading: null, // the prediction alone, while the pen is down (the views show the last drawing the pen left)
  dimming: null, // the timer that dims the views while a new image is read (setWaiting)
  views: [], // the mounted views: {element, name, draw, prediction, knockout}
  kept: new Map(), // id -> {value} | {error} | {pending: true}: every answer asked for (``ask``)
  ask: {}, // kind -> the function that answers it (the tab's source: answerFrom)
  inPage: false, // the forward pass runs in the page (source.js), not on the server
  patch: null, // the query patch
  pointed: false, // the visitor chose it (a click on the patches): the patches view shows where it looks
  choice: null, // the class picker's choice
  position: null, // the training slider's position
  onScreen: new Set(), // the views on screen now (or nearly): the relevance and lens views ask only then
  knockout: { off: [], mode: "mean" }, // the heads switched off (layer * heads + head, sorted) and how
  patching: { clean: null, corrupt: null, residual: null }, // the two images kept for patching
});

export const asking = (live) => (live.inPage ? "working it out in this page…" : "asking the server…");

export function tabStore(prefix) {
  // The tab's store and its handle, made on first use.
  const live = ((window.vdLive ??= {})[prefix] ??= {});
  for (const [name, value] of Object.entries(FRESH())) live[name] ??= value;
  live.receive ??= (answer) => receive(live, answer);
  live.numbers ??= () => live.text;
  live.draw ??= (layer, head) => redrawAll(live, (v) => v.name === "selected", layer, head);
  live.choose ??= (patch) => choose(live, { patch });
  live.explain ??= (choice) => choose(live, { choice });
  live.train ??= (position) => choose(live, { position });
  return live;
}

const NOT_ASKED_BY_VIEWS = new Set(["stroke", "photo", "ready", "example"]); // the canvas' and the upload's

export function answerFrom(prefix, source) {
  // The tab's views take every answer from ``source`` (source.js: pageSource, its forward pass chosen), and say where
  // it is worked out (in the page, or asking the server).
  const live = tabStore(prefix);
  for (const [kind, ask] of Object.entries(source))
    if (typeof ask === "function" && !NOT_ASKED_BY_VIEWS.has(kind)) live.ask[kind] = ask;
  live.inPage = source.inPage;
  return live;
}

const DIM_AFTER_MS = 150; // a read quicker than this dims nothing (nor costs the page a repaint on the way)

export function setWaiting(live, on) {
  // Dim the tab's views (class vd-waiting) while a new image is read, once it has taken DIM_AFTER_MS, so that a stale
  // answer never looks current; the next numbers (read) end it.
  clearTimeout(live.dimming);
  const dim = (dimmed) => live.views.forEach((v) => v.element.classList.toggle("vd-waiting", dimmed));
  if (on) live.dimming = setTimeout(() => dim(true), DIM_AFTER_MS);
  else dim(false);
}

export function redrawAll(live, which = () => true, ...args) {
  // Every view of the tab, or those ``which`` picks.
  for (const v of live.views.filter(which)) v.draw(...args);
}

export const redrawKnockout = (live) => redrawAll(live, (v) => v.knockout); // a head toggle redraws these alone

function choose(live, choice) {
  // A choice of the tab's controls (the query patch, the class to explain, the training position): every view
  // redraws, and what failed before is asked again.
  Object.assign(live, choice);
  forgetFailures(live);
  redrawAll(live);
}

// ---- The one cache of answers ----------------------------------------------------------------------------------

export function ask(live, id, compute, redraw = () => redrawAll(live)) {
  // The answer kept under ``id``: {value}, {error: why} (a failed answer, kept until the next choice), or
  // {pending: true} while ``compute()`` (called once: a Promise of the answer, or of {error}) is under way; once it
  // lands it is kept and ``redraw`` is called.
  const found = live.kept.get(id);
  if (found) return found;
  const entry = { pending: true };
  live.kept.set(id, entry);
  Promise.resolve()
    .then(compute)
    .then((reply) => (reply?.error ? { error: reply.error } : { value: reply }),
          (error) => ({ error: String(error?.message ?? error) }))
    .then((settled) => {
      if (live.kept.get(id) !== entry) return; // forgotten meanwhile (a new image)
      live.kept.set(id, settled);
      redraw();
    });
  return entry;
}

function forgetFailures(live) {
  for (const [id, entry] of live.kept) if (entry.error) live.kept.delete(id);
}

export function waiting(live, kind, which, request, followsKnockout = true) {
  // What a view says while what it needs is asked for (``need``), or why it failed.
  const entry = need(live, kind, which, request, followsKnockout);
  return entry.error ? `${entry.error}. Choose again to retry.` : asking(live);
}

export function answer(live, kind, which) {
  // The answer kept for the image in hand, or null.
  return (live.state && live.kept.get(`${live.state.key}/${kind}/${which}`)?.value) || null;
}

export function knockoutId(live) {
  // The heads switched off and how, as the answers for them are kept ("" every head on).
  const k = live.knockout;
  return k.off.length ? `${k.mode}:${k.off.join(".")}` : "";
}

export function heldAs(live, which) {
  // What a view's answer for ``which`` (a patch, a class) is kept under: with heads off, the knocked-out model's.
  const id = knockoutId(live);
  return id ? `${which}@${id}` : String(which);
}

export const viewAnswer = (live, kind, which) => answer(live, kind, heldAs(live, which)); // for the model as it is

function offRequest(live) {
  // The heads switched off as the source reads them: {off: [[layer, head], ...] (0-based), mode}.
  const k = live.knockout, heads = live.state.numbers.heads;
  return { off: k.off.map((i) => [Math.floor(i / heads), i % heads]), mode: k.mode };
}

export function need(live, kind, which, request = {}, followsKnockout = true) {
  // What a view needs for the image in hand, asked once of the tab's source: ``kind`` ("query", "relevance",
  // "snapshot", "lens", "faithfulness") for ``which`` (a patch, a class...), with the heads the board switched off
  // (unless ``followsKnockout`` is false). Returns the cache's entry.
  const held = followsKnockout ? heldAs(live, which) : String(which), key = live.state.key;
  const off = followsKnockout && live.knockout.off.length ? offRequest(live) : {};
  if (!live.ask[kind]) return { pending: true }; // (the source is still loading)
  return ask(live, `${key}/${kind}/${held}`, () => live.ask[kind]({ image: live.state.numbers.image, ...request,
                                                                     ...off }),
             () => live.state?.key === key && redrawAll(live));
}

export function knockoutNow(live) {
  // The heads switched off, for the image in hand: null when every head is on (or there is no image); else how many,
  // how, the id its answer is kept under, the answer (null until it comes) and why there is none (error).
  const k = live.knockout;
  if (!live.state || !k.off.length) return null;
  const id = knockoutId(live), key = live.state.key;
  const found = live.ask.knockout ? ask(live, `${key}/knockout/${id}`,
    () => live.ask.knockout({ image: live.state.numbers.image, ...offRequest(live) }),
    () => live.state?.key === key && redrawKnockout(live)) : { pending: true };
  return { count: k.off.length, mode: k.mode, off: new Set(k.off), id, reply: found.value ?? null,
           error: found.error ?? null };
}

export function setKnockout(live, off, mode) {
  // Switch these heads off (layer * heads + head; [] all on) with this ablation, and redraw the views that follow;
  // a choice that failed before is asked again.
  live.knockout = { off: [...new Set(off)].sort((a, b) => a - b), mode: mode ?? live.knockout.mode };
  forgetFailures(live);
  redrawKnockout(live);
}

export function shownMaps(live, knocked) {
  // The [CLS] maps the views show: the knocked-out model's where heads are off and its answer has come.
  return knocked?.reply ? (knocked.reply.levels ??= decode(knocked.reply.maps)) : live.state.maps;
}

// ---- A new image ------------------------------------------------------------------------------------------------

let images = 0; // the page's images so far: each new one's key

function prepare(numbers, before) {
  // The image's numbers, decoded, and its key: the one before's where the model reads the same pixels (a drawing
  // sent again), else a new one.
  const image = decode(numbers.image), same = before?.image.length === image.length &&
    before.image.every((value, i) => value === image[i]);
  return { numbers, key: same ? before.key : String(++images), image, maps: decode(numbers.maps),
           colormap: decode(numbers.colormap) };
}

function read(live, parsed) {
  // Take a new image's numbers (or a message in place of numbers, or null for no image) with the answers that came
  // with them, keeping those asked for the same image before (a stroke that changed nothing the model reads) and
  // the patching view's; earlier images' answers go.
  setWaiting(live, false);
  live.message = parsed?.message ?? null;
  live.state = parsed && !parsed.message ? prepare(parsed, live.state) : null;
  const key = live.state?.key;
  for (const id of live.kept.keys()) if (!id.startsWith(`${key}/`) && !id.startsWith("patching/")) live.kept.delete(id);
  for (const [kind, replies] of Object.entries(live.state?.numbers.answers ?? {}))
    for (const [which, reply] of Object.entries(replies)) live.kept.set(`${key}/${kind}/${which}`, { value: reply });
  live.patch = live.state?.numbers.patch ?? null;
  live.pointed = false;
}

function receive(live, answer) {
  // A new image's numbers from the canvas or the photo reader ("": none; a message in place of numbers); while the pen
  // is down, the prediction alone, which only the prediction view shows.
  live.reading = answer?.reading ? answer : null;
  const text = live.reading ? live.text : answer ? JSON.stringify(answer) : "";
  if (live.reading || text === live.text) return redrawAll(live, (v) => v.prediction); // (the same numbers again)
  live.text = text;
  read(live, answer || null);
  redrawAll(live);
}
