// A user agent and an application server, both real third-party code,
// against herald: `ws` speaks the autopush protocol (hello, register with
// an applicationServerKey, ack), the npm `web-push` library encrypts
// (aes128gcm) and signs (VAPID) a message, and `http_ece` decrypts what
// the user agent receives. Prints "OK <bytes>" when the plaintext came
// through byte for byte; exits non-zero otherwise.
//
// Usage: node send-and-receive.js ws://127.0.0.1:PORT/
"use strict";
const crypto = require("crypto");
const WebSocket = require("ws");
const webpush = require("web-push");
const ece = require("http_ece");

const wsURL = process.argv[2];
if (!wsURL) {
  console.error("usage: node send-and-receive.js ws://host:port/");
  process.exit(2);
}
const timer = setTimeout(() => fail("timed out"), 30000);
function fail(msg) {
  console.error("FAIL " + msg);
  process.exit(1);
}

const vapid = webpush.generateVAPIDKeys();
const ua = crypto.createECDH("prime256v1");
ua.generateKeys();
const authSecret = crypto.randomBytes(16);
// Every byte value, and multi-byte text.
const plaintext = Buffer.concat([Buffer.from("herald ✓ web-push "), Buffer.from([...Array(256).keys()])]);
const channelID = crypto.randomUUID();

const ws = new WebSocket(wsURL, "push-notification");
ws.on("error", (e) => fail("websocket: " + e.message));
ws.on("open", () => ws.send(JSON.stringify({ messageType: "hello", use_webpush: true })));
ws.on("message", async (raw) => {
  const msg = JSON.parse(raw.toString());
  switch (msg.messageType) {
    case "hello":
      ws.send(JSON.stringify({ messageType: "register", channelID, key: vapid.publicKey }));
      break;
    case "register": {
      if (msg.status !== 200) fail("register status " + msg.status);
      const subscription = {
        endpoint: msg.pushEndpoint,
        keys: { p256dh: ua.getPublicKey("base64url"), auth: authSecret.toString("base64url") },
      };
      // sendNotification only speaks https: build the request and send it.
      const req = webpush.generateRequestDetails(subscription, plaintext, {
        vapidDetails: { subject: "mailto:ops@example.test", publicKey: vapid.publicKey, privateKey: vapid.privateKey },
        TTL: 60,
        contentEncoding: "aes128gcm",
      });
      const resp = await fetch(req.endpoint, { method: req.method, headers: req.headers, body: req.body });
      if (resp.status !== 201) fail("send answered " + resp.status + " " + (await resp.text()));
      if (!resp.headers.get("location")) fail("no Location");
      break;
    }
    case "notification": {
      const body = Buffer.from(msg.data, "base64url");
      const got = ece.decrypt(body, { version: "aes128gcm", privateKey: ua, authSecret });
      ws.send(JSON.stringify({ messageType: "ack", updates: [{ channelID: msg.channelID, version: msg.version, code: 100 }] }));
      if (!got.equals(plaintext)) fail("plaintext differs");
      if (msg.headers.encoding !== "aes128gcm") fail("encoding " + msg.headers.encoding);
      clearTimeout(timer);
      console.log("OK " + got.length);
      ws.close();
      break;
    }
  }
});
