// The demo page: subscribe with herald's VAPID key, show the subscription
// and a herald push send command for it, list what the worker receives.
const $ = (id) => document.getElementById(id);

function setStatus(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

// A shell word: single quotes, an inner ' closed and escaped.
function quote(s) {
  return "'" + s.replaceAll("'", "'\\''") + "'";
}

function show(sub) {
  const json = sub.toJSON();
  $("details").hidden = false;
  $("subscribe").hidden = true;
  $("unsubscribe").hidden = false;
  $("endpoint").textContent = json.endpoint;
  $("subscription").textContent = JSON.stringify(json, null, 2);
  $("command").textContent =
    "herald push send " + quote(json.endpoint) + " \\\n" +
    "  --p256dh " + json.keys.p256dh + " \\\n" +
    "  --auth " + json.keys.auth + " \\\n" +
    "  --from-store --data 'hello from herald'";
  setStatus("Subscribed.");
}

function received(text, at) {
  $("none").hidden = true;
  const li = document.createElement("li");
  const time = document.createElement("time");
  time.textContent = new Date(at).toLocaleTimeString();
  const body = document.createElement("span");
  body.className = "message";
  body.textContent = text;
  li.append(time, body);
  $("received").prepend(li);
}

async function registration() {
  const reg = await navigator.serviceWorker.register("sw.js");
  await navigator.serviceWorker.ready;
  return reg;
}

async function vapidKey() {
  const resp = await fetch("/v1/webpush/vapid-public-key");
  if (!resp.ok) throw new Error("GET /v1/webpush/vapid-public-key answered " + resp.status);
  return (await resp.json()).public_key;
}

// A browser starting its push service lazily may leave the first
// subscribe unanswered: retry every 3 s, 20 times.
async function retrying(fn) {
  for (let i = 0; i < 20; i++) {
    const r = await Promise.race([fn(), new Promise((res) => setTimeout(() => res(null), 3000))]);
    if (r) return r;
  }
  throw new Error("the browser's push service did not answer");
}

async function subscribe() {
  // subscribe() asks for the notification permission itself (the
  // click is the user gesture browsers want for the prompt).
  setStatus("Registering the service worker…");
  const reg = await registration();
  setStatus("Reading herald's VAPID key…");
  const key = await vapidKey();
  setStatus("Subscribing…");
  const opts = { userVisibleOnly: true, applicationServerKey: key };
  let sub;
  try {
    sub = await retrying(() => reg.pushManager.subscribe(opts));
  } catch (e) {
    // A subscription made with another key (herald webpush rotate-vapid)
    // is refused: drop it and subscribe with the new one.
    if (!e || e.name !== "InvalidStateError") throw e;
    const old = await retrying(() => reg.pushManager.getSubscription());
    await old.unsubscribe();
    sub = await retrying(() => reg.pushManager.subscribe(opts));
  }
  show(sub);
}

async function unsubscribe() {
  const sub = await (await registration()).pushManager.getSubscription();
  if (sub) await sub.unsubscribe();
  $("details").hidden = true;
  $("subscribe").hidden = false;
  $("unsubscribe").hidden = true;
  setStatus("Not subscribed.");
}

function guarded(fn) {
  return () => fn().catch((e) => setStatus(String((e && e.message) || e), true));
}

async function main() {
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    setStatus("This browser has no Web Push here (it needs a secure context: https, localhost or 127.0.0.1).", true);
    $("subscribe").disabled = true;
    return;
  }
  navigator.serviceWorker.addEventListener("message", (e) => {
    if (e.data && e.data.type === "push") received(e.data.text, e.data.at);
  });
  $("subscribe").addEventListener("click", guarded(subscribe));
  $("unsubscribe").addEventListener("click", guarded(unsubscribe));
  // Show a subscription kept from an earlier visit; a push service still
  // starting may not answer (then Subscribe gets it).
  const reg = await navigator.serviceWorker.getRegistration("sw.js");
  const sub = reg && (await Promise.race([reg.pushManager.getSubscription(), new Promise((res) => setTimeout(() => res(null), 3000))]));
  if (sub && $("details").hidden) show(sub);
}
guarded(main)();
