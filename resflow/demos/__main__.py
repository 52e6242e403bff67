"""``python -m resflow.demos [OUT_DIR]``: run every demo, print its time, save its figure if OUT_DIR is
given."""

import sys
from pathlib import Path

from resflow.demos import DEMOS, run_demo
from resflow.errors import ConfigError

out = Path(sys.argv[1]) if len(sys.argv) > 1 else None
for name in DEMOS:
    try:
        result = run_demo(name)
    except ConfigError as exc:  # the LLM demo without its data
        print(f"{name:20s} skipped: {exc}")
        continue
    saved = f"  -> {result.save(out / f'{name}.png')}" if out else ""
    print(f"{name:20s} {result.seconds:5.1f} s  {result.title}{saved}")
