// One tab's store: the current image's numbers and every answer for it, which the tab's views draw from
// (live.js mounts them). It lives at window.vdLive[prefix], where the canvas (canvas.js) and the photo reader
// (photo.js) hand it an image's numbers, and tests and scripts read it.
//
// What a view lacks (another patch, class or snapshot) it asks the tab's source for once (``ask``: source.js), and
// keeps with the image's key: a late answer for an earlier image is never drawn over a later one. With heads switched off (the board: ``knockout``), answers are kept apart from the
// intact model's (``heldAs``).
import { decode } from "./picture.js";

const FRESH = () => ({
  state: null, // the image's numbers, decoded: {numbers, key, image, maps, colormap}
  message: null, // what is said in place of a prediction, where there is no image (HTML)
  reading: null, // the prediction alone, while the pen is down (the views show the last drawing the pen left)
  dimming: null, // the timer that dims the views while a new image is read (setWaiting)
  views: [], // the mounted views: {element, name, draw, prediction, knockout}
  answers: {}, // image key -> kind ("query", "relevance", "snapshot", ...) -> which -> the answer
  pending: {}, // "key/kind/which" -> true while asked; false (or why, a string) once it failed
  ask: {}, // kind -> the function that answers it (the tab's source: answerFrom)
  inPage: false, // the forward pass runs in the page (source.js), not on the server
  patch: null, // the query patch
  pointed: false, // the visitor chose it (a click on the patches): the patches view shows where it looks
  choice: null, // the class picker's choice
  position: null, // the training slider's position
  onScreen: new Set(), // the views on screen now (or nearly): the relevance and lens views ask only then
  knockout: { off: [], mode: "mean" }, // the heads switched off (layer * heads + head, sorted) and how
  patching: { clean: null, corrupt: null, replies: {}, pending: {} }, // the two images kept for patching
});

export const asking = (live) => (live.inPage ? "working it out in this page…" : "asking the server…");

export function tabStore(prefix) {
  // The tab's store, made on first use (the canvas may have set ``ask`` before any view mounted).
  const live = ((window.vdLive ??= {})[prefix] ??= {});
  for (const [name, value] of Object.entries(FRESH())) live[name] ??= value;
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

export function prepare(numbers) {
  // The image's numbers, decoded.
  return { numbers, key: numbers.key, image: decode(numbers.image), maps: decode(numbers.maps),
           colormap: decode(numbers.colormap) };
}

export function redrawAll(live, which = () => true) {
  // Every view of the tab, or those ``which`` picks (a view Gradio took out of the page goes).
  live.views = live.views.filter((v) => v.element.isConnected);
  for (const v of live.views.filter(which)) v.draw();
}

export const redrawKnockout = (live) => redrawAll(live, (v) => v.knockout); // a head toggle redraws these alone

export function answer(live, kind, which) {
  // The answer for the image in hand, or null.
  return (live.state && live.answers[live.state.key]?.[kind]?.[which]) || null;
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
  // The heads switched off as a server function reads them: {off: [[layer, head], ...] (0-based), mode}.
  const k = live.knockout, heads = live.state.numbers.heads;
  return { off: k.off.map((i) => [Math.floor(i / heads), i % heads]), mode: k.mode };
}

function keep(live, key, kind, held, reply) {
  ((live.answers[key] ??= {})[kind] ??= {})[held] = reply;
}

export function waiting(live, kind, which, request, followsKnockout = true) {
  // What a view says while its numbers are asked for: the first time, it asks (with the heads the board switched
  // off, unless ``followsKnockout`` is false: then kept under ``which``, else under ``heldAs(which)``); when the
  // answer failed, it says so, and the next choice asks again.
  const held = followsKnockout ? heldAs(live, which) : String(which);
  const id = `${live.state.key}/${kind}/${held}`;
  if (live.pending[id] === false) {
    delete live.pending[id];
    return "The server did not answer. Choose again to retry.";
  }
  if (!live.pending[id] && live.ask[kind]) {
    live.pending[id] = true;
    const key = live.state.key, off = followsKnockout && live.knockout.off.length ? offRequest(live) : {};
    live.ask[kind]({ image: live.state.numbers.image, ...request, ...off }).catch(() => null).then((reply) => {
      if (reply && !reply.error && reply.key === key) {
        keep(live, key, kind, held, reply);
        delete live.pending[id];
      } else live.pending[id] = false;
      if (live.state?.key === key) redrawAll(live);
    });
  }
  return live.inPage ? "Working it out in this page…" : "Asking the server…";
}

export function knockoutNow(live) {
  // The heads switched off, for the image in hand: null when every head is on (or there is no image); else how many,
  // how, the id its answer is kept under, the answer (null until it comes) and why there is none (error). The first
  // view to draw asks; a failure is kept until the choice changes (setKnockout), so no view asks again.
  const k = live.knockout;
  if (!live.state || !k.off.length) return null;
  const id = knockoutId(live), key = live.state.key, asked = `${key}/knockout/${id}`;
  const reply = answer(live, "knockout", id);
  const found = { count: k.off.length, mode: k.mode, off: new Set(k.off), id, reply, error: null };
  if (reply || !live.ask.knockout) return found;
  if (typeof live.pending[asked] === "string") found.error = live.pending[asked];
  else if (!live.pending[asked]) {
    live.pending[asked] = true;
    live.ask.knockout({ image: live.state.numbers.image, ...offRequest(live) })
      .catch(() => null)
      .then((reply) => {
        if (reply && !reply.error && reply.key === key) {
          keep(live, key, "knockout", id, reply);
          delete live.pending[asked];
        } else live.pending[asked] = reply?.error ? `The server says: ${reply.error}` : "The server did not answer.";
        if (live.state?.key === key) redrawKnockout(live);
      });
  }
  return found;
}

export function setKnockout(live, off, mode) {
  // Switch these heads off (layer * heads + head; [] all on) with this ablation, and redraw the views that follow;
  // a choice that failed before is asked again.
  live.knockout = { off: [...new Set(off)].sort((a, b) => a - b), mode: mode ?? live.knockout.mode };
  for (const [id, value] of Object.entries(live.pending)) if (typeof value === "string") delete live.pending[id];
  redrawKnockout(live);
}

export function shownMaps(live, knocked) {
  // The [CLS] maps the views show: the knocked-out model's where heads are off and its answer has come.
  return knocked?.reply ? (knocked.reply.levels ??= decode(knocked.reply.maps)) : live.state.maps;
}

export function read(live, value) {
  // Take a new value of the tab (its numbers as JSON, a message in place of numbers, or "" for no image) with the
  // answers that came with it, keeping those asked for the same image before (a stroke that changed nothing the model
  // reads); earlier images' answers go.
  const parsed = value ? JSON.parse(value) : null;
  setWaiting(live, false);
  live.message = parsed?.message ?? null;
  live.state = parsed && !parsed.message ? prepare(parsed) : null;
  const answers = (live.state && live.answers[live.state.key]) || {};
  for (const [kind, replies] of Object.entries(live.state?.numbers.answers ?? {}))
    Object.assign((answers[kind] ??= {}), replies);
  live.answers = live.state ? { [live.state.key]: answers } : {};
  live.patch = live.state?.numbers.patch ?? null;
  live.pointed = false;
}
