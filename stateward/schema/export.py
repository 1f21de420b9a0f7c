"""Print the schema's SDL: `python -m stateward.schema.export > docs/schema.graphql`."""

from __future__ import annotations

from stateward.schema.root import create_schema


def sdl() -> str:
    """The SDL of the served schema (development settings), with a trailing newline."""
    return create_schema().as_str().rstrip("\n") + "\n"


if __name__ == "__main__":
    print(sdl(), end="")
