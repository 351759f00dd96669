"""A function and options -> its generated gradient's source on disk, as plain JSON text.

An entry holds the source and, for each free name of the source, where to find it again
(the module whose globals hold it, or the closure); never a pickle, so whoever can write
the cache cannot run code through anything but the Python source it stores. The key
hashes the source that is differentiated (its file, line and columns too), the options
and the versions of symdiff, Python, NumPy and SymPy; each entry also lists the helpers
the gradient inlined with a hash of their source, checked on every hit. The generated
source is also kept as a ``.py`` file, for tracebacks and debuggers. Nothing here imports
SymPy.

symdiff writes only into folders it made and marked (``CACHEDIR.TAG``), and reads only
files owned by the user that no one else can write; ``clear`` removes only what it wrote.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import linecache
import os
import re
import stat
import sys
import tempfile
import time
import tokenize
import types
from pathlib import Path

FORMAT = 2
_VERSIONS: str | None = None
# Written into every folder symdiff makes: only folders holding it are written to or
# cleared, so that SYMDIFF_CACHE_DIR may point at a folder of the user's own.
MARKER = "CACHEDIR.TAG"
_MARKER_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This folder was made by symdiff for its cache of generated gradients.\n"
                "# 'symdiff cache clear' removes only the files symdiff wrote here.\n")
_SHARD = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")
_CODE = re.compile(r"\w+-[0-9a-f]{16}\.py")
_TEMP = re.compile(r"\.tmp-\w+\.(json|py)")  # what store and code_file write first
_ABANDONED = 3600  # seconds after which a temporary file's writer is surely gone
_LARGEST = 64 << 20  # bytes: anything larger is not an entry symdiff wrote


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
    path = Path(os.path.expanduser(chosen)).absolute()  # tracebacks name files under it
    if not _make(path, parents=True):
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    if not (stat.S_ISDIR(info.st_mode) and _private(info)):
        return None
    return path


def _private(info) -> bool:
    # A folder or file others can write to could be fed source that we would run: refuse it.
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def _mark(folder: Path) -> None:
    with open(folder / MARKER, "x") as f:
        f.write(_MARKER_TEXT)


def _make(folder: Path, parents: bool = False) -> bool:
    """Make ``folder``, private and marked as symdiff's; False if that failed (one that
    exists already is fine here: callers check whose it is)."""
    try:
        folder.mkdir(mode=0o700, parents=parents)
        _mark(folder)
    except FileExistsError:
        pass
    except OSError:
        return False
    return True


def _shard(root: Path, name: str, create: bool = False) -> Path | None:
    """The folder ``root/name`` if symdiff made it and only this user can write it."""
    path = root / name
    if create and not _make(path):
        return None
    try:
        info = os.lstat(path)  # a symlink is not a folder symdiff made
        marker = os.lstat(path / MARKER)
    except OSError:
        return None
    if not (stat.S_ISDIR(info.st_mode) and _private(info) and stat.S_ISREG(marker.st_mode)):
        return None
    return path


def _shards(root: Path):
    """The folders symdiff made directly under ``root`` (no deeper: it never makes any)."""
    try:
        names = sorted(e.name for e in os.scandir(root) if _SHARD.fullmatch(e.name))
    except OSError:
        return []
    return [s for s in (_shard(root, n) for n in names) if s is not None]


def _read(path: Path) -> bytes | None:
    """The bytes of a regular file owned by this user that no one else can write, or None.

    Never follows a symlink, never waits on a FIFO or device, never reads a huge file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and _private(info)) or info.st_size > _LARGEST:
            return None
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > _LARGEST:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write(folder: Path, name: str, text: str) -> Path | None:
    """Write ``text`` to ``folder/name`` atomically and privately; the path, or None."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=Path(name).suffix)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, folder / name)  # readers see the old file or the new one, never half
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return None  # a cache that cannot be written is only a slower cache
    return folder / name


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
    """A hash of a function's source text and where it is, or None without source.

    The source of ``fn``'s own code, which is what symdiff differentiates: not the
    function a ``functools.wraps`` wrapper names in ``__wrapped__``, which
    ``inspect.getsourcelines(fn)`` would follow.
    """
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    # Read as parse reads it (inspect.getsourcelines(code) would search every module for
    # the code's own: most of a cache hit's time).
    filename, start = code.co_filename, code.co_firstlineno
    linecache.checkcache(filename)  # a file edited since it was read: read it again
    try:
        lines = inspect.getblock(
            linecache.getlines(filename, getattr(fn, "__globals__", None))[start - 1:])
    except (SyntaxError, ValueError, tokenize.TokenError):  # not Python there any more
        return None
    if not lines:
        return None
    # Where the code came from, to the column: two lambdas on one line differ here.
    spots = sorted({p for p in code.co_positions() if None not in p})
    where = f"{filename}:{start}:{getattr(fn, '__qualname__', '')}:{spots}"
    return hashlib.sha256((where + "\n" + "".join(lines)).encode()).hexdigest()


def identity(obj) -> str | None:
    """What a called object is, to tell whether a name still means it: the source of a
    user's function, the qualified name of a library's; None if it cannot be told."""
    if isinstance(obj, types.FunctionType):
        # A function's source (a notebook cell's too); without source, nothing to compare.
        digest = source_hash(obj)
        if digest is None:
            return None
        # Numbers a helper's defaults hold are written into its gradient (c=K made 5.0).
        # (Arrays are not: a helper's data default is refused, and a repr elides.)
        defaults = [v for v in obj.__defaults__ or () if _scalar(v)] + sorted(
            (k, v) for k, v in (obj.__kwdefaults__ or {}).items() if _scalar(v))
        return f"source:{digest}" + (f":defaults:{defaults!r}" if defaults else "")
    module = getattr(obj, "__module__", None) or type(obj).__module__
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return f"{module}.{name}" if module and name else None


def _scalar(value) -> bool:
    """A number, string or None, a NumPy scalar too (NumPy is not imported here)."""
    return isinstance(value, (int, float, complex, str, type(None))) or (
        type(value).__module__ == "numpy" and getattr(value, "shape", None) == ())


def key(fn, options) -> str | None:
    """The cache key of ``fn``'s gradient with ``options``, or None if it has no source."""
    text = source_hash(fn)
    if text is None:
        return None
    return hashlib.sha256(f"{text}\n{options!r}\n{versions()}".encode()).hexdigest()


def load(fn, options) -> dict | None:
    """The cached entry for ``fn`` and ``options``, or None (off, missing, corrupt, stale,
    built for another key, or in a folder or file that others could have written)."""
    root = directory()
    k = key(fn, options) if root is not None else None
    if k is None:
        return None
    shard = _shard(root, k[:2])
    data = _read(shard / f"{k}.json") if shard is not None else None
    if data is None:
        return None
    try:
        entry = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        return None
    return entry if _valid(entry, k) else None


def _valid(entry, k: str) -> bool:
    try:
        return (entry["format"] == FORMAT and entry["key"] == k
                and isinstance(entry["source"], str)
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
    shard = _shard(root, k[:2], create=True) if k is not None else None
    if shard is None:
        return
    _sweep(shard)
    # The key it was built for: an entry copied to another key's name is not trusted.
    _write(shard, f"{k}.json", json.dumps({"format": FORMAT, "key": k, **entry}))


def _sweep(shard: Path) -> None:
    """Remove temporary files whose writer was killed before it could rename them."""
    old = time.time() - _ABANDONED
    try:
        for e in os.scandir(shard):
            if _TEMP.fullmatch(e.name) and e.is_file(follow_symlinks=False) \
                    and e.stat(follow_symlinks=False).st_mtime < old:
                os.unlink(e.path)
    except OSError:
        pass


_SCRATCH: list = []  # the private temporary folder of this process, once made


def code_file(name: str, digest: str, source: str) -> str | None:
    """The path of a private file holding exactly ``source`` (``name``-``digest``.py): in
    the cache, or in a temporary folder of this process's when the cache is off; None if
    none can be written. Tracebacks and debuggers read generated lines from it."""
    filename = f"{name}-{digest[:16]}.py"
    root = directory()
    folder = _shard(root, digest[:2], create=True) if root is not None else None
    if folder is None:
        folder = _scratch()
        if folder is None:
            return None
    path = folder / filename
    if _read(path) != source.encode("utf-8"):  # missing, or not what it must hold
        path = _write(folder, filename, source)
    return str(path) if path is not None else None


def _scratch() -> Path | None:
    if not _SCRATCH:
        try:
            made = tempfile.mkdtemp(prefix="symdiff-")  # private to this user
        except OSError:
            return None
        import atexit
        import shutil

        pid = os.getpid()  # a forked child must not remove its parent's folder
        atexit.register(lambda: os.getpid() == pid and shutil.rmtree(made, ignore_errors=True))
        _SCRATCH.append(Path(made))
    return _SCRATCH[0]


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


def entries(root: Path | None = None) -> list[Path]:
    """Every entry file in the cache directory (by name, in the folders symdiff made)."""
    root = root or directory()
    return _files(root, _ENTRY) if root is not None else []


def _files(root: Path, pattern) -> list[Path]:
    found = []
    for shard in _shards(root):
        try:
            found += [Path(e.path) for e in os.scandir(shard)
                      if pattern.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
        except OSError:
            pass
    return sorted(found)


def info() -> str:
    """A summary for ``symdiff cache info``: where, how many entries, how large."""
    root = directory()
    if root is None:
        why = "off (SYMDIFF_CACHE_DIR=off)" if os.environ.get(
            "SYMDIFF_CACHE_DIR", "").strip().lower() in ("off", "0", "false", "no") else \
            "unusable (not private to this user, or cannot be created)"
        return f"symdiff cache: {why}"
    files = entries(root)
    size = sum(f.stat().st_size for f in files + _files(root, _CODE))
    text = f"symdiff cache: {root}\n{len(files)} entries, {size} bytes"
    temps = _files(root, _TEMP)
    if temps:
        text += f"\n{len(temps)} unfinished writes (removed by 'symdiff cache clear')"
    return text


def clear() -> int:
    """Remove what symdiff wrote: entries it recognises by name and content, generated
    source files, unfinished writes; only in the folders it made, never deeper. Returns
    how many entries were removed."""
    root = directory()
    if root is None:
        return 0
    removed = 0
    for f in entries(root):
        entry = _read(f)
        try:
            ours = json.loads(entry)["key"] == f.stem if entry is not None else False
        except (ValueError, RecursionError, TypeError, KeyError):
            ours = False
        if ours and _unlink(f):
            removed += 1
    for f in _files(root, _CODE) + _files(root, _TEMP):
        _unlink(f)
    return removed


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except OSError:
        return False
    return True
