"""The schema's types say what the values are (issue 16): closed sets are enums on output
and input, node ids and UUIDs are `ID`, and a bus event's cursor is what `events(after:)`
takes back."""

from __future__ import annotations

from graphql import GraphQLEnumType, GraphQLInputObjectType, GraphQLNamedType, get_named_type

from stateward.schema.root import create_schema

SCHEMA = create_schema()._schema

#: (type, field) -> the enum its value must be.
ENUM_FIELDS = {
    ("Instance", "status"): "InstanceStatus",
    ("Assignment", "status"): "AssignmentStatus",
    ("State", "audience"): "Audience",
    ("State", "mode"): "StageMode",
    ("State", "type"): "StageType",
    ("GraphNode", "audience"): "Audience",
    ("GraphNode", "mode"): "StageMode",
    ("WebhookDelivery", "status"): "WebhookDeliveryStatus",
    ("BusEvent", "eventType"): "BusEventType",
    ("StatusCount", "status"): "InstanceStatus",
    ("BatchOperation", "kind"): "BatchKind",
    ("BatchOperation", "status"): "BatchStatus",
    ("Notification", "kind"): "NotificationKind",
    ("PublicView", "status"): "PublicViewStatus",
    ("FormField", "type"): "FormFieldType",
}
#: (root, field, argument) -> the type the argument must have.
ARGUMENTS = {
    ("Query", "instance", "id"): "ID",
    ("Query", "events", "process"): "ID",
    ("Query", "verifyProcess", "id"): "ID",
    ("Query", "eventProof", "process"): "ID",
    ("Query", "myAssignments", "status"): "AssignmentStatus",
    ("Query", "webhookDeliveries", "status"): "WebhookDeliveryStatus",
    ("Mutation", "performAction", "instance"): "ID",
    ("Mutation", "advance", "instance"): "ID",
    ("Mutation", "cancelInstance", "instance"): "ID",
    ("Mutation", "claimAssignment", "id"): "ID",
    ("Mutation", "unclaimAssignment", "id"): "ID",
    ("Mutation", "completeAssignment", "id"): "ID",
    ("Mutation", "cancelAssignment", "id"): "ID",
    ("Mutation", "issueEntryToken", "instance"): "ID",
    ("Mutation", "migrateInstance", "instance"): "ID",
    ("Mutation", "startInstance", "id"): "ID",
    ("Subscription", "instanceUpdated", "id"): "ID",
    ("InstanceFilter", "parent", None): "ID",
    ("AssignmentFilter", "instance", None): "ID",
    ("EventFilter", "instance", None): "ID",
    ("AuditFilter", "process", None): "ID",
}


def _type(name: str) -> GraphQLNamedType:
    found = SCHEMA.get_type(name)
    assert found is not None, name
    return found


def test_closed_sets_are_enums_in_screaming_case() -> None:
    for (owner, field), enum in ENUM_FIELDS.items():
        named = get_named_type(_type(owner).fields[field].type)  # type: ignore[attr-defined]
        assert named.name == enum, (owner, field, named.name)
    for named in SCHEMA.type_map.values():
        if isinstance(named, GraphQLEnumType) and not named.name.startswith("__"):
            assert all(v == v.upper() for v in named.values), named.name


def test_ids_are_id_and_filters_take_enums() -> None:
    for (owner, field, argument), wanted in ARGUMENTS.items():
        target = _type(owner).fields[field]  # type: ignore[attr-defined]
        typed = target.type if argument is None else target.args[argument].type
        assert get_named_type(typed).name == wanted, (owner, field, argument)


def test_a_bus_event_cursor_has_the_type_events_after_takes() -> None:
    cursor = get_named_type(_type("BusEvent").fields["cursor"].type)  # type: ignore[attr-defined]
    after = SCHEMA.subscription_type.fields["events"].args["after"].type  # type: ignore[union-attr]
    assert cursor.name == get_named_type(after).name == "String"


#: Names that hold a closed set; a `String` under one of them must be an allowed exception.
CLOSED_NAMES = {"status", "kind", "type", "mode", "audience", "op", "direction", "eventType"}
#: Names that take a node id or a UUID as an argument or input field.
ID_NAMES = {"id", "ids", "instance", "process", "parent", "assignment"}
#: The allowed exceptions (issue 16: "a small list"), each with its reason.
STRING_EXCEPTIONS = {
    # the bus event's type string stays as is; `eventType` beside it is the enum
    ("BusEvent", "type"),
    # a webhook delivery carries the bus type string of the event it delivers
    ("WebhookDelivery", "eventType"),
}


def _string_named(names: set[str]) -> list[tuple[str, str]]:
    found = []
    for name, named in SCHEMA.type_map.items():
        fields = getattr(named, "fields", None)
        if name.startswith("__") or not fields:
            continue
        for field_name, target in fields.items():
            if field_name in names and get_named_type(target.type).name == "String":
                found.append((name, field_name))
            for arg_name, arg in getattr(target, "args", {}).items():
                if arg_name in names and get_named_type(arg.type).name == "String":
                    found.append((f"{name}.{field_name}", arg_name))
    return found


def test_no_string_where_an_enum_or_an_id_fits() -> None:
    closed = [k for k in _string_named(CLOSED_NAMES) if k not in STRING_EXCEPTIONS]
    assert closed == [], f"String where an enum fits: {closed}"
    ids = [
        k
        for k in _string_named(ID_NAMES)
        if isinstance(SCHEMA.get_type(k[0].split(".")[0]), GraphQLInputObjectType) or "." in k[0]
    ]
    assert [k for k in ids if k not in STRING_EXCEPTIONS] == [], f"String where ID fits: {ids}"


def test_enums_that_mirror_domain_sets_hold_every_member() -> None:
    from stateward.domain.forms import FIELD_TYPES
    from stateward.runtime.batches.bulk import KINDS
    from stateward.schema import enums

    assert {m.value for m in enums.FormFieldType} == set(FIELD_TYPES)
    assert {m.value for m in enums.BatchKind} == set(KINDS)
