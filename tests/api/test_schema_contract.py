"""The schema's types say what the values are (issue 16): closed sets are enums on output
and input, node ids and UUIDs are `ID`, and a bus event's cursor is what `events(after:)`
takes back."""

from __future__ import annotations

from graphql import GraphQLEnumType, GraphQLNamedType, get_named_type

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
