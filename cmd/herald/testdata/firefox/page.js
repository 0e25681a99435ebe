// Registers the service worker, subscribes with the test's VAPID key and
// reports the subscription to the test server. subscribe() returns the
// subscription a restarted browser still has for this scope.
//
// Each push manager call is retried after 3 s: Firefox starts its push
// service lazily on the first call, and a request that arrives while the
// service is starting can go unanswered.
function retrying(fn) {
  return (async () => {
    for (let i = 0; i < 20; i++) {
      const r = await Promise.race([fn(), new Promise((res) => setTimeout(() => res(null), 3000))]);
      if (r) return r;
    }
    throw new Error("push manager did not answer");
  })();
}

async function main() {
  const reg = await navigator.serviceWorker.register("/sw.js");
  await navigator.serviceWorker.ready;
  const key = await (await fetch("/vapid")).text();
  const sub = await retrying(() => reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }));
  await fetch("/subscription", { method: "POST", body: JSON.stringify(sub.toJSON()) });
}
main().catch((e) => fetch("/log", { method: "POST", body: String((e && e.stack) || e) }));
