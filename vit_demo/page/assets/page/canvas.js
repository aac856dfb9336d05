// A light drawing canvas: draws locally and hands the drawing, downsampled to SMALL x SMALL pixels (a Uint8Array,
// ink = 255), to its tab's source (source.js: preprocessed in the page, the model run where model.js chose), then the
// answer to its tab's views (store.js: live.receive). A drawing is read while a stroke is in progress (as often as the
// pointer moves with the model in the page; at most every THROTTLE_MS through the server), asking for the prediction
// alone, and when the stroke ends for every view's numbers too; one drawing at a time: one made while another is being
// answered waits for that answer, and only the latest is sent. At the start it shows an example, read once the source
// is ready; the pen's first touch clears it.
import { decodeImage } from "./photo.js";
import { tabStore } from "./store.js";

export function mountCanvas(element, prefix, loaded, unreadable) {
  // The canvas in ``element`` for tab ``prefix``; ``loaded()``: a Promise of the tab's source, ready (it rejects where
  // the model can't run: the drawing then says why, the next tries again); ``unreadable``: the model's {why} template.
  const SMALL = 112;
  const THROTTLE_MS = 333; // readings while the pen is down: three a second at most
  const canvas = element.querySelector("canvas.vd-draw");
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  const small = Object.assign(document.createElement("canvas"), { width: SMALL, height: SMALL });
  const smallCtx = small.getContext("2d", { willReadFrequently: true });
  let drawing = false, last = null; // the pen is down, at this point of the canvas
  let lastSent = 0, pending = null; // when a drawing was last sent, and the timer that sends the next
  let sending = false, waiting = null; // a request is under way, and the drawing to send once it is answered (or null)
  let example = false; // the canvas shows the starting example, which the pen's first touch clears
  let answerer = null; // what reads a drawing: the tab's source, once its forward pass is chosen and loaded
  let current = null; // the drawing last read (null: none)

  const useSource = () => loaded().then((source) => { // the tab's source, ready (host.js: loaded)
    answerer = source;
    canvas.dataset.model = source.inPage ? "page" : "server"; // for tests and scripts: where drawings are read
    return source;
  });

  const reset = (paper = "#fff") => // the canvas blank, on ``paper``
    Object.assign(ctx, { fillStyle: paper }).fillRect(0, 0, canvas.width, canvas.height);

  function grab() {
    // The drawing as the source reads it: Uint8Array (SMALL * SMALL), ink 255 on 0.
    Object.assign(smallCtx, { imageSmoothingEnabled: true, imageSmoothingQuality: "high" });
    smallCtx.drawImage(canvas, 0, 0, SMALL, SMALL);
    const rgba = smallCtx.getImageData(0, 0, SMALL, SMALL).data, ink = new Uint8Array(SMALL * SMALL);
    for (let i = 0; i < ink.length; i++) ink[i] = 255 - rgba[i * 4];
    return ink;
  }

  const deliver = (answer) => tabStore(prefix).receive(answer); // the tab's views take it ("": a cleared canvas)

  async function post(drawing, views) {
    // views false (the pen is down): the prediction alone; the views follow when it lifts.
    sending = true;
    let answer;
    try {
      answer = await (await useSource()).stroke({ drawing, views }); // (a source that failed to load is tried again)
    } catch (error) {
      console.warn("The drawing could not be read:", error);
      answer = { message: `The model could not run (${error.message ?? error}): draw again to retry.` };
    }
    sending = false;
    const next = waiting;
    waiting = null;
    if (next !== null) return post(...next); // a later drawing: its answer is the one to show
    if (current === drawing) deliver(answer); // not cleared meanwhile
  }

  function send() {
    clearTimeout(pending);
    pending = null;
    lastSent = performance.now();
    current = grab();
    if (sending) waiting = [current, !drawing];
    else post(current, !drawing);
  }

  function sendSoon() {
    const wait = (answerer?.inPage ? 0 : THROTTLE_MS) - (performance.now() - lastSent);
    if (wait <= 0) send();
    else if (pending === null) pending = setTimeout(send, wait);
  }

  function position(event) {
    const box = canvas.getBoundingClientRect();
    return [(event.clientX - box.left) * canvas.width / box.width,
            (event.clientY - box.top) * canvas.height / box.height];
  }

  function setPen(button) {
    for (const b of element.querySelectorAll("button.vd-pen")) b.setAttribute("aria-pressed", String(b === button));
    ctx.lineWidth = Number(button.dataset.width);
  }

  canvas.addEventListener("pointerdown", (event) => {
    event.preventDefault();
    try {
      canvas.setPointerCapture(event.pointerId); // keep the stroke when the pointer leaves the canvas
    } catch {} // (a pointer the browser does not track, a synthetic event's, cannot be captured: drawing still works)
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
  for (const type of ["pointerup", "pointercancel"]) canvas.addEventListener(type, () => { // the stroke ends
    if (!drawing) return;
    drawing = false;
    send();
  });

  for (const button of element.querySelectorAll("button.vd-pen"))
    button.addEventListener("click", () => setPen(button));
  function clear(answer) {
    // A blank canvas, nothing sent or to send, and the views told ``answer`` ("": cleared).
    clearTimeout(pending);
    pending = null;
    reset();
    example = false;
    current = null;
    waiting = null;
    deliver(answer);
  }
  element.querySelector("button.vd-clear").addEventListener("click", () => clear(""));

  function drawExample(image, width = 1, height = 1, paper = "#fff") {
    // width, height: its shape, kept, on ``paper`` (grey: a photo's colours)
    ctx.filter = "grayscale(1)";
    reset(paper);
    const side = canvas.width * 0.8 / Math.max(width, height);
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(image, (canvas.width - side * width) / 2, (canvas.height - side * height) / 2, side * width,
                  side * height);
    ctx.filter = "none";
  }

  // A handwritten digit from a file (a photo or scan of ink on paper): drawn on the canvas, then read as a drawing,
  // whose preprocessing takes the paper for the background (drawing.js: inkMap).
  element.querySelector(".vd-upload input")?.addEventListener("change", async (event) => {
    const file = event.target.files[0];
    event.target.value = ""; // the same file, chosen again, is read again
    if (!file) return;
    const { bitmap, ...refused } = await decodeImage(file, unreadable);
    if (!bitmap) return clear(refused); // cleared, as a photo that can't be read is not shown
    example = false;
    smallCtx.drawImage(bitmap, 0, 0, 1, 1); // its mean colour, the paper's, where the canvas is wider than the photo
    const [r, g, b] = smallCtx.getImageData(0, 0, 1, 1).data;
    drawExample(bitmap, bitmap.width, bitmap.height, `rgb(${r} ${g} ${b})`);
    bitmap.close();
    send();
  });

  for (const button of element.querySelectorAll(".vd-examples button")) button.addEventListener("click", () => {
    drawExample(button.querySelector("img"));
    example = false;
    send();
  });

  reset();
  const first = element.querySelector(".vd-examples button[data-first] img");
  if (first) {
    example = true; // shown at once, its numbers once the source is ready (useSource)
    const show = () => { if (example) drawExample(first); };
    if (first.complete) show(); else first.addEventListener("load", show, { once: true });
  }
  Object.assign(ctx, { lineCap: "round", lineJoin: "round", strokeStyle: "#000" });
  setPen(element.querySelector("button.vd-pen[aria-pressed='true']"));
  canvas.dataset.ready = "true";  // listening: tests and scripts wait for this before drawing
  useSource().then(async (source) => { // the example's numbers, once the source is ready, unless the pen came first
    const numbers = example && (await source.example());
    if (example && !current) deliver(numbers);
  }).catch(() => {}); // (a failure is said when a drawing is read)
}
