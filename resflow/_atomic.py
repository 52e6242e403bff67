"""One way to write a file that a reader (or a crash) never sees half-written (private helper)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path | str, content: str | bytes | Callable[[Path], object], *,
                 overwrite: bool = True) -> Path:
    """Write ``content`` to ``path`` all at once: into a temporary file beside it, fsynced, then moved into
    place.

    ``content`` is text, bytes, or a function that writes a given path (e.g.
    ``lambda p: torch.save(obj, p)``).  ``overwrite=False`` creates the file only if it is absent, atomically
    (:class:`FileExistsError` otherwise): of concurrent writers, exactly one wins.  The temporary file,
    ``.<name>.<pid>.<random>.tmp``, never outlives the call (``resflow store gc`` removes those of a writer
    killed mid-call).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        if isinstance(content, bytes):
            tmp.write_bytes(content)
        elif isinstance(content, str):
            tmp.write_text(content)
        else:
            content(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if path exists: create-if-absent
    finally:
        tmp.unlink(missing_ok=True)
    return path
