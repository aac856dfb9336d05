// Drawings -> MNIST, made in the page: preprocess.py's preprocess_drawing, step for step (preprocess.js says how the
// port is made and checked). The canvas' grey copy (ink 255 on 0, or dark on light) -> MNIST-like 28x28 pixels.
import { clamp01, f32, medianOf8Bit, numpyQuantile, numpySum, roundHalfEven, torchQuantile, torchSum }
  from "./arithmetic.js";
import { areaResize, bilinearResize } from "./interpolate.js";
import { NothingDrawn, checkPixels, checkSize } from "./preprocess.js";

// Constants of vit_demo/data/preprocess.py.
const INK_THRESHOLD = f32(0.2); // numpy compares a float32 array with a Python float in float32
const MIN_INK_PIXELS = 4;
const DIGIT_BOX = 20;
const DIGIT_CANVAS = 28;
const STROKE_RANGE = [1.8, 2.9];
const WORK_SCALE = 4;
const FAINT = f32(0.05); // the "is there ink" threshold of the torch steps (a float32 tensor > 0.05)
const TINY = f32(1e-6); // clamp_min(1e-6) on a float32 tensor

// preprocess.eight_bit: clipped to [0, 1] and rounded to 256 levels, in float32. Float32Array -> Float32Array
const eightBit = (values) => Float32Array.from(pixels(values.map(clamp01)), (v) => f32(v / 255));

// captions.image_text's pixels: an image on 256 levels in [0, 1] as its 8-bit pixels. Float32Array -> Uint8Array
const pixels = (values) => Uint8Array.from(values, (v) => roundHalfEven(f32(v * 255)));

export function inkMap(grey, width, height) {
  // preprocess.ink_map for one channel (the canvas' 8-bit grey): the background is the median brightness; ink is how
  // far a pixel is from it, towards white on dark, towards black on light, in [0, 1]. (H*W) uint8 -> plane (H, W)
  const values = new Float32Array(grey.length);
  for (let i = 0; i < grey.length; i++) values[i] = f32(grey[i] / 255); // to_float_array: uint8 / 255 in float32
  const background = medianOf8Bit(grey), light = background >= 0.5, ink = new Float32Array(values.length);
  const scale = f32(Math.max(light ? background : 1 - background, 1e-6));
  for (let i = 0; i < ink.length; i++)
    ink[i] = clamp01(f32(f32(light ? background - values[i] : values[i] - background) / scale));
  return { h: height, w: width, data: ink };
}

function strokeWidth(digit, h, w) {
  // preprocess.stroke_width: twice the ink mass over the total edge strength, of an (h, w) float32 ink map, the
  // sums as torch adds them (torchSum). torch.sqrt goes through MKL, which rounds some 0.5% of its results the
  // other way (1 ulp), so the width can differ from Python's in its last bits (measured: 7 of 2,000 MNIST
  // digits, by 1e-7): that changes the output only for a width within 1e-6 of a limit of STROKE_RANGE.
  const edges = new Float32Array((h - 1) * (w - 1)); // (h - 1, w - 1): sqrt(dx ** 2 + dy ** 2)
  for (let y = 0; y < h - 1; y++)
    for (let x = 0; x < w - 1; x++) {
      const here = digit[y * w + x];
      const dy = f32(digit[(y + 1) * w + x] - here), dx = f32(digit[y * w + x + 1] - here);
      edges[y * (w - 1) + x] = Math.sqrt(f32(f32(dx * dx) + f32(dy * dy)));
    }
  return f32(f32(2 * torchSum(digit)) / Math.max(torchSum(edges), TINY));
}

function inkBox(plane, threshold) {
  // The rows and columns holding a value above threshold: { top, bottom, left, right } (inclusive), or null.
  const { h, w, data } = plane;
  let top = h, bottom = -1, left = w, right = -1;
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      if (data[y * w + x] <= threshold) continue;
      top = Math.min(top, y);
      bottom = y;
      left = Math.min(left, x);
      right = Math.max(right, x);
    }
  return bottom < 0 ? null : { top, bottom, left, right };
}

function crop(plane, box) {
  // plane[top : bottom + 1, left : right + 1] -> plane (bottom - top + 1, right - left + 1)
  const h = box.bottom - box.top + 1, w = box.right - box.left + 1, out = new Float32Array(h * w);
  for (let y = 0; y < h; y++) {
    const from = (box.top + y) * plane.w + box.left;
    out.set(plane.data.subarray(from, from + w), y * w);
  }
  return { h, w, data: out };
}

function pad(plane, by) {
  // F.pad with zeros, `by` on every side: (h, w) -> (h + 2 by, w + 2 by)
  const h = plane.h + 2 * by, w = plane.w + 2 * by, out = new Float32Array(h * w);
  for (let y = 0; y < plane.h; y++) out.set(plane.data.subarray(y * plane.w, (y + 1) * plane.w), (y + by) * w + by);
  return { h, w, data: out };
}

function fitBox(work) {
  // preprocess._fit_box: crop a work-scale ink map to its ink (> 0.05) and shrink it (area) so that its longest
  // side is 20 px, its peak scaled to 1. plane (H, W) -> plane (<= 20, <= 20)
  const box = inkBox(work, FAINT);
  if (!box) throw new Error("index 0 is out of bounds for dimension 0 with size 0"); // torch's error on no ink
  const ink = crop(work, box), longest = Math.max(ink.h, ink.w);
  const digit = areaResize(ink, Math.max(1, roundHalfEven((ink.h * DIGIT_BOX) / longest)),
    Math.max(1, roundHalfEven((ink.w * DIGIT_BOX) / longest)));
  const divisor = Math.max(digit.data.reduce((peak, v) => (v > peak ? v : peak), -Infinity), TINY);
  for (let i = 0; i < digit.data.length; i++) digit.data[i] = f32(digit.data[i] / divisor);
  return digit;
}

function changeWidth(work, by) {
  // preprocess._change_width: dilate (by > 0) or erode (by < 0) a (H, W) ink map with a k x k max (min) filter,
  // k = 2 * max(1, round(|by| / 2)) + 1, zeros beyond the border. plane (H, W) -> plane (H, W)
  // (A k x k max is a max along the rows, then along the columns; a min likewise.)
  const k = 2 * Math.max(1, roundHalfEven(Math.abs(by) / 2)) + 1, r = (k - 1) / 2, dilate = by > 0;
  const { h, w, data } = work, rows = new Float32Array(h * w), out = new Float32Array(h * w);
  const pass = (from, to, size, step, count, stride) => {
    // along lines of `size` values `step` apart; `count` lines, `stride` apart
    for (let line = 0; line < count; line++)
      for (let i = 0; i < size; i++) {
        let v = i - r < 0 || i + r >= size ? 0 : from[line * stride + i * step]; // the zero padding takes part
        for (let j = Math.max(0, i - r); j <= Math.min(size - 1, i + r); j++) {
          const u = from[line * stride + j * step];
          if (dilate ? u > v : u < v) v = u;
        }
        to[line * stride + i * step] = v;
      }
  };
  pass(data, rows, w, 1, h, w);
  pass(rows, out, h, w, w, 1);
  return { h, w, data: out };
}

function centreByMass(digit) {
  // preprocess._centre_by_mass: an (h, w) digit pasted into 28x28 with its centre of mass at the centre (a sub-pixel,
  // bilinear shift), scaled so that typical ink (the 0.9 quantile) is full, on 256 levels. -> Float32Array (28 * 28)
  const { h, w, data } = digit;
  const mass = numpySum(data, true); // float32
  const ysWeighted = Float64Array.from(data, (v, i) => Math.floor(i / w) * v); // int64 * float32 -> float64
  const xsWeighted = Float64Array.from(data, (v, i) => (i % w) * v);
  const comY = numpySum(ysWeighted, false) / mass, comX = numpySum(xsWeighted, false) / mass;
  const offsetY = Math.min(Math.max((DIGIT_CANVAS - 1) / 2 - comY, 0), DIGIT_CANVAS - h);
  const offsetX = Math.min(Math.max((DIGIT_CANVAS - 1) / 2 - comX, 0), DIGIT_CANVAS - w);
  const top = Math.trunc(offsetY), left = Math.trunc(offsetX), fy = offsetY - top, fx = offsetX - left;
  // padded (h + 1, w + 1): the four shifted copies added in numpy's order, each weight a float32
  const pw = w + 1, padded = new Float32Array((h + 1) * pw);
  const parts = [[0, 0, f32((1 - fy) * (1 - fx))], [1, 0, f32(fy * (1 - fx))],
                 [0, 1, f32((1 - fy) * fx)], [1, 1, f32(fy * fx)]];
  for (const [dy, dx, weight] of parts)
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++) {
        const at = (y + dy) * pw + x + dx;
        padded[at] = f32(padded[at] + f32(weight * data[y * w + x]));
      }
  // canvas (29, 29) with padded at (top, left), cut to (28, 28)
  const canvas = new Float32Array(DIGIT_CANVAS * DIGIT_CANVAS);
  const columns = Math.min(pw, DIGIT_CANVAS - left); // padded's columns that fall inside the canvas
  for (let y = 0; y <= h && top + y < DIGIT_CANVAS; y++)
    canvas.set(padded.subarray(y * pw, y * pw + columns), (top + y) * DIGIT_CANVAS + left);
  const typical = numpyQuantile(canvas.filter((v) => v > FAINT), 0.9); // float32, of the ink
  return eightBit(canvas.map((v) => f32(v / typical)));
}

export function preprocessDrawing(grey, width, height) {
  // preprocess.preprocess_drawing for the canvas' copy: (H*W) 8-bit grey (Uint8Array or Uint8ClampedArray; ink 255
  // on 0, or dark on light) -> Uint8Array (28 * 28), the 8-bit pixels of the MNIST-like digit, white on black.
  // Find the ink, crop to it, bring the stroke width into MNIST's range, scale the longest side to 20 px, centre
  // the centre of mass in 28x28. Throws NothingDrawn for a blank canvas, InputError for what is not an image.
  checkPixels(grey, width, height, 1);
  checkSize(width, height);
  const ink = inkMap(grey, width, height); // (H, W)
  const drawn = ink.data.reduce((count, v) => count + (v > INK_THRESHOLD ? 1 : 0), 0);
  if (drawn < MIN_INK_PIXELS) throw new NothingDrawn();
  const inkCrop = crop(ink, inkBox(ink, INK_THRESHOLD)); // (h, w)

  // Work at 4x the final size: fine enough to adjust strokes, small enough to be fast.
  const { h, w } = inkCrop, scale = (WORK_SCALE * DIGIT_BOX) / Math.max(h, w);
  const oh = Math.max(1, roundHalfEven(h * scale)), ow = Math.max(1, roundHalfEven(w * scale));
  let work = scale < 1 ? areaResize(inkCrop, oh, ow) : bilinearResize(inkCrop, oh, ow); // (<= 80, <= 80)
  const inked = work.data.filter((v) => v > FAINT);
  if (!inked.length) throw new NothingDrawn(); // a few faint dots far apart, averaged away at this scale
  // A pen much thinner than a work pixel leaves faint grey strokes: scale so typical ink is full strength.
  const typical = Math.max(torchQuantile(inked, 0.9), TINY);
  for (let i = 0; i < work.data.length; i++) work.data[i] = clamp01(f32(work.data[i] / typical));
  work = pad(work, WORK_SCALE * 4); // room for thicker strokes
  const [low, high] = STROKE_RANGE;
  let digit;
  for (let round = 0; round < 4; round++) {
    digit = centreByMass(fitBox(work));
    const width = strokeWidth(digit, DIGIT_CANVAS, DIGIT_CANVAS);
    if (low <= width && width <= high) break;
    const adjusted = changeWidth(work, ((width < low ? low : high) - width) * WORK_SCALE);
    if (!adjusted.data.some((v) => v > FAINT)) break; // thinning would erase the ink altogether: keep the strokes
    work = adjusted;
  }
  return pixels(digit);
}
