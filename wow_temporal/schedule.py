"""The old import path of the wire model, kept until 0.2: import from `wow_temporal.model`."""

from wow_temporal.model import *  # noqa: F403
from wow_temporal.model import __all__ as __all__
