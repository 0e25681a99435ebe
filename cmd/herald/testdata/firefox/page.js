// Registers the service worker, subscribes with the test's VAPID key
// (reusing the subscription a restarted browser still has) and reports the
// subscription to the test server.
async function main() {
  const reg = await navigator.serviceWorker.register("/sw.js");
  await navigator.serviceWorker.ready;
  const key = await (await fetch("/vapid")).text();
  let sub = await reg.pushManager.getSubscription();
  if (!sub) {
    sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  }
  await fetch("/subscription", { method: "POST", body: JSON.stringify(sub.toJSON()) });
}
main().catch((e) => fetch("/log", { method: "POST", body: String(e && e.stack || e) }));
