// The static page's service worker, at the site's root (vit_demo/deploy/static_space.py): a file the page asks for
// is answered from what this browser keeps (host.js keeps every file of the site once the page has answered its first
// image), else from the network. A kept file is refreshed from the network in the background, so a new version of
// the site shows from the next visit; with the network gone, the page reloads and runs from what is kept.
const KEPT = "vit-demo"; // the Cache Storage's name, which host.js fills

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("fetch", (event) => {
  const { request } = event;
  if (request.method !== "GET" || new URL(request.url).origin !== self.location.origin) return;
  event.respondWith((async () => {
    const cache = await caches.open(KEPT);
    const kept = await cache.match(request, { ignoreSearch: true });
    const fresh = fetch(request).then((answer) => {
      if (kept && answer.ok) cache.put(request, answer.clone());
      return answer;
    });
    if (!kept) return fresh;
    fresh.catch(() => {}); // offline: what is kept is the answer
    return kept;
  })());
});
