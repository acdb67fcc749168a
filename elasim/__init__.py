"""elasim: simulate, then execute, elastic deep-learning training policies.

The simulator (``elasim.sim``) and the real executor (``elasim.executor``) share one
vocabulary (``elasim.policies.base``): the same observations, decisions, event kinds
and pause components.  See the README for the model and its assumptions.
"""

from __future__ import annotations

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
