"""Load a script of the repository (``benchmarks/``, ``scripts/``) as a module, for tests.

The scripts are not installed, so tests load them from their path.  One loader for
every such test: the module is registered in ``sys.modules`` under the file's stem
while it executes, since a dataclass looks its module up there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path) -> ModuleType:
    """The script at ``path``, executed as the module named after its stem."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
