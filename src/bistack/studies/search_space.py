"""A tuning search space: config keys (the dotted keys ``--set`` takes) with the values a trial
may give them, read from YAML and checked against the config's schema before any trial runs.

Each key takes one of::

    encoder.outer_dropout: [0.2, 0.7]          # a range: uniform, int or float as the key is
    optimizer.lr: {log: [1.0e-4, 1.0e-2]}      # a range drawn on a log scale (low > 0)
    train.batch_size: {range: [16, 64], step: 16}
    features.char_encoder: {choice: [lstm, cnn]}

A bound or a choice the key cannot take (a type, a name or a value out of the key's range) is an
error that names the file and the key, found by building the config with that value.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bistack.config import ExperimentConfig
from bistack.config.files import build_config, key_hint, parse_override, read_yaml, set_key
from bistack.errors import ConfigError

# Keys a search must not choose: what the verdict varies itself, and what changes the problem.
_NOT_SEARCHED = {
    "train.seed": "the verdict retrains the best trial with --seeds seeds itself",
    "kind": "a search tunes one kind of model; tune each kind's config on its own",
}


@dataclass(frozen=True)
class Parameter:
    """One searched key. ``kind``: float, int or choice; ``low``/``high``/``step``/``log`` for
    ranges, ``choices`` for choices."""

    key: str
    kind: Literal["float", "int", "choice"]
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """The value an Optuna trial draws (or was enqueued with) for this key."""
        if self.kind == "choice":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == "int":
            step = int(self.step or 1)
            return trial.suggest_int(
                self.key, int(self.low), int(self.high), step=step, log=self.log
            )
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=self.log)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one this parameter can take (the starting config's, say)."""
        if self.kind == "choice":
            return value in self.choices
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        if not self.low <= value <= self.high:
            return False
        return self.step is None or math.isclose(
            (value - self.low) / self.step % 1, 0, abs_tol=1e-9
        )

    def describe(self) -> str:
        if self.kind == "choice":
            return f"{self.key}: one of {', '.join(map(str, self.choices))}"
        scale = "log " if self.log else ""
        step = f" step {self.step:g}" if self.step else ""
        return f"{self.key}: {self.kind} {scale}[{self.low:g}, {self.high:g}]{step}"

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "choice":
            return {"key": self.key, "choice": list(self.choices)}
        return {
            "key": self.key,
            "kind": self.kind,
            "low": self.low,
            "high": self.high,
            "log": self.log,
            "step": self.step,
        }


def read_space(path: str | Path, config: ExperimentConfig) -> list[Parameter]:
    """The space in the YAML file ``path`` for ``config``, every bound and choice checked by
    building ``config`` with it; errors name ``path`` and the key."""
    data = read_yaml(path)
    if not data:
        raise ConfigError(f"{path}: the space is empty; name at least one config key to search")
    parameters = [parse_parameter(key, spec, type(config), str(path)) for key, spec in data.items()]
    for parameter in parameters:
        for value in _values_to_check(parameter):
            with_value(config, {parameter.key: value}, f"{path} ({parameter.key} = {value!r})")
    return parameters


def parse_parameter(key: Any, spec: Any, cls: type, source: str) -> Parameter:
    """One key of a space file and what it may take, its kind from the key's type in ``cls``."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{source}: a key must be a dotted config key, got {key!r}")
    if key in _NOT_SEARCHED:
        raise ConfigError(f"{source}: {key} is not searched: {_NOT_SEARCHED[key]}")
    if key.startswith("data."):
        raise ConfigError(
            f"{source}: {key} is not searched: the data decide what the dev score measures, "
            "and a search must not choose them"
        )
    if "." not in key:
        raise ConfigError(f"{source}: {key!r} is a section or kind, not a key: give section.key")
    hint = key_hint(cls, key, source)
    if isinstance(spec, Mapping):
        return _from_mapping(key, spec, hint, source)
    if isinstance(spec, list):
        return _range(key, spec, hint, source, log=False, step=None)
    raise ConfigError(
        f"{source}: {key}: expected [low, high], {{log: [low, high]}}, {{range: [low, high], "
        f"step: s}} or {{choice: [a, b, ...]}}, got {spec!r}"
    )


def _from_mapping(key: str, spec: Mapping[str, Any], hint: Any, source: str) -> Parameter:
    forms = [name for name in ("log", "range", "choice") if name in spec]
    unknown = sorted(set(spec) - {"log", "range", "choice", "step"})
    if unknown or len(forms) != 1:
        raise ConfigError(
            f"{source}: {key}: give exactly one of log, range or choice (and step with range), "
            f"got {', '.join(map(str, spec)) or 'nothing'}"
        )
    (form,) = forms
    if form == "choice":
        choices = spec["choice"]
        if "step" in spec:
            raise ConfigError(f"{source}: {key}: step goes with a range, not a choice")
        if not isinstance(choices, list) or len(choices) < 2:
            raise ConfigError(f"{source}: {key}: choice takes a list of two or more values")
        if len({repr(c) for c in choices}) != len(choices):
            raise ConfigError(f"{source}: {key}: a value appears twice among the choices")
        if any(not isinstance(c, str | int | float | bool) and c is not None for c in choices):
            raise ConfigError(f"{source}: {key}: choices must be plain values (numbers, words)")
        return Parameter(key, "choice", choices=tuple(choices))
    if form == "log" and "step" in spec:
        raise ConfigError(f"{source}: {key}: a log range takes no step")
    return _range(key, spec[form], hint, source, log=form == "log", step=spec.get("step"))


def _range(key: str, bounds: Any, hint: Any, source: str, *, log: bool, step: Any) -> Parameter:
    number = _number_type(hint)
    if number is None:
        raise ConfigError(
            f"{source}: {key} takes {_type_name(hint)}, not a number: give its values as "
            "{choice: [...]}"
        )
    if (
        not isinstance(bounds, list)
        or len(bounds) != 2
        or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)
    ):
        raise ConfigError(f"{source}: {key}: a range is [low, high] (two numbers), got {bounds!r}")
    low, high = bounds
    if not all(math.isfinite(b) for b in bounds):
        raise ConfigError(f"{source}: {key}: a range's bounds must be finite, got [{low}, {high}]")
    if not low < high:
        raise ConfigError(f"{source}: {key}: a range needs low < high, got [{low}, {high}]")
    if log and low <= 0:
        raise ConfigError(f"{source}: {key}: a log range needs low > 0, got {low}")
    if step is not None and (
        not isinstance(step, int | float)
        or isinstance(step, bool)
        or not math.isfinite(step)
        or step <= 0
    ):
        raise ConfigError(f"{source}: {key}: step must be a number > 0, got {step!r}")
    if step is not None and step > high - low:
        raise ConfigError(
            f"{source}: {key}: step {step} is longer than the range [{low}, {high}]: it could "
            "draw only the low bound"
        )
    if number is int:
        if not all(isinstance(b, int) for b in bounds) or (step is not None and step != int(step)):
            raise ConfigError(
                f"{source}: {key} takes whole numbers: give whole bounds (and step), got "
                f"[{low}, {high}]"
            )
        return Parameter(key, "int", low, high, log, None if step is None else int(step))
    return Parameter(key, "float", float(low), float(high), log, step)


def _number_type(hint: Any) -> type | None:
    """int or float when ``hint`` is that number (or an optional one); None otherwise."""
    options = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (types.UnionType, typing.Union)
        else (hint,)
    )
    numbers = [o for o in options if o in (int, float)]
    rest = [o for o in options if o not in (int, float, type(None))]
    return numbers[0] if len(numbers) == 1 and not rest else None


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    return getattr(hint, "__name__", str(hint))


def _values_to_check(parameter: Parameter) -> list[Any]:
    if parameter.kind == "choice":
        return list(parameter.choices)
    cast = int if parameter.kind == "int" else float
    return [cast(parameter.low), cast(parameter.high)]


def with_value(
    config: ExperimentConfig, values: Mapping[str, Any], source: str
) -> ExperimentConfig:
    """``config`` with the dotted ``values`` set, validated as a config file would be."""
    data = config.to_dict()
    for key, value in values.items():
        set_key(data, key, value, source)
    return build_config(type(config), data, source)


def verdict_config(
    config: ExperimentConfig, overrides: list[str], space: list[Parameter]
) -> ExperimentConfig:
    """``config`` with ``overrides`` (``key=value``, as ``--set``) for the verdict's retraining
    of the best and the starting config, such as the full epoch budget when the trials ran on
    a short one. A key the space searches, the seed and the data are refused: the verdict
    would no longer judge what the search found."""
    searched = {p.key for p in space}
    values: dict[str, Any] = {}
    for override in overrides:
        key, value = parse_override(override, "--verdict-set")
        source = f"--verdict-set {override!r}"
        if key in searched:
            raise ConfigError(f"{source}: {key} is searched; the verdict keeps the trial's value")
        if key in _NOT_SEARCHED or key.startswith("data."):
            raise ConfigError(f"{source}: {key} is the same for both configs in a verdict")
        key_hint(type(config), key, source)
        values[key] = value
    return with_value(config, values, "--verdict-set") if values else config
