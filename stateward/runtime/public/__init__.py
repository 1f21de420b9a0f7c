"""Public entry: anonymous visitors through entry tokens (`entry`: `$entry_token`, start and
advance as a visitor, the public view) and per-IP rate limits (`rate_limit`).

May use the runtime core. Exception: `entry` stores entry tokens with `access.auth`'s
token digest (one digest for bearer and entry tokens).
"""
