"""`quick_init`: a frozen dataclass keeps its signature, defaults, factories, equality,
hash and immutability when its `__init__` fills `__dict__` directly."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest

from stateward.domain.frozen import quick_init
from stateward.domain.model import Outcome, ProcessSnapshot
from stateward.governance.envelope import Envelope
from stateward.records import OutboxRecord, ProcessRecord, StoredEvent


def _plain_twin(cls: type) -> Any:
    """The same fields in a frozen dataclass with `dataclass`'s own `__init__`."""
    return dataclass(frozen=True)(type(cls.__name__, (), {
        "__annotations__": {f.name: f.type for f in dataclasses.fields(cls)},
        **{f.name: field(default=f.default, default_factory=f.default_factory, init=f.init,
                         kw_only=f.kw_only)
           for f in dataclasses.fields(cls)},
    }))  # fmt: skip


@dataclass(frozen=True)
class _Sample:
    name: str
    count: int = 0
    tags: list[str] = field(default_factory=list)
    derived: str = field(default="", init=False)
    note: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "derived", f"{self.name}:{self.count}")


def _shape(cls: type) -> list[tuple[str, Any, bool]]:
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty) for p in parameters]


def test_the_signature_is_the_generated_one() -> None:
    twin = _plain_twin(_Sample)
    quick = quick_init(_plain_twin(_Sample))
    assert _shape(quick) == _shape(twin)
    for cls in (ProcessRecord, StoredEvent, OutboxRecord, ProcessSnapshot, Outcome, Envelope):
        parameters = inspect.signature(cls.__init__).parameters
        assert [p.name for p in parameters.values()][1:] == [
            f.name for f in dataclasses.fields(cls) if f.init
        ]


def test_defaults_factories_post_init_and_keywords_behave_as_before() -> None:
    original = _Sample("a")
    quick_init(_Sample)
    built = _Sample("a")
    assert built == original
    assert built.derived == "a:0" and built.tags == [] and built.note is None
    other = _Sample("a")
    assert other.tags is not built.tags  # a fresh list per instance, as default_factory
    assert _Sample("b", 2, ["x"], note="n") == _Sample(name="b", count=2, tags=["x"], note="n")
    with pytest.raises(TypeError):
        _Sample("b", 2, ["x"], "positional note")  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Sample()  # type: ignore[call-arg]


def test_instances_stay_frozen_and_replace_works() -> None:
    record = OutboxRecord(id=1, type="workflow.advanced", payload={}, created_at=None)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.id = 2  # type: ignore[misc]
    moved = dataclasses.replace(record, id=7)
    assert (moved.id, record.id, moved.type) == (7, 1, "workflow.advanced")
    assert repr(moved).startswith("OutboxRecord(id=7, type='workflow.advanced'")


def test_what_it_cannot_build_is_refused() -> None:
    @dataclass
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "a", self.a * scale)

    for cls in (NotFrozen, Slotted, WithInitVar, int):
        with pytest.raises(TypeError):
            quick_init(cls)
