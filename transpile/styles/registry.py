"""The styles' behaviours, by the config's style name: the one registration of each style."""
from __future__ import annotations

from ..core.styles import STYLES
from .base import Style
from .classic import ClassicStyle
from .fleet import FleetStyle
from .ps import PsStyle

REGISTRY = {style.traits.name: style for style in (FleetStyle(), ClassicStyle(), PsStyle())}
assert set(REGISTRY) == set(STYLES), "every style of core/styles.py has its behaviour here"


def style_of(config) -> Style:
    """The behaviour of the config's style."""
    return REGISTRY[config.style]


def all_styles() -> list:
    """Every style, in the config's order of allowed values."""
    return [REGISTRY[name] for name in STYLES]
