"""A client that holds its own key: log in with a challenge, then sign an event itself.

Usage: python signed_client.py KEY_FILE WORKFLOW [URL]

1. `authChallenge` + `authLogin`: sign the challenge with the key, get a session token.
2. Build an event envelope (here: `$start` of WORKFLOW), sign its RFC 8785 canonical bytes
   with Ed25519, and send it with `submitEvent`. The server checks the signature against
   the actor's own key: it does not sign on the client's behalf.

Needs `httpx`, `pynacl` and `rfc8785` (all three come with stateward).
"""

import base64
import json
import secrets
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import rfc8785
from nacl.signing import SigningKey


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Client:
    def __init__(self, url: str, key_file: str) -> None:
        key = json.loads(Path(key_file).read_text(encoding="utf-8"))
        self.url = url
        self.public = key["public"]
        self.signing_key = SigningKey(b64url_decode(key["secret"]))
        self.token: str | None = None

    def gql(self, query: str, **variables: object) -> dict:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        body = {"query": query, "variables": variables}
        answer = httpx.post(self.url, json=body, headers=headers, timeout=10).json()
        if answer.get("errors"):
            raise SystemExit(json.dumps(answer["errors"]))
        return answer["data"]

    def login(self) -> None:
        challenge = self.gql(
            "mutation($k: String!) { authChallenge(publicKey: $k) { challenge } }", k=self.public
        )["authChallenge"]["challenge"]
        signature = b64url(self.signing_key.sign(challenge.encode("utf-8")).signature)
        session = self.gql(
            """mutation($k: String!, $c: String!, $s: String!) {
                 authLogin(publicKey: $k, challenge: $c, signature: $s) { token expiresAt }
               }""",
            k=self.public,
            c=challenge,
            s=signature,
        )["authLogin"]
        self.token = session["token"]

    def submit(self, process: str, action: str, workflow: str, input: dict) -> dict:
        net = self.gql("{ net }")["net"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        envelope = {
            "v": 1,
            "net": net,  # this deployment's id: a signature is worthless on another one
            "process": process,
            "action": {"name": action, "workflow": workflow, "input": input},
            "actor": self.public,
            "ts": now,  # must be within 300 s of the server's clock
            "nonce": b64url(secrets.token_bytes(16)),  # never reuse one (REPLAYED)
        }
        signature = b64url(self.signing_key.sign(rfc8785.dumps(envelope)).signature)
        return self.gql(
            """mutation($e: JSON!, $s: String!, $k: String!) {
                 submitEvent(event: $e, signature: $s, signer: $k) {
                   duplicate event { seq action actor signer } instance { state { key } }
                 }
               }""",
            e=envelope,
            s=signature,
            k=self.public,
        )["submitEvent"]


if __name__ == "__main__":
    key_file, workflow = sys.argv[1], sys.argv[2]
    url = sys.argv[3] if len(sys.argv) > 3 else "http://127.0.0.1:8765/graphql"
    client = Client(url, key_file)
    client.login()
    print("logged in as", client.gql("{ viewer { id } }")["viewer"]["id"] == client.public)
    result = client.submit(str(uuid.uuid4()), "$start", workflow, {"data": {"source": "signed"}})
    event = result["event"]
    print(
        "event",
        event["seq"],
        event["action"],
        "signed by the actor:",
        event["signer"] == event["actor"],
    )
    print("state", result["instance"]["state"]["key"])
