"""Help a user can trust: every subcommand's ``--help`` names only flags that command has, and
what several commands share is said the same way by each."""

from __future__ import annotations

import re

import pytest

from bistack.cli import build_parser


def subcommands() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_a_commands_help_names_only_flags_it_has(name):
    command = subcommands()[name]
    flags = {flag for action in command._actions for flag in action.option_strings}
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", command.format_help()))
    assert named - flags == set(), f"bistack {name} --help names flags it lacks"


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_flag_has_help(name):
    command = subcommands()[name]
    for action in command._actions:
        if action.option_strings and action.help != "==SUPPRESS==":
            assert action.help, f"bistack {name} {action.option_strings[0]} has no help"


def test_shared_flags_are_said_alike():
    helps: dict[str, set[str]] = {}
    for command in subcommands().values():
        for action in command._actions:
            if action.option_strings and action.option_strings[0] in ("--set", "--log-format"):
                helps.setdefault(action.option_strings[0], set()).add(action.help)
    assert all(len(said) == 1 for said in helps.values()), helps


def test_compare_poolers_offers_every_pooler_it_trains():
    from bistack.studies.pooler_variants import POOLER_VARIANTS
    from bistack.text_models.config import LayerPoolingConfig

    help = " ".join(subcommands()["compare-poolers"].format_help().split())
    assert "concat_all" in POOLER_VARIANTS and all(name in help for name in POOLER_VARIANTS)
    types = LayerPoolingConfig.__dataclass_fields__["type"].type
    for kind in re.findall(r'"(\w+)"', str(types)):
        assert any(v["type"] == kind for v in POOLER_VARIANTS.values()), kind
