"""Event envelopes: the exact JSON that is signed, its shape, identity and timestamps.

```json
{"v": 1, "net": "<deployment id>", "process": "<process id>",
 "action": {"name": "approve", "workflow": "<path>", "input": {}},
 "actor": "<key | system | visitor:<16 hex>>", "ts": "2026-11-30T02:21:09.123Z",
 "nonce": "<16..64 random bytes, b64url>"}
```
`from_json` checks the shape strictly (no unknown or missing keys, right types) and that
the whole value is canonicalizable, so NaN, ±Infinity, unsafe integers and the like are
refused before any signature is looked at. The identity of an envelope is the sha256 of
its RFC 8785 bytes — never of the signature. Signing and verification: `verification.py`.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import orjson

from stateward.domain.canonical import (
    MAX_JSON_DEPTH,
    MAX_SAFE_INTEGER,
    canonical_bytes,
    loads_strict,
    sha256_hex,
)
from stateward.domain.errors import INVALID_INPUT, DomainError
from stateward.domain.frozen import quick_init
from stateward.governance.keys import b64url_decode, b64url_encode, is_public_key

ENVELOPE_VERSION = 1
NONCE_BYTES = 16
#: Bytes of time before a new nonce's random ones (`new_nonce`): milliseconds since the
#: epoch fit 6 bytes until the year 10889.
NONCE_TIME_BYTES = 6
MAX_NONCE_BYTES = 64
SYSTEM_ACTOR = "system"
VISITOR_PREFIX = "visitor:"

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
_VISITOR = re.compile(r"^visitor:[0-9a-f]{16}$")
#: The worker of a delegated stage (issue 13), server-attested only:
#: `delegate:<task uuid>:<first 16 hex of sha256(callback token)>`.
DELEGATE_PREFIX = "delegate:"
_DELEGATE = re.compile(
    r"^delegate:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9a-f]{16}$"
)
#: ASCII digits only: `\d` alone also matches other scripts' digits (a full-width "２０２６"),
#: which `int` reads as the same number, a second spelling of the same instant.
#: Matched whole (`fullmatch`: `$` would also match before a final newline).
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z", re.ASCII)
_ENVELOPE_KEYS = frozenset({"v", "net", "process", "action", "actor", "ts", "nonce"})
_ACTION_KEYS = frozenset({"name", "workflow", "input"})

#: Characters outside the Basic Multilingual Plane (RFC 8785 sorts keys by UTF-16 units).
_BEYOND_BMP = re.compile("[\U00010000-\U0010ffff]")


class _NotFast(Exception):
    """Stored text that `Envelope.from_stored` hands to the full RFC 8785 check."""


def _not_fast(literal: str) -> float:
    raise _NotFast(literal)


def _safe_int(literal: str) -> int:
    value = int(literal)
    if abs(value) > MAX_SAFE_INTEGER:
        raise _NotFast(literal)
    return value


#: Built once (`json.loads`/`dumps` with options build a new one per call, which costs
#: as much as the parse of a small envelope): a float, NaN/Infinity or an unsafe integer
#: stops the fast parse.
_FAST_DECODER = json.JSONDecoder(
    parse_float=_not_fast, parse_int=_safe_int, parse_constant=_not_fast
)
_SORTED_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _bad(pointer: str, message: str) -> DomainError:
    return DomainError(INVALID_INPUT, f"envelope {pointer or '/'}: {message}", pointer=pointer)


def format_ts(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds, e.g. `2026-11-30T02:21:09.123Z` (naive = UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_ts(text: str) -> datetime:
    """Parse an envelope timestamp: `YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z`, UTC only.

    Offsets other than `Z`, lower-case `t`/`z` and leap seconds are refused with
    `DomainError(INVALID_INPUT)`: one spelling per instant keeps signed bytes unambiguous.
    """
    if not isinstance(text, str) or _TS.fullmatch(text) is None:
        raise DomainError(INVALID_INPUT, f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS.mmmZ")
    try:  # the form is checked: the C parser reads it (`Z` is UTC; no leap second)
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise DomainError(INVALID_INPUT, f"timestamp {text!r}: {exc}") from exc


def new_nonce() -> str:
    """A fresh nonce: the time in milliseconds (`NONCE_TIME_BYTES`, big-endian) then 16
    random bytes, b64url (30 characters). The random bytes make it unique; the time
    keeps the inserts of the log's unique (actor, nonce) index in a few of its pages:
    with fully random nonces each new event went into a random leaf page of the index,
    a page more for every event's commit to write as the log grows (docs/decisions.md,
    "Nonces begin with the time")."""
    millis = int(time.time() * 1000).to_bytes(NONCE_TIME_BYTES, "big")
    return b64url_encode(millis + os.urandom(NONCE_BYTES))


def is_valid_actor(actor: object) -> bool:
    """True for `system`, `visitor:<16 lower-case hex>`, `delegate:<task uuid>:<16 hex>`
    or an Ed25519 public key."""
    if actor == SYSTEM_ACTOR:
        return True
    if isinstance(actor, str) and actor.startswith(VISITOR_PREFIX):
        return _VISITOR.match(actor) is not None
    if isinstance(actor, str) and actor.startswith(DELEGATE_PREFIX):
        return _DELEGATE.match(actor) is not None
    return is_public_key(actor)


def _check_nonce(nonce: object) -> None:
    if not isinstance(nonce, str):
        raise _bad("/nonce", "must be a string")
    try:
        raw = b64url_decode(nonce)
    except DomainError as exc:
        raise _bad("/nonce", exc.message) from exc
    if not NONCE_BYTES <= len(raw) <= MAX_NONCE_BYTES:
        raise _bad("/nonce", f"must encode {NONCE_BYTES}..{MAX_NONCE_BYTES} bytes")


def _require_str(obj: dict[str, Any], key: str, pointer: str, *, max_len: int) -> str:
    value = obj[key]
    if not isinstance(value, str) or not value:
        raise _bad(pointer, "must be a non-empty string")
    if len(value) > max_len:
        raise _bad(pointer, f"longer than {max_len} characters")
    return value


def _require_keys(obj: object, expected: frozenset[str], pointer: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _bad(pointer, "must be an object")
    if obj.keys() == expected:
        return obj
    missing = sorted(expected - obj.keys())
    if missing:
        raise _bad(f"{pointer}/{missing[0]}", "is required")
    extra = sorted(k for k in obj if k not in expected)
    if extra:
        raise _bad(f"{pointer}/{extra[0]}", "is not an envelope field")
    return obj


@quick_init
@dataclass(frozen=True)
class EnvelopeAction:
    """The `action` part: the action name, the workflow path and the action's input."""

    name: str
    workflow: str
    input: dict[str, Any] = field(default_factory=dict)


@quick_init
@dataclass(frozen=True)
class Envelope:
    """What is signed: one request to change one process (DESIGN §6)."""

    net: str
    process: str
    action: EnvelopeAction
    actor: str
    ts: str
    nonce: str
    v: int = ENVELOPE_VERSION

    def to_json(self) -> dict[str, Any]:
        """The JSON object (exactly the signed fields)."""
        return {
            "v": self.v,
            "net": self.net,
            "process": self.process,
            "action": {
                "name": self.action.name,
                "workflow": self.action.workflow,
                "input": self.action.input,
            },
            "actor": self.actor,
            "ts": self.ts,
            "nonce": self.nonce,
        }

    @classmethod
    def from_fields(cls, fields: StoredFields, canonical: bytes) -> Envelope:
        """The envelope of fields `stored_fields` accepted, with its canonical bytes."""
        net, process, name, workflow, input, actor, ts, nonce = fields
        envelope = cls(net, process, EnvelopeAction(name, workflow, input), actor, ts, nonce)
        object.__setattr__(envelope, "_canonical", canonical)
        return envelope

    @classmethod
    def from_stored(cls, text: str) -> Envelope:
        """The envelope of stored (or exported) canonical text, checked as strictly as
        `from_json(loads_strict(text))`. Fast path for re-verifying a log: when the text
        is exactly what `json.dumps(sort_keys=True)` gives back — which is RFC 8785 when
        there are no floats, no unsafe integers, no NaN/Infinity and no characters beyond
        the BMP (key order and string escapes then agree) — the RFC 8785 serializer is not
        run again. `canonical()` is the text's bytes only when the text is canonical."""
        raw = text.encode("utf-8")
        fields = stored_fields(text, raw)
        if fields is not None:
            return cls.from_fields(fields, raw)
        if "\\u0000" in text:  # U+0000 is refused by the strict path (canonical_bytes)
            return cls.from_json(loads_strict(text))
        try:
            obj = _FAST_DECODER.decode(text)
        except (ValueError, _NotFast):
            obj = None
        if not isinstance(obj, dict) or _BEYOND_BMP.search(text) is not None:
            return cls.from_json(loads_strict(text))
        if _SORTED_ENCODER.encode(obj) != text:
            return cls.from_json(loads_strict(text))
        return cls.from_json(obj, canonical=text.encode("utf-8"))

    @classmethod
    def from_json(cls, obj: object, *, canonical: bytes | None = None) -> Envelope:
        """Validate the shape strictly; `DomainError(INVALID_INPUT)` with a pointer if wrong.

        `canonical`: the RFC 8785 bytes of `obj` when the caller already has them."""
        env = _require_keys(obj, _ENVELOPE_KEYS, "")
        if type(env["v"]) is not int or env["v"] != ENVELOPE_VERSION:
            raise _bad("/v", f"must be {ENVELOPE_VERSION}")
        net = _require_str(env, "net", "/net", max_len=200)
        process = _require_str(env, "process", "/process", max_len=200)
        for key, value in (("net", net), ("process", process)):
            if not _ID.match(value):
                raise _bad(f"/{key}", "must match [A-Za-z0-9][A-Za-z0-9._:-]*")
        act = _require_keys(env["action"], _ACTION_KEYS, "/action")
        name = _require_str(act, "name", "/action/name", max_len=200)
        workflow = _require_str(act, "workflow", "/action/workflow", max_len=400)
        if not isinstance(act["input"], dict):
            raise _bad("/action/input", "must be an object")
        actor = _require_str(env, "actor", "/actor", max_len=200)
        if not is_valid_actor(actor):
            raise _bad(
                "/actor",
                "must be an Ed25519 key (b64url), 'system', visitor:<16 hex> "
                "or delegate:<uuid>:<16 hex>",
            )
        ts = _require_str(env, "ts", "/ts", max_len=40)
        try:
            parse_ts(ts)
        except DomainError as exc:
            raise _bad("/ts", exc.message) from exc
        nonce = env["nonce"]
        if type(nonce) is not str or not _nonce_ok(nonce):
            _check_nonce(nonce)
        if canonical is None:
            canonical = canonical_bytes(env)  # NaN, ±Inf, unsafe ints... -> INVALID_INPUT
        envelope = cls(
            net=net,
            process=process,
            action=EnvelopeAction(name=name, workflow=workflow, input=act["input"]),
            actor=actor,
            ts=ts,
            nonce=nonce,
        )
        # Fix the signed bytes now: later edits of the input dict cannot change them.
        object.__setattr__(envelope, "_canonical", canonical)
        return envelope

    @cached_property
    def _canonical(self) -> bytes:
        return canonical_bytes(self.to_json())

    def canonical(self) -> bytes:
        """The RFC 8785 bytes: what the signature covers and the chain hashes."""
        return self._canonical

    def identity(self) -> str:
        """sha256 hex of the canonical bytes: same envelope, same identity (idempotency)."""
        return sha256_hex(self._canonical)

    @cached_property
    def timestamp(self) -> datetime:
        """`ts` as an aware UTC datetime (parsed once: the clock check and the event row
        both read it)."""
        return parse_ts(self.ts)


#: An envelope's fields `(net, process, name, workflow, input, actor, ts, nonce)`.
StoredFields = tuple[str, str, str, str, dict[str, Any], str, str, str]

_SORT_KEYS = orjson.OPT_SORT_KEYS


def _plain(value: dict[str, Any]) -> bool:
    """No float and no integer beyond ±(2^53 - 1) anywhere in `value`."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif kind is float:
            return False
    return True


_B64URL_TEXT = re.compile(r"[A-Za-z0-9_-]+")
#: Canonical last characters of unpadded base64url by length % 4 (unused bits zero).
_LAST = {2: frozenset("AQgw"), 3: frozenset("AEIMQUYcgkosw048")}


def _b64url_ok(text: str) -> bool:
    """`b64url_decode(text)` accepts it: unpadded base64url, unused bits zero."""
    size = len(text)
    if size % 4 == 1 or _B64URL_TEXT.fullmatch(text) is None:
        return False
    last = _LAST.get(size % 4)
    return last is None or text[-1] in last


def _nonce_ok(nonce: str) -> bool:
    """`_check_nonce` accepts it: canonical unpadded base64url of 16..64 bytes."""
    return 22 <= len(nonce) <= 86 and _b64url_ok(nonce)


#: `(net, process, name, workflow, actor)` strings that passed `from_json`'s checks of
#: them (pure checks of the strings alone; a log repeats them from event to event).
_GOOD_HEADS: set[tuple[str, str, str, str, str]] = set()


def _ts_ok(ts: str) -> bool:
    """`parse_ts` accepts it (the boolean form the plain-envelope check needs)."""
    try:
        parse_ts(ts)
    except DomainError:
        return False
    return True


def stored_fields(text: str, raw: bytes) -> StoredFields | None:
    """The fields of stored envelope text (`raw` = its UTF-8 bytes) when one cheap pass
    proves that `Envelope.from_stored(text)` accepts it, with these fields, and that the
    text is its RFC 8785 form (so `raw` is what was signed); None otherwise — then ask
    `from_stored`, whose verdict and message are the reference.

    The pass: no `\\u0000` escape, no character beyond the BMP and no deep nesting in
    the text; orjson parses it to an object whose sorted compact serialization is `raw`
    (for BMP-only strings, integers, booleans and null, orjson writes exactly RFC 8785:
    the same escapes, keys in code-point order = UTF-16 order); the input holds no float
    and no unsafe integer; and every shape check of `from_json` holds."""
    if (
        "\\u0000" in text
        or text.count("{") + text.count("[") > MAX_JSON_DEPTH
        or (not text.isascii() and max(text) > "\uffff")
    ):
        return None
    try:
        env = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(env) is not dict or env.keys() != _ENVELOPE_KEYS:
        return None
    act = env["action"]
    if type(act) is not dict or act.keys() != _ACTION_KEYS:
        return None
    net, process, actor, ts = env["net"], env["process"], env["actor"], env["ts"]
    nonce = env["nonce"]
    name, workflow, input = act["name"], act["workflow"], act["input"]
    if (
        type(env["v"]) is not int
        or env["v"] != ENVELOPE_VERSION
        or type(net) is not str
        or type(process) is not str
        or type(name) is not str
        or type(workflow) is not str
        or type(actor) is not str
        or type(input) is not dict
        or type(ts) is not str
        or not 0 < len(ts) <= 40
        or type(nonce) is not str
        or not _nonce_ok(nonce)
        or not _ts_ok(ts)
        or not _plain(input)
    ):
        return None
    head = (net, process, name, workflow, actor)
    if head not in _GOOD_HEADS:
        if not (
            0 < len(net) <= 200
            and _ID.match(net) is not None
            and 0 < len(process) <= 200
            and _ID.match(process) is not None
            and 0 < len(name) <= 200
            and 0 < len(workflow) <= 400
            and 0 < len(actor) <= 200
            and is_valid_actor(actor)
        ):
            return None
        if len(_GOOD_HEADS) >= 65536:
            _GOOD_HEADS.clear()
        _GOOD_HEADS.add(head)
    if orjson.dumps(env, option=_SORT_KEYS) != raw:
        return None
    return (net, process, name, workflow, input, actor, ts, nonce)


def build_envelope(
    net: str,
    process: str,
    action: str,
    workflow: str,
    input: dict[str, Any] | None,
    actor: str,
    ts: datetime | str,
    nonce: str | None = None,
) -> Envelope:
    """Build and validate an envelope; a fresh nonce is drawn when none is given."""
    obj = {
        "v": ENVELOPE_VERSION,
        "net": net,
        "process": process,
        "action": {"name": action, "workflow": workflow, "input": dict(input or {})},
        "actor": actor,
        "ts": ts if isinstance(ts, str) else format_ts(ts),
        "nonce": nonce if nonce is not None else new_nonce(),
    }
    return Envelope.from_json(obj)


@quick_init
@dataclass(frozen=True)
class SignedEnvelope:
    """An envelope with who signed it and the b64url Ed25519 signature of its canonical bytes."""

    envelope: Envelope
    signer: str
    signature: str

    def to_json(self) -> dict[str, Any]:
        """`{"event": <envelope>, "signer": <key>, "signature": <b64url>}` (`submitEvent`)."""
        return {
            "event": self.envelope.to_json(),
            "signer": self.signer,
            "signature": self.signature,
        }

    @classmethod
    def from_json(cls, obj: object) -> SignedEnvelope:
        """Validate `{"event", "signer", "signature"}`; `DomainError(INVALID_INPUT)` if wrong."""
        body = _require_keys(obj, frozenset({"event", "signer", "signature"}), "")
        envelope = Envelope.from_json(body["event"])
        if not is_public_key(body["signer"]):
            raise _bad("/signer", "must be an Ed25519 public key (43 characters of b64url)")
        signature = body["signature"]
        if not isinstance(signature, str) or len(signature) != 86:
            raise _bad("/signature", "must be a 64-byte b64url Ed25519 signature")
        if not _b64url_ok(signature):  # 86 characters: 64 bytes when well formed
            try:
                b64url_decode(signature, length=64)
            except DomainError as exc:
                raise _bad("/signature", exc.message) from exc
        return cls(envelope=envelope, signer=body["signer"], signature=signature)
