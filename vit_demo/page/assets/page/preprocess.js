// What the model reads, made in the page: a port of vit_demo/data/preprocess.py, step for step, so that the page feeds
// its model the same 8-bit image the server makes. Pure functions on typed arrays (no DOM): they run in the browser
// and under Node (tests/page_preprocess.mjs runs them for tests/test_page_preprocess.py, which compares them with
// Python's on a thousand drawings and two hundred photos). preprocessDrawing (drawing.js: a drawing -> MNIST-like
// pixels), preprocessPhoto (a photo -> CIFAR-10-like pixels) and preprocessResized (a photo -> an imported model's
// input) share this module's limits, errors (with Python's messages) and checks.
//
// Each Python step is mirrored with the arithmetic Python does (arithmetic.js) and torch's and PIL's interpolation
// (interpolate.js, which says what a plane is), bit for bit on x86-64 (torch built for another CPU may round some
// intermediate float32 values otherwise; its uint8 resize is integer arithmetic).
import { clamp01, f32, roundHalfEven } from "./arithmetic.js";
import { antialiasResize, pilResize, torchResizeUint8 } from "./interpolate.js";

// Constants of vit_demo/data/preprocess.py.
const MAX_PIXELS = 40_000_000;
const MAX_DIMENSION = 20_000;
const FLAT_RANGE = f32(4 / 255);

// ---- Errors (preprocess.py's InputError and NothingDrawn, with the same messages) --------------------------------

export class InputError extends Error {
  // Input that cannot be classified; the message says why in words meant for the user.
  constructor(message) {
    super(message);
    this.name = "InputError";
  }
}

export class NothingDrawn extends InputError {
  // A blank canvas or an empty image: there is nothing to classify.
  constructor(message = "Nothing to classify: the image is blank. Draw a digit.") {
    super(message);
    this.name = "NothingDrawn";
  }
}

export function checkSize(width, height) {
  // preprocess._check_size.
  if (width * height > MAX_PIXELS || Math.max(width, height) > MAX_DIMENSION) {
    const limit = MAX_PIXELS.toLocaleString("en"); // 40,000,000, as Python's {:,} writes it
    throw new InputError(`the image is too large (${width}x${height}); the limit is ${limit} pixels`);
  }
  if (width === 0 || height === 0) throw new NothingDrawn("Nothing to classify: the image is empty.");
}

export function checkPixels(pixels, width, height, channels) {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 0 || height < 0)
    throw new InputError(`an image's width and height must be whole numbers, not ${width}x${height}`);
  if (!pixels || pixels.length !== width * height * channels)
    throw new InputError(`a ${width}x${height} image with ${channels} channel(s) has ${width * height * channels} `
                         + `values, not ${pixels?.length}`);
}

// ---- Photos -> CIFAR-10 ---------------------------------------------------------------------------------------------

let overWhite = null, overWhiteBytes = null; // the tables below: as floats, and made 8-bit (np.round(v * 255))

function compositeOverWhite() {
  // The first step of preprocess_photo for every 8-bit (alpha, value): value / 255 * alpha + (1 - alpha), each
  // operation in float32 as numpy does it, as a table: Float32Array (256 * 256), alpha major.
  return (overWhite ??= Float32Array.from({ length: 256 * 256 }, (_, at) => {
    const alpha = f32((at >> 8) / 255), value = at & 255;
    return f32(f32(f32(value / 255) * alpha) + f32(1 - alpha));
  }));
}

function photoRgb(rgba, width, height) {
  // preprocess.photo_rgb of a decoded upload's RGBA pixels (getImageData's: (H*W*4) 8-bit, not premultiplied):
  // transparent areas composited over white -> three Float32Array (H * W) planes, R, G and B. Throws NothingDrawn for
  // an empty or flat image (every channel's range, np.ptp, under 4/255), InputError for what is not an image.
  checkPixels(rgba, width, height, 4);
  checkSize(width, height);
  const n = width * height, over = compositeOverWhite();
  const planes = [], ranges = []; // (3, H, W) and each channel's range (np.ptp, in float32)
  for (let c = 0; c < 3; c++) {
    const plane = new Float32Array(n);
    let lo = Infinity, hi = -Infinity;
    for (let p = 0; p < n; p++) {
      const v = over[rgba[p * 4 + 3] * 256 + rgba[p * 4 + c]];
      plane[p] = v;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    planes.push(plane);
    ranges.push(f32(hi - lo));
  }
  if (ranges.every((range) => range < FLAT_RANGE))
    throw new NothingDrawn("Nothing to classify: the image is one flat colour.");
  return planes;
}

export function preprocessPhoto(rgba, width, height, size = 32) {
  // preprocess.preprocess_photo for a decoded upload's RGBA pixels -> Uint8Array (size * size * 3), HWC: the 8-bit
  // pixels of the CIFAR-10-like photo. Transparent areas become white (photoRgb); the shorter side is resized to
  // `size` (bilinear, antialiased) and the centre cropped. Throws as photoRgb.
  const planes = photoRgb(rgba, width, height), scale = size / Math.min(height, width);
  const oh = Math.max(size, roundHalfEven(height * scale)), ow = Math.max(size, roundHalfEven(width * scale));
  const top = Math.floor((oh - size) / 2), left = Math.floor((ow - size) / 2), out = new Uint8Array(size * size * 3);
  planes.forEach((plane, c) => {
    const resized = antialiasResize({ h: height, w: width, data: plane }, oh, ow).data; // (oh, ow)
    for (let y = 0; y < size; y++)
      for (let x = 0; x < size; x++) {
        const v = clamp01(resized[(top + y) * ow + left + x]); // .clamp(0, 1), then eight_bit
        out[(y * size + x) * 3 + c] = roundHalfEven(f32(v * 255));
      }
  });
  return out;
}

// ---- Photos -> an imported model's input ----------------------------------------------------------------------------

function resizedShape(height, width, resize) {
  // preprocess.resized_shape: [height, width] = resize, or resize (a number) the shorter side, the longer scaled.
  if (typeof resize !== "number") return resize;
  const scaled = Math.trunc((resize * Math.max(height, width)) / Math.min(height, width));
  return width <= height ? [scaled, resize] : [resize, scaled];
}

const RESIZES = { pil: pilResize, torchvision: torchResizeUint8 }; // preprocess_resized's libraries

export function preprocessResized(rgba, width, height, { size, resize, interpolation, library }) {
  // preprocess.preprocess_resized for a decoded upload's RGBA pixels -> Uint8Array (size * size * 3), HWC: the 8-bit
  // pixels that Python's function returns divided by 255. The photo (photoRgb) made 8-bit (np.round(... * 255)),
  // resized to resizedShape by `library` with `interpolation`: "pil" (timm's eval transform: pilResize, "nearest",
  // "bilinear" or "bicubic") or "torchvision" (Hugging Face's ViTImageProcessor: torchResizeUint8, "bilinear" or
  // "bicubic"); the centre cropped at Python's rounded offsets. Throws as photoRgb; an Error for another library.
  if (!Object.hasOwn(RESIZES, library))
    throw new Error(`this page resizes photos as PIL or torchvision does, not as ${library} does: use the Python app`);
  photoRgb(rgba, width, height); // its checks and refusals; its values, made 8-bit, are these (by alpha and value):
  const eightBit = (overWhiteBytes ??= compositeOverWhite().map((v) => roundHalfEven(f32(v * 255)))); // (made once)
  const n = width * height, rgb = new Uint8Array(n * 3); // (H, W, 3)
  for (let p = 0; p < n; p++)
    for (let c = 0; c < 3; c++) rgb[p * 3 + c] = eightBit[rgba[p * 4 + 3] * 256 + rgba[p * 4 + c]];
  const [oh, ow] = resizedShape(height, width, resize);
  if (oh < size || ow < size) throw new Error(`cannot crop ${size}x${size} from a ${ow}x${oh} resize`);
  const resized = RESIZES[library](rgb, width, height, 3, ow, oh, interpolation); // (oh, ow, 3)
  const top = roundHalfEven((oh - size) / 2), left = roundHalfEven((ow - size) / 2), row = size * 3;
  const out = new Uint8Array(size * row);
  for (let y = 0; y < size; y++) {
    const from = ((top + y) * ow + left) * 3;
    out.set(resized.subarray(from, from + row), y * row);
  }
  return out;
}
