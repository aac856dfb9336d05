// A light drawing canvas: draws locally and sends the drawing, downsampled to SMALL x SMALL pixels
// (ink = 255), as base64 to Python by setting props.value, which fires the component's change event.
// It sends while a stroke is in progress (at most every THROTTLE_MS) and when the stroke ends.
const SMALL = 112;
const THROTTLE_MS = 120;
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

function send() {
  clearTimeout(pending);
  pending = null;
  lastSent = performance.now();
  props.value = encode();
}

function sendSoon() {
  const wait = THROTTLE_MS - (performance.now() - lastSent);
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
  props.value = "";
});
for (const button of element.querySelectorAll(".vd-examples button")) {
  button.addEventListener("click", () => {
    const image = button.querySelector("img");
    reset();
    const margin = canvas.width * 0.1;
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(image, margin, margin, canvas.width - 2 * margin, canvas.height - 2 * margin);
    send();
  });
}

reset();
ctx.lineCap = "round";
ctx.lineJoin = "round";
ctx.strokeStyle = "#000";
setPen(element.querySelector("button.vd-pen[aria-pressed='true']"));
canvas.dataset.ready = "true";  // listening: tests and scripts wait for this before drawing
