"""Plain leaf fields completed without graphql-core's per-field machinery (issue 16).

Reading 1,000 events selects about 15,000 scalar fields, and graphql-core spent more time
on them than on anything else: for every one a `Path`, a resolve-info tuple, Strawberry's
basic-field resolver (`field.get_result` -> `getattr`), an awaitable check, the
non-null / list / leaf dispatch of `complete_value` and finally the scalar's
`coerce_output_value`.

`PlainLeafFields.execute_fields` does, for a field that is *plain* — a Strawberry field
without a resolver or field extension (Strawberry's own "basic field": it reads the
attribute and never sees `info`), of a scalar or enum type, without arguments — only the
two steps that decide its value: `getattr(source, python_name)` and the scalar's
`coerce_output_value`. Every other case takes graphql-core's unchanged path
(`execute_field`), field by field:

- the field is not plain (a resolver, arguments, an object or list type), or a resolve
  middleware runs (a Strawberry extension with a `resolve` hook sees every field);
- the attribute is not a value of a plain Python type (`str int float bool datetime date
  dict list`): `None` on a non-null field (the null error), an exception object, an
  awaitable, an enum member...;
- reading the attribute or coercing the value raises, or the coercion gives `None`
  (graphql-core's error for it is then raised on its own path, located as always).

Field collection (fragments, aliases, `@include`/`@skip`, `@defer`) happens before this
and is untouched; the result holds the same keys in the same order with the same values,
so the response is byte-identical (tests/api/test_plain_leaves.py).

This overrides a graphql-core 3.3 method documented as private: if its signature ever
differs, `SUPPORTED` is false and the stock method runs.
"""

from __future__ import annotations

import inspect
from datetime import date, datetime
from typing import Any

from graphql import GraphQLNonNull, Undefined, is_leaf_type
from graphql.execution.executor import Executor
from graphql.pyutils import Path, gather_with_cancel
from graphql.type.scalars import serialize_id, serialize_string
from strawberry.schema.schema_converter import GraphQLCoreConverter

__all__ = ["SUPPORTED", "PlainLeafFields"]

#: Types whose values a scalar coerces without side effects (`datetime` is a `date`).
PLAIN_TYPES = frozenset({str, int, float, bool, datetime, date, dict, list})

SUPPORTED = list(inspect.signature(Executor.execute_fields).parameters) == [
    "self", "parent_type", "source_value", "path", "grouped_field_set", "position_context",
]  # fmt: skip

#: One planned field: (response name, field details, attribute name or None when the
#: field is not plain, the leaf's output coercion, whether it is non-null, whether the
#: coercion returns a `str` as it is: `String` and `ID`).
_Step = tuple[str, Any, str | None, Any, bool, bool]

#: Output coercions that return a `str` value unchanged (graphql-core's String and ID).
_STR_AS_IS = (serialize_string, serialize_id)


def _plain_leaf(field_def: Any, field_details_list: Any) -> tuple[str, Any, bool, bool] | None:
    """(python attribute, coercion, non-null, str as is) of a plain leaf field, else None."""
    resolve = field_def.resolve
    if resolve is None or not getattr(resolve, "_is_default", False) or field_def.args:
        return None
    if any(details.node.arguments for details in field_details_list):
        return None
    source = (field_def.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    if source is None or source.default_resolver is not getattr or not source.is_basic_field:
        return None
    name = source.python_name
    kind = field_def.type
    non_null = isinstance(kind, GraphQLNonNull)
    if non_null:
        kind = kind.of_type
    if not name or not is_leaf_type(kind):
        return None
    coerce = kind.coerce_output_value
    return name, coerce, non_null, coerce in _STR_AS_IS


class PlainLeafFields(Executor):
    """graphql-core's executor with plain leaf fields completed directly (module doc)."""

    #: (parent type name, id(grouped field set)) -> (the set, its plan); the set is kept
    #: so its id is not reused while this operation runs (as graphql-core's own sub-field
    #: memo does).
    _leaf_plans: dict[tuple[str, int], tuple[Any, list[_Step] | None]] | None = None

    def _leaf_plan(self, parent_type: Any, grouped_field_set: Any) -> list[_Step] | None:
        plans = self._leaf_plans
        if plans is None:
            plans = self._leaf_plans = {}
        key = (parent_type.name, id(grouped_field_set))
        hit = plans.get(key)
        if hit is not None and hit[0] is grouped_field_set:
            return hit[1]
        steps: list[_Step] = []
        fast = 0
        manager = self.middleware_manager
        middleware = manager is not None and bool(getattr(manager, "middlewares", True))
        for response_name, field_details_list in grouped_field_set.items():
            leaf = None
            if not middleware:
                field_def = self.schema.get_field(
                    parent_type, field_details_list[0].node.name.value
                )
                if field_def is not None:
                    leaf = _plain_leaf(field_def, field_details_list)
            if leaf is None:
                steps.append((response_name, field_details_list, None, None, False, False))
            else:
                fast += 1
                steps.append((response_name, field_details_list, *leaf))
        plan = steps if fast else None
        plans[key] = (grouped_field_set, plan)
        return plan

    def execute_fields(
        self,
        parent_type: Any,
        source_value: Any,
        path: Path | None,
        grouped_field_set: Any,
        position_context: Any,
    ) -> Any:
        """graphql-core's `execute_fields`, with plain leaves completed in place."""
        plan = self._leaf_plan(parent_type, grouped_field_set) if SUPPORTED else None
        if plan is None:
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        results: dict[str, Any] = {}
        is_awaitable = self.is_awaitable
        awaitable_fields: list[str] = []
        plain = PLAIN_TYPES
        try:
            for response_name, field_details_list, attr, coerce, non_null, text in plan:
                if attr is not None:
                    try:
                        value = getattr(source_value, attr)
                        kind = type(value)
                        if kind is str and text:
                            results[response_name] = value
                            continue
                        if value is None:
                            if not non_null:
                                results[response_name] = None
                                continue
                        elif kind in plain:
                            coerced = coerce(value)
                            if coerced is not None and coerced is not Undefined:
                                results[response_name] = coerced
                                continue
                    except Exception:  # graphql-core's path below raises and reports it
                        pass
                result = self.execute_field(
                    parent_type,
                    source_value,
                    field_details_list,
                    Path(path, response_name, parent_type.name),
                    position_context,
                )
                if result is not Undefined:
                    results[response_name] = result
                    if is_awaitable(result):
                        awaitable_fields.append(response_name)
        except Exception:
            if awaitable_fields:
                self.settle_in_background([results[field] for field in awaitable_fields])
            raise
        if not awaitable_fields:
            return results
        return self._gather_fields(results, awaitable_fields)

    async def _gather_fields(self, results: dict[str, Any], awaitable_fields: list[str]) -> Any:
        """The awaitable fields of `results` awaited in place (as graphql-core does)."""
        if len(awaitable_fields) == 1:
            field = awaitable_fields[0]
            results[field] = await results[field]
        else:
            awaited = await gather_with_cancel(*(results[field] for field in awaitable_fields))
            results.update(zip(awaitable_fields, awaited, strict=True))
        return results
