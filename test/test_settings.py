"""Bounds once: every setting's declared range and choices are enforced by one check
(core/settings.problem, through @checked) when a core config is built, and checked nowhere
else. Each core config is built with each setting just outside its range (one exception type,
one message shape) and at each end of it (nothing refuses what the setting allows, but a rule
over several fields); and the configs' own __post_init__ and DetectorConfig.build are read for
a hand-written bound on a setting."""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
import textwrap

import pytest

import contact_estimation.core
from contact_estimation.core.settings import SettingError, setting_of



def _configs() -> list[type]:
    """Every dataclass of core with a setting field, by name."""
    found = {}
    for module in pkgutil.walk_packages(contact_estimation.core.__path__,
                                        'contact_estimation.core.'):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if (dataclasses.is_dataclass(cls) and cls.__module__ == module.name
                    and any(setting_of(f) for f in dataclasses.fields(cls))):
                found[cls.__qualname__] = cls
    return [found[name] for name in sorted(found)]


CONFIGS = _configs()


def _ranged(cls: type) -> list[tuple[dataclasses.Field, object]]:
    """(field, its Setting) of every field of `cls` that declares a range or choices."""
    return [(f, s) for f in dataclasses.fields(cls) for s in [setting_of(f)]
            if s is not None and (s.range is not None or s.choices is not None)]


def _cases(cls: type, outside: bool):
    """(field name, setting name, value) for every bounded setting of `cls`: just outside its
    range (each end) or not among its choices, or (outside False) at each end of its range.
    A value of a fixed size is that many values, the first one the case."""
    for field, declared in _ranged(cls):
        if declared.choices is not None:
            values = ['no such choice'] if outside else list(declared.choices)
        else:
            low, high = declared.range
            integer = isinstance(field.default, int) or (
                isinstance(field.default, tuple) and isinstance(field.default[0], int))
            if outside:
                values = ([low - 1, high + 1] if integer else
                          [math.nextafter(low, -math.inf), math.nextafter(high, math.inf)])
            else:
                values = [low, high]
        for value in values:
            if declared.size:
                value = (value,) + tuple(field.default[1:])
            elif isinstance(field.default, tuple):
                value = (value,)
            yield field.name, declared.name or field.name, value


def test_every_config_with_settings_is_found():
    assert len(CONFIGS) >= 15
    assert {'DetectorSettings', 'ProximityConfig', 'LidarWatchConfig'} <= {
        c.__name__ for c in CONFIGS}


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_a_value_outside_a_declared_bound_is_refused_by_the_one_check(cls):
    for field, name, value in _cases(cls, outside=True):
        with pytest.raises(SettingError) as refused:
            cls(**{field: value})
        assert type(refused.value) is SettingError, (name, value)
        message = str(refused.value)
        assert re.fullmatch(rf'{re.escape(name)} = .+: .+ (outside .+ … .+|is not one of .+)',
                            message), message


def _spans_fields(message: str, cls: type, field: str) -> bool:
    """Whether a refusal names another field of `cls` than `field` (a rule over several)."""
    names = {f.name for f in dataclasses.fields(cls)} | {
        s.name for f in dataclasses.fields(cls) for s in [setting_of(f)] if s and s.name}
    return any(re.search(rf'\b{re.escape(other)}\b', message) for other in names - {field})


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_nothing_else_refuses_a_value_the_setting_allows(cls):
    """A hand-written bound tighter than the declared one (a drift) refuses an end of the
    declared range: only a rule over several fields may."""
    for field, name, value in _cases(cls, outside=False):
        try:
            cls(**{field: value})
        except ValueError as refused:
            assert _spans_fields(str(refused), cls, field), (
                f'{cls.__name__}.{field} = {value!r} is within its setting, yet refused: '
                f'{refused}')


def _bound_checks(tree: ast.AST, fields: set[str]) -> list[str]:
    """What function `tree` does that the one check already does to a setting in `fields`:
    compare it to a number (by name or in a loop over settings by name), test it for being
    finite, give per_joint a bound."""

    def mentions(node) -> bool:
        return any((isinstance(n, ast.Attribute) and n.attr in fields)
                   or (isinstance(n, ast.Constant) and n.value in fields)
                   or (isinstance(n, ast.Name) and n.id in fields) for n in ast.walk(node))

    def number(node) -> bool:
        if isinstance(node, ast.UnaryOp):
            node = node.operand
        return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(number, operands)) and any(mentions(o) for o in operands
                                                  if not number(o)):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            if callee.endswith('isfinite') and any(map(mentions, node.args)):
                found.append(ast.unparse(node))
            if callee == 'per_joint' and any(k.arg in ('low', 'strict') for k in node.keywords):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.For) and mentions(node.iter):  # settings by name
            found += [f'{ast.unparse(c)} (for {ast.unparse(node.target)} in '
                      f'{ast.unparse(node.iter)})' for c in ast.walk(node)
                      if isinstance(c, ast.Compare) and any(map(number, c.comparators))]
    return found


def _own_rules(cls: type) -> list[tuple[str, ast.FunctionDef]]:
    """(class, function) of what runs when `cls` is built, read from the source of it and
    its bases: each __post_init__ (the one @checked wraps) and `build` classmethod."""
    return [(klass.__name__, node) for klass in cls.__mro__[:-1]
            for node in ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
            if isinstance(node, ast.FunctionDef) and node.name in ('__post_init__', 'build')]


@pytest.mark.parametrize('cls', CONFIGS + [sub for c in CONFIGS for sub in c.__subclasses__()],
                         ids=lambda c: c.__name__)
def test_no_bound_is_checked_by_hand(cls):
    fields = {f.name for f, _ in _ranged(cls)} | {s.name for _, s in _ranged(cls) if s.name}
    for owner, function in _own_rules(cls):
        checks = _bound_checks(function, fields)
        assert not checks, (f'{owner}.{function.name} checks a declared bound again by hand '
                            f'(core/settings.problem does): {checks}')
