"""The styles' behaviours, by the config's style name: the one registration of each style.

A style's module (with its plan and passes) is imported when a split first asks for that style:
a split in one style does not pay for loading the other two."""
from __future__ import annotations

from importlib import import_module

from ..core.styles import STYLES
from .base import Style

# style name -> (its module in this package, its Style class)
BEHAVIOURS = {"fleet": ("fleet", "FleetStyle"), "classic": ("classic", "ClassicStyle"),
              "ps": ("ps", "PsStyle")}
assert set(BEHAVIOURS) == set(STYLES), "every style of core/styles.py has its behaviour here"
_MADE: dict = {}


def behaviour(name: str) -> Style:
    """The behaviour of the style called `name` (made once)."""
    style = _MADE.get(name)
    if style is None:
        module, cls = BEHAVIOURS[name]
        style = _MADE[name] = getattr(import_module("." + module, __package__), cls)()
        assert style.traits.name == name
    return style


def register(style: Style) -> Style:
    """Make `style` the behaviour of the style called `style.traits.name` (a style made outside
    this package: its traits must be in core/styles.py's STYLES, and its behaviour on the floors
    above in core/stylehooks.py's slots)."""
    _MADE[style.traits.name] = style
    return style


def unregister(name: str) -> None:
    """Forget a style `register` made (one of BEHAVIOURS is made again when next asked)."""
    _MADE.pop(name, None)


def style_of(config) -> Style:
    """The behaviour of the config's style."""
    return behaviour(config.style)


def all_styles() -> list:
    """Every style, in the config's order of allowed values."""
    return [behaviour(name) for name in STYLES]
