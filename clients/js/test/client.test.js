// The JS client against a real stateward server. tests/client/test_js_client.py starts
// the server and runs `node --test` here with STATEWARD_URL and STATEWARD_KEY_FILE set.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import WebSocket from "ws";

import { Key, StatewardClient, StatewardError, canonicalBytes, envelope, nonce } from "../src/index.js";

const URL = process.env.STATEWARD_URL;
const KEY_FILE = process.env.STATEWARD_KEY_FILE;
const skip = URL && KEY_FILE ? false : "STATEWARD_URL / STATEWARD_KEY_FILE not set (no server)";

const NOTES = {
  $version: "2.0",
  $path: "js/desk/notes",
  initial: "open",
  states: { open: { label: "Open" }, done: { label: "Done", terminal: true } },
  actions: {
    note: { label: "Note", from: "open", mutate: { $append: { notes: "input.text" } } },
    finish: { label: "Finish", from: "open", to: "done" },
  },
};

async function client(options = {}) {
  const key = await Key.fromJSON(JSON.parse(readFileSync(KEY_FILE, "utf8")));
  return new StatewardClient(URL, { key, WebSocket, ...options });
}

async function deployed(sw) {
  try {
    await sw.query("mutation($d: JSON!) { addWorkflow(definition: $d) { path } }", { d: NOTES });
  } catch (error) {
    if (!(error instanceof StatewardError) || !/exist/i.test(error.message)) throw error;
  }
}

test("canonical bytes follow RFC 8785", () => {
  const text = new TextDecoder().decode(canonicalBytes({ b: 1, a: [1.0, "é", null, 1e21] }));
  assert.equal(text, '{"a":[1,"é",null,1e+21],"b":1}');
});

test("nonces begin with the time in milliseconds and end with 16 random bytes", () => {
  const bytes = (text) => Buffer.from(text, "base64url");
  const at = 1796616069123;
  const made = bytes(nonce(at));
  assert.equal(made.length, 22);
  assert.equal(made.readUIntBE(0, 6), at);
  assert.notDeepEqual(bytes(nonce(at)).subarray(6), made.subarray(6));
  const before = Date.now();
  const fresh = bytes(envelope("net", "p", "tick", "a/b", {}, "actor").nonce);
  assert.ok(fresh.readUIntBE(0, 6) >= before && fresh.readUIntBE(0, 6) <= Date.now());
});

test("signs envelopes locally with WebCrypto Ed25519 and submits them", { skip }, async () => {
  const sw = await client();
  await deployed(sw);
  const started = await sw.start("js/desk/notes", { who: "node" });
  assert.equal(started.state.key, "open");
  assert.equal(started.event.signer, sw.key.public);
  const signed = await sw.sign(started.instanceId, "note", "js/desk/notes", { text: "hi" });
  const first = await sw.submitEvent(signed);
  assert.deepEqual(first.instance.data.notes, ["hi"]);
  const again = await sw.submitEvent(signed);
  assert.equal(again.duplicate, true);
  const forged = { ...signed, event: { ...signed.event, nonce: "A".repeat(22) } };
  await assert.rejects(sw.submitEvent(forged), (error) => error.code === "BAD_SIGNATURE");
});

test("a subscription resumes after a dropped connection without gap or duplicate", { skip }, async () => {
  const sockets = [];
  class TrackedWebSocket extends WebSocket {
    constructor(...args) {
      super(...args);
      sockets.push(this);
    }
  }
  const sw = await client({ WebSocket: TrackedWebSocket });
  await deployed(sw);
  const started = await sw.start("js/desk/notes");
  const id = started.instanceId;
  const seen = [];
  const statuses = [];
  const stream = sw.subscribe(
    { instance: id },
    { after: "0", onStatus: (status) => statuses.push(status) },
  );
  const iterator = stream[Symbol.asyncIterator]();
  const next = async () => (await iterator.next()).value;
  seen.push(await next()); // workflow.started
  await sw.act(id, "note", { text: "one" });
  seen.push(await next());
  sockets.at(-1).terminate(); // the connection drops
  await sw.act(id, "note", { text: "two" });
  await sw.act(id, "finish");
  while (!seen.some((e) => e.type === "workflow.completed")) seen.push(await next());
  await iterator.return();
  assert.ok(statuses.includes("reconnecting"), "it did reconnect");
  assert.ok(sockets.length >= 2, "on a new connection");
  const cursors = seen.map((e) => e.cursor);
  assert.deepEqual(cursors, [...new Set(cursors)].sort((a, b) => a - b), "in order, each once");
  const replay = [];
  for await (const event of sw.subscribe({ instance: id }, { after: "0" })) {
    replay.push(event.cursor);
    if (event.type === "workflow.completed") break;
  }
  assert.deepEqual(cursors, replay, "exactly what the outbox holds");
});
