"""Workflow paths, registry ids and hook references (DESIGN §2.1, §6)."""

from __future__ import annotations

import pytest

from stateward.domain.definition import is_canonical_path, registry_id, split_path
from stateward.domain.paths import path_problems, resolve_hook


@pytest.mark.parametrize(
    ("path", "canonical"),
    [
        ("customer/retail/retail-customer", True),
        ("case/review/kyc_review2", True),
        ("a/b", True),
        ("retail-customer", False),
        ("/customer/x", False),
        ("customer/x/", False),
        ("customer//x", False),
        ("customer/../x", False),
        ("customer/x.json", False),
        ("Customer/x", False),
        ("customer/x-v1", False),
        ("customer/x_V2", False),
        (42, False),
    ],
)
def test_canonical_paths(path: object, canonical: bool) -> None:
    assert is_canonical_path(path) is canonical


def test_registry_ids_replace_slashes_and_add_the_suffix() -> None:
    assert registry_id("customer/retail") == "customer-retail-registry"
    assert registry_id("system") == "system-registry"


def test_split_path_gives_namespace_and_name() -> None:
    assert split_path("customer/retail/retail-customer") == ("customer/retail", "retail-customer")


def test_a_version_suffix_alone_is_not_also_an_invalid_path() -> None:
    assert [p.code for p in path_problems("customer/retail/x-V1")] == ["VERSION_SUFFIX"]
    assert [p.code for p in path_problems("Customer/x-v1")] == ["VERSION_SUFFIX", "INVALID_PATH"]
    assert [p.code for p in path_problems("system/bootstrap")] == ["RESERVED_PATH"]


def test_hooks_resolve_to_a_module_path_and_a_function() -> None:
    assert resolve_hook("scoring:score", "customer/retail") == ("customer/retail/scoring", "score")
    assert resolve_hook("risk/shared/model:run", "customer/retail") == ("risk/shared/model", "run")
    for bad in ("scoring", "scoring:", ":score", "Scoring:score", "a/b:1x", "single/:f"):
        assert resolve_hook(bad, "customer/retail") is None
