// Reports every push message's plaintext (decrypted by Firefox) to the
// test server.
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
self.addEventListener("push", (e) => {
  const text = e.data ? e.data.text() : "";
  e.waitUntil(
    fetch("/got", { method: "POST", body: text })
      .then(() => self.registration.showNotification("herald", { body: text }))
      .catch(() => {}),
  );
});
