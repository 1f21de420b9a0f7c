// stateward example client: signs event envelopes and subscribes with resume.
//
// Works in Node 20+ and in browsers: Ed25519 through WebCrypto (`crypto.subtle`), RFC 8785
// canonical JSON through the `canonicalize` package, GraphQL over WebSocket through
// `graphql-ws` (graphql-transport-ws). The stateward dashboard loads this very file.
//
//   const key = await Key.fromJSON(JSON.parse(fs.readFileSync("operator.json", "utf8")));
//   const sw = new StatewardClient("http://127.0.0.1:8000/graphql", { key });
//   const started = await sw.start("customer/retail/retail-customer", { source: "js" });
//   await sw.act(started.instanceId, "add_note", { note: "hello" });
//   for await (const event of sw.subscribe({ instance: started.instanceId }, { after: "0" })) { … }

import canonicalize from "canonicalize";
import { createClient } from "graphql-ws";

const RESULT = `duplicate event { seq action actor signer }
  instance { instanceId workflowPath status seq data state { key } }`;
const SUBMIT = `mutation($e: JSON!, $s: String!, $k: String!) {
  submitEvent(event: $e, signature: $s, signer: $k) { ${RESULT} } }`;
export const EVENTS = `subscription($f: EventFilter, $a: String) { events(filter: $f, after: $a) {
  id cursor type at namespace workflow version instanceId actor action fromState toState
  assignmentId team details } }`;
/** Error codes after which a subscription resumes instead of failing. */
const RESUMABLE = new Set(["SLOW_CONSUMER", "BUS_STOPPED", "UNAVAILABLE"]);

/** A refusal by the server: `code` is the stable `extensions.code`. */
export class StatewardError extends Error {
  constructor(code, message, extensions = {}) {
    super(`${code}: ${message}`);
    this.code = code;
    this.extensions = extensions;
  }
}

function fromErrors(errors) {
  const first = Array.isArray(errors) ? errors[0] : errors;
  const extensions = (first && first.extensions) || {};
  return new StatewardError(extensions.code || "ERROR", (first && first.message) || "", extensions);
}

/** Unpadded base64url of bytes. */
export function b64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** RFC 8785 (JCS) canonical UTF-8 bytes of a JSON value. */
export function canonicalBytes(value) {
  return new TextEncoder().encode(canonicalize(value));
}

/** An Ed25519 key held as a non-extractable WebCrypto key. */
export class Key {
  constructor(publicKey, cryptoKey) {
    this.public = publicKey;
    this.cryptoKey = cryptoKey;
  }

  /** From a `stateward keygen` key file: `{"public": <b64url>, "secret": <b64url seed>}`. */
  static async fromJSON({ public: pub, secret }) {
    const jwk = { kty: "OKP", crv: "Ed25519", x: pub, d: secret };
    const cryptoKey = await crypto.subtle.importKey("jwk", jwk, { name: "Ed25519" }, false, [
      "sign",
    ]);
    return new Key(pub, cryptoKey);
  }

  /** A fresh random key (the secret seed is returned once, for saving). */
  static async generate() {
    const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
    const jwk = await crypto.subtle.exportKey("jwk", pair.privateKey);
    return { key: new Key(jwk.x, pair.privateKey), file: { public: jwk.x, secret: jwk.d } };
  }

  /** base64url Ed25519 signature of `bytes`. */
  async sign(bytes) {
    const signature = await crypto.subtle.sign({ name: "Ed25519" }, this.cryptoKey, bytes);
    return b64url(new Uint8Array(signature));
  }
}

/** RFC 3339 UTC with milliseconds and `Z` (the envelope `ts`). */
export function timestamp(date = new Date()) {
  return date.toISOString();
}

/**
 * A fresh nonce: the time in milliseconds (6 bytes, big-endian) then 16 random bytes,
 * unpadded base64url. The time keeps the server log's (actor, nonce) index writing a few
 * pages, not one random page per event.
 */
export function nonce(now = Date.now()) {
  const bytes = new Uint8Array(22);
  let millis = Math.floor(now);
  for (let i = 5; i >= 0; i -= 1) {
    bytes[i] = millis % 256;
    millis = Math.floor(millis / 256);
  }
  bytes.set(crypto.getRandomValues(new Uint8Array(16)), 6);
  return b64url(bytes);
}

/** A new envelope (DESIGN §6) with the current time and a fresh nonce (`nonce`). */
export function envelope(net, process, action, workflow, input, actor) {
  return {
    v: 1,
    net,
    process,
    action: { name: action, workflow, input: input || {} },
    actor,
    ts: timestamp(),
    nonce: nonce(),
  };
}

/** `{event, signer, signature}` for `submitEvent`. */
export async function signEnvelope(value, key) {
  return { event: value, signer: key.public, signature: await key.sign(canonicalBytes(value)) };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One stateward deployment seen from one key or one bearer token. */
export class StatewardClient {
  /**
   * @param {string} url the GraphQL endpoint, `http://host:port/graphql`
   * @param {{key?: Key, token?: string, WebSocket?: any, fetch?: any}} options
   *   `key` signs (and logs in), `token` is a bearer token (an API token or a session);
   *   `WebSocket` is needed on Node 20 (pass the `ws` package's default export).
   */
  constructor(url, { key = null, token = null, WebSocket = globalThis.WebSocket, fetch } = {}) {
    this.url = url;
    this.key = key;
    this.token = token;
    this.WebSocket = WebSocket;
    this.fetch = fetch || globalThis.fetch.bind(globalThis);
    this.workflows = new Map();
    this.netId = null;
  }

  async post(query, variables, token) {
    const headers = { "Content-Type": "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await this.fetch(this.url, {
      method: "POST",
      headers,
      body: JSON.stringify({ query, variables: variables || {} }),
    });
    const body = await response.json();
    if (body.errors && body.errors.length) throw fromErrors(body.errors);
    return body.data;
  }

  /** `data` of a GraphQL operation (throws StatewardError for the first error). */
  async query(query, variables = {}) {
    return this.post(query, variables, await this.bearer());
  }

  /** The deployment id every envelope names (read once). */
  async net() {
    if (!this.netId) this.netId = (await this.post("{ net }", {})).net;
    return this.netId;
  }

  /** A session token for the key (challenge–response); kept for later calls. */
  async login() {
    const key = this.requireKey();
    const { authChallenge } = await this.post(
      "mutation($k: String!) { authChallenge(publicKey: $k) { challenge } }",
      { k: key.public },
    );
    const signature = await key.sign(new TextEncoder().encode(authChallenge.challenge));
    const { authLogin } = await this.post(
      "mutation($k: String!, $c: String!, $s: String!) { authLogin(publicKey: $k, challenge: $c, signature: $s) { token } }",
      { k: key.public, c: authChallenge.challenge, s: signature },
    );
    this.token = authLogin.token;
    return this.token;
  }

  async bearer() {
    if (!this.token && this.key) await this.login();
    return this.token;
  }

  requireKey() {
    if (!this.key) throw new StatewardError("NO_KEY", "this client has no key to sign with");
    return this.key;
  }

  /** A signed envelope for `submitEvent`. */
  async sign(process, action, workflow, input = {}) {
    const key = this.requireKey();
    return signEnvelope(envelope(await this.net(), process, action, workflow, input, key.public), key);
  }

  /** Submit a signed envelope; the same envelope again answers `duplicate: true`. */
  async submitEvent(signed) {
    const data = await this.query(SUBMIT, {
      e: signed.event,
      s: signed.signature,
      k: signed.signer,
    });
    const result = data.submitEvent;
    this.workflows.set(result.instance.instanceId, result.instance.workflowPath);
    return result;
  }

  /** Start an instance of `workflow` with `data` (the client picks the UUID). */
  async start(workflow, data = {}, instanceId = crypto.randomUUID()) {
    const result = await this.submitEvent(await this.sign(instanceId, "$start", workflow, { data }));
    return { ...result.instance, duplicate: result.duplicate, event: result.event };
  }

  /** Perform a business action (or a `$kernel` operation) on an instance. */
  async act(instance, action, input = {}) {
    if (!this.workflows.has(instance)) {
      const data = await this.query("query($i: ID!) { instance(id: $i) { workflowPath } }", {
        i: instance,
      });
      this.workflows.set(instance, data.instance.workflowPath);
    }
    const result = await this.submitEvent(
      await this.sign(instance, action, this.workflows.get(instance), input),
    );
    return { ...result.instance, duplicate: result.duplicate, event: result.event };
  }

  /** Claim an assignment of `instance` (`$claim`). */
  async claim(instance, assignment) {
    return this.act(instance, "$claim", { assignment });
  }

  /** Complete a claimed assignment with a review and an action (`$complete`). */
  async complete(instance, assignment, reviewData = null, action = null) {
    const input = { assignment };
    if (reviewData !== null) input.reviewData = reviewData;
    if (action !== null) input.action = action;
    return this.act(instance, "$complete", input);
  }

  /**
   * Bus events matching `filter` as an async iterator. After a dropped connection, a
   * server restart or a SLOW_CONSUMER/BUS_STOPPED end it reconnects and resumes with
   * `after:` the last cursor it yielded: no gap, no duplicate. `after: "0"` replays the
   * outbox first; `onStatus` hears "connected" / "reconnecting".
   */
  async *subscribe(
    filter = null,
    { after = null, retryMs = 200, maxRetryMs = 2000, giveUpAfterMs = 120000, onStatus } = {},
  ) {
    let cursor = after === null ? null : String(after);
    let delay = retryMs;
    let failingSince = null;
    for (;;) {
      const token = await this.bearer();
      const client = createClient({
        url: this.url.replace(/^http/, "ws"),
        webSocketImpl: this.WebSocket,
        connectionParams: token ? { authorization: `Bearer ${token}` } : {},
        retryAttempts: 0,
        lazy: true,
        on: { connected: () => onStatus && onStatus("connected") },
      });
      const stream = client.iterate({ query: EVENTS, variables: { f: filter, a: cursor } });
      let failure = null;
      try {
        for await (const message of stream) {
          if (message.errors && message.errors.length) throw fromErrors(message.errors);
          const event = message.data.events;
          if (cursor !== null && Number(event.cursor) <= Number(cursor)) continue;
          cursor = String(event.cursor);
          delay = retryMs;
          failingSince = null;
          yield event;
        }
      } catch (error) {
        failure = error;
      } finally {
        await stream.return?.();
        await client.dispose();
      }
      if (failure) {
        if (Array.isArray(failure)) failure = fromErrors(failure);
        if (failure instanceof StatewardError) {
          if (!RESUMABLE.has(failure.code)) throw failure;
        } else if (failure && failure.code === 4403) {
          throw new StatewardError("UNAUTHENTICATED", failure.reason || "connection refused");
        }
        failingSince = failingSince ?? Date.now();
        if (Date.now() - failingSince > giveUpAfterMs) throw failure;
      }
      if (onStatus) onStatus("reconnecting");
      await sleep(delay);
      delay = Math.min(delay * 2, maxRetryMs);
    }
  }
}
