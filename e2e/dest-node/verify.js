// The official Standard Webhooks verifier (npm `standardwebhooks`) checks
// messages herald published to a broker: reads a JSON array of
// {secret, headers, body_base64} on stdin (driven by destination/desttest)
// and prints "OK <n>" when every message verifies, else the first failure
// and exits 1. A message whose "tamper" is true must NOT verify (its body
// was changed after signing), so a verifier that accepts anything fails.
"use strict";
const { Webhook } = require("standardwebhooks");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (c) => (input += c));
process.stdin.on("end", () => {
  const msgs = JSON.parse(input);
  let n = 0;
  for (const [i, m] of msgs.entries()) {
    const body = Buffer.from(m.body_base64, "base64").toString("utf8");
    let err = null;
    try {
      new Webhook(m.secret).verify(body, m.headers);
    } catch (e) {
      err = e;
    }
    if (m.tamper ? err === null : err !== null) {
      console.log(`FAIL message ${i}: ${m.tamper ? "a tampered body verified" : err}`);
      process.exit(1);
    }
    n++;
  }
  console.log(`OK ${n}`);
});
