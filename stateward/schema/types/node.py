"""The Relay `Node` interface: every refetchable object has a global `id`."""

from __future__ import annotations

import strawberry


@strawberry.interface(description="An object with a Relay global id; refetch it with node(id).")
class Node:
    """Implemented by every type `node(id)` can return."""

    id: strawberry.ID
