"""The served schema: `create_schema(settings)` (what `stateward.app.create_app` loads)."""

from __future__ import annotations

from stateward.observe.graphql import Telemetry
from stateward.schema.base import StatewardSchema, build_schema
from stateward.schema.mutation import Mutation
from stateward.schema.query import Query
from stateward.schema.subscription import Subscription
from stateward.schema.types.instance import Assignment, Event, Instance
from stateward.schema.types.registry import Registry
from stateward.schema.types.results import Notification
from stateward.schema.types.workflow import Action, State, Workflow
from stateward.settings import Settings

#: Every `Node` implementation (listed so `node(id)` can return each of them).
NODE_TYPES = (Registry, Workflow, State, Action, Instance, Event, Assignment, Notification)


def create_schema(settings: Settings | None = None) -> StatewardSchema:
    """The stateward GraphQL schema (DESIGN §10) hardened by `build_schema`."""
    return build_schema(
        Query,
        Mutation,
        Subscription,
        settings=settings or Settings(),
        types=NODE_TYPES,
        extensions=(Telemetry,),
    )
