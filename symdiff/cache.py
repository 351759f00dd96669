"""A function and options -> its generated gradient's source on disk, as plain JSON text.

An entry holds the source and, for each free name of the source, where to find it again
(the module whose globals hold it, or the closure); never a pickle, so whoever can write
the cache cannot run code through anything but the Python source it stores. The key
hashes the function's source, its file and line, the options and the versions of
symdiff, Python, NumPy and SymPy; each entry also lists the helpers the gradient inlined
with a hash of their source, checked on every hit. Nothing here imports SymPy.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import re
import stat
import sys
import tempfile
import types
from pathlib import Path

FORMAT = 1
_VERSIONS: str | None = None


def directory() -> Path | None:
    """The cache directory, or None when caching is off or the directory is unsafe.

    ``$SYMDIFF_CACHE_DIR`` (``off`` disables the cache), else the user cache directory
    (``$XDG_CACHE_HOME/symdiff`` or ``~/.cache/symdiff`` on Linux, via platformdirs).
    """
    chosen = os.environ.get("SYMDIFF_CACHE_DIR") or None  # empty: as if unset
    if chosen is not None and chosen.strip().lower() in ("off", "0", "false", "no"):
        return None
    if chosen is None:
        try:
            import platformdirs

            chosen = platformdirs.user_cache_dir("symdiff")
        except ImportError:  # pragma: no cover - platformdirs is a dependency
            base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
            chosen = os.path.join(base, "symdiff")
    path = Path(chosen)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError:
        return None
    if not _private(info):
        return None
    return path


def _private(info) -> bool:
    # A directory others can write to could be fed source that we would run: refuse it.
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def versions() -> str:
    """The versions a cached gradient depends on (read without importing SymPy)."""
    global _VERSIONS
    if _VERSIONS is None:
        import numpy

        from . import __version__

        # symdiff's own files too: a development checkout changes without a new version.
        own = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                     for p in Path(__file__).parent.glob("*.py"))
        _VERSIONS = (f"symdiff={__version__};python={sys.version};numpy={numpy.__version__};"
                     f"sympy={_sympy_version()};files={hashlib.sha256(repr(own).encode()).hexdigest()}")
    return _VERSIONS


def _sympy_version() -> str:
    # Read from SymPy's release.py: importing SymPy (or importlib.metadata) to learn its
    # version would cost a cache hit most of its time.
    spec = importlib.util.find_spec("sympy")
    if spec is None or not spec.origin:
        return "?"
    try:
        text = (Path(spec.origin).parent / "release.py").read_text()
    except OSError:
        return "?"
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    return match.group(1) if match else "?"


def source_hash(fn) -> str | None:
    """A hash of a function's source text and where it is, or None without source."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    code = getattr(fn, "__code__", None)
    # Where the code came from, to the column: two lambdas on one line differ here.
    spots = sorted({p for p in code.co_positions() if None not in p}) if code else []
    where = f"{inspect.getsourcefile(fn)}:{start}:{getattr(fn, '__qualname__', '')}:{spots}"
    return hashlib.sha256((where + "\n" + "".join(lines)).encode()).hexdigest()


def identity(obj) -> str | None:
    """What a called object is, to tell whether a name still means it: the source of a
    user's function, the qualified name of a library's; None if it cannot be told."""
    if isinstance(obj, types.FunctionType):
        # A function's source (a notebook cell's too); without source, nothing to compare.
        digest = source_hash(obj)
        return None if digest is None else "source:" + digest
    module = getattr(obj, "__module__", None) or type(obj).__module__
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return f"{module}.{name}" if module and name else None


def key(fn, options) -> str | None:
    """The cache key of ``fn``'s gradient with ``options``, or None if it has no source."""
    text = source_hash(fn)
    if text is None:
        return None
    return hashlib.sha256(f"{text}\n{options!r}\n{versions()}".encode()).hexdigest()


def _path(root: Path, k: str) -> Path:
    return root / k[:2] / f"{k}.json"


def load(fn, options) -> dict | None:
    """The cached entry for ``fn`` and ``options``, or None (off, missing, corrupt, stale)."""
    root = directory()
    k = key(fn, options) if root is not None else None
    if k is None:
        return None
    try:
        entry = json.loads(_path(root, k).read_text())
    except (OSError, ValueError):
        return None
    if not _valid(entry):
        return None
    return entry


def _valid(entry) -> bool:
    try:
        return (entry["format"] == FORMAT and isinstance(entry["source"], str)
                and isinstance(entry["name"], str) and isinstance(entry["np_alias"], str)
                and all(isinstance(n, str) and isinstance(w, dict) for n, w in entry["names"])
                and all(isinstance(n, str) and isinstance(w, dict) for n, w in entry["data"])
                and all(isinstance(w, dict) and isinstance(n, str) and isinstance(h, str)
                        for w, n, h in entry["helpers"]))
    except (KeyError, TypeError, ValueError):
        return False


def store(fn, options, entry: dict) -> None:
    """Write ``entry`` for ``fn`` and ``options``: atomically, privately; never raises."""
    root = directory()
    k = key(fn, options) if root is not None else None
    if k is None:
        return
    path = _path(root, k)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"format": FORMAT, **entry}, f)
            os.replace(tmp, path)  # readers see the old entry or the new one, never half
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a cache that cannot be written is only a slower cache


def where(container, fn=None) -> dict:
    """How to find a name again: in ``fn``'s own globals, in a module's globals (by module
    name), or in ``fn``'s closure."""
    if fn is not None and container is getattr(fn, "__globals__", None):
        return {"own": True}  # not by name: __main__ today may be another script tomorrow
    if isinstance(container, dict):
        return {"module": container.get("__name__")}
    return {"closure": True}


def resolve(fn, place: dict, name: str):
    """The dict or cell that ``place`` (from ``where``) means for ``fn`` now, or None."""
    if place.get("closure"):
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
        return cells.get(name)
    if place.get("own"):
        return fn.__globals__
    module = place.get("module")
    if module == "__main__":
        return None  # another program's __main__ now: not what the entry meant
    if fn.__globals__.get("__name__") == module:
        return fn.__globals__
    loaded = sys.modules.get(module) if isinstance(module, str) else None
    return vars(loaded) if loaded is not None else None


def entries(root: Path | None = None):
    """Every entry file in the cache directory."""
    root = root or directory()
    return sorted(root.glob("*/*.json")) if root is not None else []


def info() -> str:
    """A summary for ``symdiff cache info``: where, how many entries, how large."""
    root = directory()
    if root is None:
        why = "off (SYMDIFF_CACHE_DIR=off)" if os.environ.get(
            "SYMDIFF_CACHE_DIR", "").strip().lower() in ("off", "0", "false", "no") else \
            "unusable (not private to this user, or cannot be created)"
        return f"symdiff cache: {why}"
    files = entries(root)
    size = sum(f.stat().st_size for f in files)
    return f"symdiff cache: {root}\n{len(files)} entries, {size} bytes"


def clear() -> int:
    """Remove every entry; returns how many were removed."""
    removed = 0
    for f in entries():
        try:
            f.unlink()
            removed += 1
        except OSError:
            pass
    return removed
