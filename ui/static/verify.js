// The "Verify signatures" panel of a subscription's page (dashboard and
// portal): how a receiver checks herald's Standard Webhooks signature with
// the official library of its language. The secret appears only as the
// name of an environment variable (SECRET_ENV), never its value.

import { h, replace, copyButton } from './lib.js';

// SECRET_ENV is the environment variable the snippets read the secret from.
export const SECRET_ENV = 'HERALD_WEBHOOK_SECRET';

// WHERE says where a broker destination carries the three signature
// headers; the payload is the message body in every case.
const WHERE = {
  amqp: 'the AMQP message\'s headers',
  nats: 'the NATS message\'s headers',
  redis: 'the stream entry\'s fields (the payload is its "body" field)',
  mqtt: 'the MQTT 5 message\'s user properties',
};

// SNIPPETS per language: install command, then the code of an HTTP
// receiver (http) and of a broker consumer given body and the three
// header values (message). API names are the libraries' README examples.
const SNIPPETS = [
  {
    id: 'go', label: 'Go', install: 'go get github.com/standard-webhooks/standard-webhooks/libraries/go',
    http: `import (
	"io"
	"log"
	"net/http"
	"os"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

var wh *standardwebhooks.Webhook

func main() {
	// An empty secret would make a key anyone can sign with: refuse it.
	secret := os.Getenv("${SECRET_ENV}")
	if secret == "" {
		log.Fatal("${SECRET_ENV} is not set")
	}
	var err error
	if wh, err = standardwebhooks.NewWebhook(secret); err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/webhooks", handle)
	log.Fatal(http.ListenAndServe(":3000", nil))
}

func handle(w http.ResponseWriter, r *http.Request) {
	payload, err := io.ReadAll(r.Body) // the raw body, before any JSON decoding
	if err != nil || wh.Verify(payload, r.Header) != nil {
		http.Error(w, "invalid signature", http.StatusBadRequest)
		return
	}
	// payload is authentic: decode and handle it, then answer 2xx.
	w.WriteHeader(http.StatusNoContent)
}`,
    message: `secret := os.Getenv("${SECRET_ENV}") // never empty: anyone can sign with an empty key
wh, err := standardwebhooks.NewWebhook(secret)
if secret == "" || err != nil {
	log.Fatal("${SECRET_ENV}: not set or not a whsec_ secret")
}
// id, ts, sig: the message's webhook-id, webhook-timestamp, webhook-signature.
headers := http.Header{}
headers.Set("webhook-id", id)
headers.Set("webhook-timestamp", ts)
headers.Set("webhook-signature", sig)
if err := wh.Verify(body, headers); err != nil {
	// not from herald (or older than 5 minutes): drop it
}`,
  },
  {
    id: 'node', label: 'Node', install: 'npm install standardwebhooks',
    http: `import express from "express";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.${SECRET_ENV});
const app = express();

// express.raw keeps the body as sent: the signature covers its bytes.
app.post("/webhooks", express.raw({ type: "*/*" }), (req, res) => {
  let event;
  try {
    event = wh.verify(req.body, req.headers); // the parsed JSON payload
  } catch (err) {
    return res.status(400).send("invalid signature");
  }
  res.sendStatus(204);
});`,
    message: `import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.${SECRET_ENV});
// body: the message body (string or Buffer); id, ts, sig from the message.
const event = wh.verify(body, {
  "webhook-id": id,
  "webhook-timestamp": ts,
  "webhook-signature": sig,
}); // throws WebhookVerificationError when it is not from herald`,
  },
  {
    id: 'python', label: 'Python', install: 'pip install standardwebhooks',
    http: `import os
from flask import Flask, request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

wh = Webhook(os.environ["${SECRET_ENV}"])
app = Flask(__name__)

@app.post("/webhooks")
def webhooks():
    try:
        event = wh.verify(request.get_data(), request.headers)
    except WebhookVerificationError:
        return "invalid signature", 400
    return "", 204`,
    message: `import os
from standardwebhooks.webhooks import Webhook

wh = Webhook(os.environ["${SECRET_ENV}"])
# body: the message body; id, ts, sig from the message.
event = wh.verify(body, {
    "webhook-id": id,
    "webhook-timestamp": ts,
    "webhook-signature": sig,
})  # raises WebhookVerificationError when it is not from herald`,
  },
  {
    id: 'ruby', label: 'Ruby', install: 'gem install standardwebhooks',
    http: `require "standardwebhooks"

# Rails: request.headers["webhook-id"] reads the HTTP header.
class WebhooksController < ApplicationController
  skip_forgery_protection

  def create
    secret = ENV.fetch("${SECRET_ENV}") # KeyError when unset
    raise "${SECRET_ENV} is empty" if secret.empty? # anyone could sign with an empty key
    wh = StandardWebhooks::Webhook.new(secret)
    event = wh.verify(request.raw_post, request.headers)
    head :no_content
  rescue StandardWebhooks::WebhookVerificationError
    head :bad_request
  end
end`,
    message: `require "standardwebhooks"

secret = ENV.fetch("${SECRET_ENV}")
raise "${SECRET_ENV} is empty" if secret.empty? # anyone could sign with an empty key
wh = StandardWebhooks::Webhook.new(secret)
# body: the message body; id, ts, sig from the message.
event = wh.verify(body, {
  "webhook-id" => id,
  "webhook-timestamp" => ts,
  "webhook-signature" => sig,
}) # raises StandardWebhooks::WebhookVerificationError when it is not from herald`,
  },
  {
    id: 'php', label: 'PHP', install: 'composer require standard-webhooks/standard-webhooks',
    http: `<?php
require __DIR__ . '/vendor/autoload.php';

$secret = getenv('${SECRET_ENV}');
if (!$secret) { // an empty key would accept anyone's signature
    http_response_code(500);
    exit('${SECRET_ENV} is not set');
}
$wh = new \\StandardWebhooks\\Webhook($secret);
$payload = file_get_contents('php://input');
// The library looks the headers up by their lower-case names.
$headers = array_change_key_case(getallheaders(), CASE_LOWER);
try {
    $event = $wh->verify($payload, $headers);
} catch (\\StandardWebhooks\\Exception\\WebhookVerificationException $e) {
    http_response_code(400);
    exit('invalid signature');
}
http_response_code(204);`,
    message: `<?php
$secret = getenv('${SECRET_ENV}');
if (!$secret) {
    exit('${SECRET_ENV} is not set'); // an empty key would accept anyone's signature
}
$wh = new \\StandardWebhooks\\Webhook($secret);
// $body: the message body; $id, $ts, $sig from the message.
$event = $wh->verify($body, [
    'webhook-id' => $id,
    'webhook-timestamp' => $ts,
    'webhook-signature' => $sig,
]); // throws WebhookVerificationException when it is not from herald`,
  },
];

// verifyPanel returns the panel for subscription s, or null for Web Push
// (a push message is encrypted for one browser, not signed).
export function verifyPanel(s) {
  const type = (s.destination && s.destination.type) || 'webhook';
  if (type === 'webpush') return null;
  // A listen subscription's receiver gets the webhook's HTTP request
  // (herald listen forwards it as it is).
  const broker = type !== 'webhook' && type !== 'listen';
  const code = h('code', {});
  const pre = h('pre', { class: 'snippet', 'data-snippet': '' }, code);
  const install = h('code', { 'data-install': '' });
  const copySlot = h('span');
  const tabs = h('div', { class: 'segmented tabs', role: 'tablist', 'aria-label': 'Language' });
  let current = SNIPPETS[0].id;
  const show = () => {
    const sn = SNIPPETS.find((x) => x.id === current);
    const text = broker ? sn.message : sn.http;
    code.textContent = text;
    install.textContent = sn.install;
    pre.dataset.lang = sn.id;
    replace(copySlot, copyButton(text));
    replace(tabs, SNIPPETS.map((x) => h('button', {
      type: 'button', role: 'tab', class: x.id === current ? 'on' : '', 'aria-selected': String(x.id === current), 'data-lang': x.id,
      onclick: () => { current = x.id; show(); },
    }, x.label)));
  };
  show();
  return h('section', { class: 'panel verify', 'data-verify': type },
    h('h2', {}, 'Verify signatures'),
    h('p', { class: 'small' },
      broker
        ? ['herald signs each message as it signs a webhook (Standard Webhooks): ', h('code', {}, 'webhook-id'), ', ', h('code', {}, 'webhook-timestamp'), ' and ', h('code', {}, 'webhook-signature'), ' are ' + WHERE[type] + '; the signed payload is the message body.']
        : ['herald signs every request with Standard Webhooks (', h('code', {}, 'webhook-id'), ', ', h('code', {}, 'webhook-timestamp'), ', ', h('code', {}, 'webhook-signature'), '). Verify the raw body before parsing it.'],
      ' Keep the signing secret in the ', h('code', {}, SECRET_ENV), ' environment variable ("Reveal secret" above); during a rotation the request carries both signatures, so either secret verifies.'),
    h('div', { class: 'snippet-head' }, tabs, h('span', { class: 'muted small' }, 'Install: ', install), copySlot),
    pre);
}
