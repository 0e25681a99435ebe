// The receiving side of herald's webpush destination, in third-party
// code: http_ece decrypts what herald sent (aes128gcm, RFC 8291). Driven
// by destination/webpush/node_test.go, which captures herald's request
// bodies at a test push service.
//
// Input (stdin): {"privateKey": <base64url P-256 scalar>, "authSecret":
// <base64url>, "bodies": [<base64url request body>, ...]}.
// Output (stdout): {"plaintexts": [<base64url>, ...]}; exits non-zero when
// a body does not decrypt.
"use strict";
const crypto = require("crypto");
const ece = require("http_ece");

let input = "";
process.stdin.on("data", (c) => (input += c));
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const ua = crypto.createECDH("prime256v1");
  ua.setPrivateKey(Buffer.from(req.privateKey, "base64url"));
  const authSecret = Buffer.from(req.authSecret, "base64url");
  const plaintexts = req.bodies.map((b, i) => {
    try {
      return ece.decrypt(Buffer.from(b, "base64url"), { version: "aes128gcm", privateKey: ua, authSecret }).toString("base64url");
    } catch (e) {
      console.error("FAIL body " + i + ": " + e.message);
      process.exit(1);
    }
  });
  console.log(JSON.stringify({ plaintexts }));
});
