// A photo read in the page: decoded by the browser (its orientation from the file, no colour conversion), refused
// above MAX_PIXELS as the app refuses it, and classified by the page's model (source.js: photo). The static page
// (static.js) reads its uploads and examples with it; the app's photo tab with ``usePhotoModel``.
import { tabSource } from "./source.js";
import { answerFrom, setWaiting, tabStore } from "./store.js";

const MAX_PIXELS = 40_000_000; // vit_demo/data/preprocess.py MAX_PIXELS: refused before decoding, as the app refuses it

async function claimedPixels(blob) {
  // The pixels a PNG, GIF or BMP file's header claims (null for other kinds): read before decoding, as
  // vit_demo/data/preprocess.py does, so that a file claiming billions of pixels is refused without the browser trying.
  const head = new DataView(await blob.slice(0, 26).arrayBuffer()), bytes = new Uint8Array(head.buffer);
  const starts = (...magic) => magic.every((b, i) => bytes[i] === b);
  if (head.byteLength >= 24 && starts(0x89, 0x50, 0x4e, 0x47)) return head.getUint32(16) * head.getUint32(20);
  if (head.byteLength >= 10 && starts(0x47, 0x49, 0x46)) return head.getUint16(6, true) * head.getUint16(8, true);
  if (head.byteLength >= 26 && starts(0x42, 0x4d)) return Math.abs(head.getInt32(18, true) * head.getInt32(22, true));
  return null;
}

export async function readPhoto(source, blob, unreadable) {
  // The tab's answer for a photo (a Blob): its numbers, or a message saying why it can't be read (``unreadable``:
  // the model's template, with {why}; the answer then says ``refused``, so that the page does not show the file).
  const refuse = (why) => ({ message: unreadable.replace("{why}", why), refused: true });
  if ((await claimedPixels(blob)) > MAX_PIXELS)
    return refuse(`the image has too many pixels (more than ${MAX_PIXELS.toLocaleString("en")})`);
  let bitmap;
  try {
    bitmap = await createImageBitmap(blob, { imageOrientation: "from-image", premultiplyAlpha: "none",
                                              colorSpaceConversion: "none" });
  } catch {
    return refuse("this file is not an image that can be read (PNG, JPEG, GIF, BMP, WebP...)");
  }
  const { width, height } = bitmap;
  if (width * height > MAX_PIXELS)
    return refuse(`the image is too large (${width}x${height}); the limit is ${MAX_PIXELS.toLocaleString("en")} pixels`);
  const canvas = new OffscreenCanvas(width, height), context = canvas.getContext("2d");
  context.drawImage(bitmap, 0, 0);
  bitmap.close();
  return source.photo(context.getImageData(0, 0, width, height).data, width, height);
}

const shown = (element) => new Promise((resolve) => {
  // Once ``element`` is on screen (its tab opened).
  const seen = new IntersectionObserver(([entry]) => entry.isIntersecting && (seen.disconnect(), resolve()));
  seen.observe(element);
});

export async function usePhotoModel(element, prefix, server) {
  // The app's photo tab: the tab's source (``element`` names its model in data-page-model, page_model.py; ``server``:
  // the component's server functions, whose ``forward`` runs the model where the page can't), loaded when the tab
  // opens, then the example it starts with, then each photo the upload shows (live.readPhoto, which the upload's
  // change event calls with the file's address).
  const described = element.querySelector("[data-page-model]")?.dataset.pageModel;
  if (!described) return; // no model: the prediction view says why
  const forced = new URLSearchParams(window.location.search).get("model") === "server";
  const { model } = JSON.parse(described);
  const source = tabSource(prefix, model, document.baseURI, { server: server?.forward ?? null, forced });
  const live = tabStore(prefix);
  let latest = null, asked = false; // the address read last: an earlier photo's answer is not shown over a later one
  const ready = shown(document.getElementById(`${prefix}-input`)) // the photo model loads when its tab opens
    .then(() => source.ready())
    .then(() => {
      answerFrom(prefix, source);
      element.dataset.model = source.inPage ? "page" : "server"; // for tests and scripts: where photos are read
    });
  live.readPhoto = async (address) => {
    latest = address;
    asked = true;
    if (address) setWaiting(live, true); // the views dim until its numbers are in
    let answer = "";
    try {
      await ready;
      if (address) answer = await readPhoto(source, await (await fetch(address)).blob(), model.texts.unreadable);
    } catch (error) {
      answer = { message: model.texts.unreadable.replace("{why}", `the page could not read it (${error.message})`) };
    }
    if (latest === address) live.receive?.(answer);
  };
  await ready;
  if (!asked && model.example) {
    const numbers = await source.example();
    if (!asked) live.receive?.(numbers); // (unless a photo came first)
  }
}
