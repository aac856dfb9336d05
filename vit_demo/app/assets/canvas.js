// A light drawing canvas: draws locally and hands the drawing, downsampled to SMALL x SMALL pixels (ink = 255), as
// base64 to its tab's source (assets/page/source.js, which the pad names in data-page-model: it preprocesses the
// drawing in the page and runs the model where model.js chose, in the page or through the server function
// ``server.forward``), then hands the answer to its tab's views (assets/page/live.js: window.vdLive[panel].receive).
// A drawing is read while a stroke is in progress (as often as the pointer moves with the model in the page; at most
// every THROTTLE_MS through the server), asking for the prediction alone, and when the stroke ends, asking for every
// view's numbers too; one drawing at a time: one made while another is being answered waits for that answer, and
// only the latest is sent.
// At the start it shows an example, read once the source is ready; the pen's first touch clears it.
const SMALL = 112;
const THROTTLE_MS = 333; // readings while the pen is down: three a second at most
const PAD = element.querySelector(".vd-pad");
const PANEL = PAD.dataset.panel;
const canvas = element.querySelector("canvas.vd-draw");
const ctx = canvas.getContext("2d", { willReadFrequently: true });
const small = document.createElement("canvas");
small.width = SMALL;
small.height = SMALL;
const smallCtx = small.getContext("2d", { willReadFrequently: true });
let drawing = false;
let last = null;
let lastSent = 0;
let pending = null;
let sending = false; // a request is under way
let waiting = null; // the drawing to send once it is answered (null: none)
let example = false; // the canvas shows the starting example, which the pen's first touch clears
let answerer = null; // what reads a drawing: the tab's source, once its forward pass is chosen and loaded
let loading = null; // Promise of it

function useSource() {
  // The tab's source (the app's ?model=server runs the model on the server). Where the pad names none (the model
  // can't be loaded at all), the prediction view says why and drawings are not read.
  const described = PAD.dataset.pageModel;
  if (!described) return null;
  const { source, model } = JSON.parse(described);
  const forced = new URLSearchParams(window.location.search).get("model") === "server";
  return import(new URL(source, document.baseURI).href).then(async ({ answerFrom, tabSource }) => {
    const page = tabSource(PANEL, model, document.baseURI, { server: server?.forward ?? null, forced });
    await page.ready();
    answerer = page;
    answerFrom(PANEL, page);
    canvas.dataset.model = page.inPage ? "page" : "server"; // for tests and scripts: where drawings are read
    if (example && model.example) {
      const numbers = await page.example();
      if (example && !props.value) deliver(numbers); // (unless the pen came first)
    }
    return page;
  });
}

function reset() {
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
}

function encode() {
  smallCtx.imageSmoothingEnabled = true;
  smallCtx.imageSmoothingQuality = "high";
  smallCtx.drawImage(canvas, 0, 0, SMALL, SMALL);
  const rgba = smallCtx.getImageData(0, 0, SMALL, SMALL).data;
  let bytes = "";
  for (let i = 0; i < SMALL * SMALL; i++) bytes += String.fromCharCode(255 - rgba[i * 4]);
  return btoa(bytes);
}

function deliver(answer) {
  // The tab's views take the answer (page/views/selected.js); "" is a cleared canvas, answered in the page. Views
  // still loading find it kept (live.undelivered) when they mount.
  const live = ((window.vdLive ??= {})[PANEL] ??= {});
  if (live.receive) live.receive(answer);
  else live.undelivered = answer;
}

async function post(drawing, views) {
  // views false (the pen is down): the prediction alone; the views follow when it lifts.
  sending = true;
  let answer;
  try {
    loading ??= useSource();
    if (!loading) return (sending = false); // no model: nothing to read with
    answer = await (await loading).stroke({ drawing, views });
  } catch (error) {
    console.warn("The drawing could not be read:", error);
    loading = null; // the next drawing tries again
    answer = { message: `The model could not run (${error.message ?? error}): draw again to retry.` };
  }
  sending = false;
  if (waiting !== null) {
    const next = waiting;
    waiting = null;
    return post(...next); // a later drawing: its answer is the one to show
  }
  if (props.value === drawing) deliver(answer); // not cleared meanwhile
}

function send() {
  clearTimeout(pending);
  pending = null;
  lastSent = performance.now();
  props.value = encode();
  if (sending) waiting = [props.value, !drawing];
  else post(props.value, !drawing);
}

function sendSoon() {
  const wait = (answerer?.inPage ? 0 : THROTTLE_MS) - (performance.now() - lastSent);
  if (wait <= 0) send();
  else if (pending === null) pending = setTimeout(send, wait);
}

function position(event) {
  const box = canvas.getBoundingClientRect();
  return [(event.clientX - box.left) * canvas.width / box.width, (event.clientY - box.top) * canvas.height / box.height];
}

function setPen(button) {
  for (const b of element.querySelectorAll("button.vd-pen")) b.setAttribute("aria-pressed", String(b === button));
  ctx.lineWidth = Number(button.dataset.width);
}

canvas.addEventListener("pointerdown", (event) => {
  event.preventDefault();
  try {
    canvas.setPointerCapture(event.pointerId); // keep the stroke when the pointer leaves the canvas
  } catch (error) {
    // a pointer the browser does not track (synthetic events) cannot be captured; drawing still works
  }
  drawing = true;
  lastSent = performance.now(); // the first reading comes THROTTLE_MS into the stroke, not for its first dot
  if (example) reset();
  example = false;
  last = position(event);
  ctx.beginPath();
  ctx.moveTo(last[0], last[1]);
  ctx.lineTo(last[0] + 0.01, last[1]);
  ctx.stroke();
});
canvas.addEventListener("pointermove", (event) => {
  if (!drawing) return;
  const events = event.getCoalescedEvents ? event.getCoalescedEvents() : [];
  ctx.beginPath();
  ctx.moveTo(last[0], last[1]);
  for (const e of events.length ? events : [event]) {
    last = position(e);
    ctx.lineTo(last[0], last[1]);
  }
  ctx.stroke();
  sendSoon();
});
function endStroke() {
  if (!drawing) return;
  drawing = false;
  send();
}
canvas.addEventListener("pointerup", endStroke);
canvas.addEventListener("pointercancel", endStroke);

for (const button of element.querySelectorAll("button.vd-pen")) button.addEventListener("click", () => setPen(button));
element.querySelector("button.vd-clear").addEventListener("click", () => {
  clearTimeout(pending);
  pending = null;
  reset();
  example = false;
  props.value = "";
  waiting = null;
  deliver("");
});

function drawExample(image) {
  reset();
  const margin = canvas.width * 0.1;
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(image, margin, margin, canvas.width - 2 * margin, canvas.height - 2 * margin);
}

for (const button of element.querySelectorAll(".vd-examples button")) {
  button.addEventListener("click", () => {
    drawExample(button.querySelector("img"));
    example = false;
    send();
  });
}

reset();
const first = element.querySelector(".vd-examples button[data-first] img");
if (first) {
  // Shown at once; its numbers follow once the source is ready (useSource), unless the pen came first.
  example = true;
  const show = () => { if (example) drawExample(first); };
  if (first.complete) show(); else first.addEventListener("load", show, { once: true });
}
ctx.lineCap = "round";
ctx.lineJoin = "round";
ctx.strokeStyle = "#000";
setPen(element.querySelector("button.vd-pen[aria-pressed='true']"));
canvas.dataset.ready = "true";  // listening: tests and scripts wait for this before drawing
loading = useSource();
