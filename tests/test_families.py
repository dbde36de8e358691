"""The families registry (:mod:`trajlab.families`): every family states every facet, and what reads it agrees.

A family module that lacks a facet fails the load with the facet named; the call-format registry provides exactly
the formats the families declare; the CLI's ``--tool-format`` / ``--format`` choices and the generated docs come
from the registries; each call format has the rule-pack data the stages read (its ``rules/formats`` file, its
OOD tool block, its family's control-token set).
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import yaml

import trajlab.families as families
from trajlab.families import FAMILIES, REQUIRED_FACETS, FamilyError, family_from_module, load_families

RULES = Path(__file__).resolve().parents[1] / "rules"


def _copy_of(module_name: str) -> types.ModuleType:
    src = __import__(f"trajlab.families.{module_name}", fromlist=["NAME"])
    mod = types.ModuleType(f"trajlab.families.broken_{module_name}")
    for facet in REQUIRED_FACETS:
        setattr(mod, facet, getattr(src, facet))
    return mod


@pytest.mark.parametrize("facet", list(REQUIRED_FACETS))
def test_a_family_missing_a_facet_fails_naming_it(facet: str) -> None:
    mod = _copy_of("glm")
    assert family_from_module(mod).name == "glm"  # complete, it loads
    delattr(mod, facet)
    with pytest.raises(FamilyError, match=rf"broken_glm: family module lacks the facet {facet}\b"):
        family_from_module(mod)


@pytest.mark.parametrize(("facet", "value", "said"), [
    ("CALL_FORMATS", (), "CALL_FORMATS is empty"),
    ("TOOL_BLOCKS", (), "TOOL_BLOCKS must hold at least one ToolBlock"),
    ("ROLE_HEADERS", {"user": "<|user|>"}, "ROLE_HEADERS must name system, user, assistant and tool"),
    ("LAYOUT", "tokens", "LAYOUT must be a TokenLayout"),
    ("LAYOUT", families.TokenLayout("rebuilt"), "LAYOUT.rebuild must be one of chatml, tokens, none"),
])
def test_a_facet_stated_wrongly_is_named(facet: str, value: object, said: str) -> None:
    mod = _copy_of("qwen")
    setattr(mod, facet, value)
    with pytest.raises(FamilyError, match=said.replace(".", r"\.")):
        family_from_module(mod)


def test_every_registered_family_loads_with_every_facet() -> None:
    assert list(FAMILIES) == ["seed_oss", "minimax_m2", "qwen", "glm", "kimi", "deepseek", "harmony", "gemma", "llama",
                             "react_agent"]
    for fam in FAMILIES.values():
        assert fam.call_formats and fam.tool_blocks and fam.special_tokens, fam.name
        assert {"system", "user", "assistant", "tool"} <= set(fam.role_headers), fam.name


def test_a_call_format_belongs_to_one_family_and_names_never_clash(monkeypatch: pytest.MonkeyPatch) -> None:
    assert families.family_of("glm47") is FAMILIES["glm"]
    assert families.family_of("gpt_oss") is FAMILIES["harmony"]
    assert families.family_of("none") is None and families.family_of(None) is None
    assert not set(FAMILIES) & set(families.CALL_FORMATS)
    twin = _copy_of("glm")
    twin.NAME = "glm_twin"
    import sys
    monkeypatch.setitem(sys.modules, "trajlab.families.glm_twin", twin)
    with pytest.raises(FamilyError, match="'glm45' is claimed by families 'glm' and 'glm_twin'"):
        load_families(("glm", "glm_twin"))
    same = _copy_of("kimi")
    same.NAME = "kimi_k2"  # a family named like a call format
    monkeypatch.setitem(sys.modules, "trajlab.families.kimi_same", same)
    with pytest.raises(FamilyError, match="kimi_k2: a family's name must not be a call format's name"):
        load_families(("kimi_same",))


def test_the_call_format_registry_is_keyed_by_the_families_names() -> None:
    from trajlab.toolcalls.formats import FORMATS, KNOWN_FORMATS, MODULE_OF_FORMAT

    assert KNOWN_FORMATS == families.CALL_FORMATS
    for name, fmt in FORMATS.items():
        assert fmt.name == name
        assert (Path(families.__file__).parents[1] / "toolcalls" / "formats").joinpath(
            MODULE_OF_FORMAT[name]).with_suffix(".py").exists() or (
            Path(families.__file__).parents[1] / "toolcalls" / "formats" / MODULE_OF_FORMAT[name]).is_dir()


def test_every_call_format_has_its_rule_pack_data() -> None:
    hints = yaml.safe_load((RULES / "hints.yaml").read_text(encoding="utf-8"))
    control = yaml.safe_load((RULES / "control_tokens.yaml").read_text(encoding="utf-8"))
    blocks = hints["ood"]["tool_blocks"]
    for fam in FAMILIES.values():
        assert fam.control_tokens in control["families"], f"{fam.name}: CONTROL_TOKENS {fam.control_tokens!r}"
        for fmt in fam.call_formats:
            assert (RULES / "formats" / f"{fmt}.yaml").is_file(), f"{fmt}: rules/formats/{fmt}.yaml"
            assert isinstance(blocks.get(fmt), str), f"{fmt}: hints.yaml ood.tool_blocks.{fmt}"


def test_ingest_and_rescore_read_the_families() -> None:
    from trajlab.ingest.turns import FAMILY_WRAPPERS
    from trajlab.rescore.stream import FAMILY_LAYOUTS
    from trajlab.rescore.tokenizers import BUILT_IN_TOKENIZERS

    assert {f for f, *_ in FAMILY_WRAPPERS} == {n for n, f in FAMILIES.items()
                                                if any(b.pattern is not None for b in f.tool_blocks)}
    # the families' own markup is tried before markup another family's output may hold
    shared = [b.shared for _f, b in families.tool_blocks()]
    assert shared == sorted(shared)
    assert set(FAMILY_LAYOUTS) == {f for f, fam in families.FAMILY_OF_FORMAT.items() if fam.layout.rebuild != "chatml"}
    assert FAMILY_LAYOUTS["glm47"] is FAMILIES["glm"].layout
    assert set(families.TOKENIZER_ALIASES.values()) <= set(BUILT_IN_TOKENIZERS)


def test_the_generated_families_page_lists_every_family_and_facet() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_reference", Path(__file__).resolve().parents[1] / "docs" / "gen_reference.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = gen.families_page()
    for fam in FAMILIES.values():
        assert f"## `{fam.name}`" in page
        for fmt in fam.call_formats:
            assert f"`{fmt}`" in page
        assert f"`families.{fam.control_tokens}`" in page
