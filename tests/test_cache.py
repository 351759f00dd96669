"""The disk cache: hits without SymPy, rebuilds when anything in the key changes, safety."""

import importlib
import importlib.util
import json
import linecache
import math
import os
import stat
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest
from gradcheck import live, load, unique, write

from symdiff import cache, grad
from symdiff.cli import main

MODULE = """
import numpy as np

SCALE = 3.0

def helper(u):
    return np.sin(u) * SCALE

def f(x, y):
    z = helper(x) * y
    for i in range(2):
        z = z + x ** 2
    return z
"""

RUN = """
import sys
sys.path.insert(0, sys.argv[1])
import mod
from symdiff import grad
g = grad(mod.f, wrt=(0, 1))
print(repr(g(0.5, 2.0)))
print("sympy" in sys.modules)
"""


def run(tmp_path, cache_dir, *extra_env):
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir))
    env.update(extra_env)
    out = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], env=env,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return eval(out[0]), out[1] == "True"  # noqa: S307 - our own child's repr of floats


@pytest.fixture
def project(tmp_path):
    (tmp_path / "mod.py").write_text(MODULE)
    cache_dir = tmp_path / "cache"
    return tmp_path, cache_dir


def expected(scale=3.0, power=2):
    x, y = 0.5, 2.0
    return (math.cos(x) * scale * y + 2 * power * x ** (power - 1),
            math.sin(x) * scale)


def test_a_hit_in_a_new_process_does_not_import_sympy(project):
    tmp_path, cache_dir = project
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected()) and sympy_loaded  # built: SymPy was needed
    assert len(cache.entries(cache_dir)) == 1
    grads2, sympy_loaded2 = run(tmp_path, cache_dir)
    assert grads2 == grads and not sympy_loaded2


def test_entries_are_plain_private_json(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    data = json.loads(entry.read_text())
    assert data["source"].startswith("def grad_f(x, y):")
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.stat().st_mode) & 0o077 == 0


def test_changing_a_called_helper_rebuilds(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (tmp_path / "mod.py").write_text(MODULE.replace("np.sin(u) * SCALE", "np.sin(u) * 5.0"))
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected(scale=5.0)) and sympy_loaded


STATIC = MODULE.replace("""def helper(u):
    return np.sin(u) * SCALE
""", """class Ops:
    @staticmethod
    def helper(u):
        return np.sin(u) * SCALE
""").replace("z = helper(x) * y", "z = Ops.helper(x) * y")


def test_changing_a_helper_called_through_a_class_rebuilds(project):
    # Ops.helper is inlined as a function found by its path: the entry records it, and a
    # later process compares it (it used to return the old gradient).
    tmp_path, cache_dir = project
    (tmp_path / "mod.py").write_text(STATIC)
    assert run(tmp_path, cache_dir)[0] == pytest.approx(expected())
    assert run(tmp_path, cache_dir) == (pytest.approx(expected()), False)  # a hit
    (tmp_path / "mod.py").write_text(STATIC.replace("np.sin(u) * SCALE", "np.sin(u) * 5.0"))
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected(scale=5.0)) and sympy_loaded


def test_a_helper_rebound_on_its_class_rebuilds(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "off")
    (tmp_path / "ops_mod.py").write_text(STATIC)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("ops_mod")
    finally:
        sys.path.remove(str(tmp_path))
    g = grad(mod.f, wrt=(0, 1))
    assert g(0.5, 2.0) == pytest.approx(expected())

    def cubed(u):
        return u ** 3

    mod.Ops.helper = staticmethod(cubed)
    assert g(0.5, 2.0) == pytest.approx((3 * 0.25 * 2.0 + 4 * 0.5, 0.125))


def test_changing_the_function_rebuilds(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (tmp_path / "mod.py").write_text(MODULE.replace("x ** 2", "x ** 3"))
    grads, _ = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected(power=3))
    assert len(cache.entries(cache_dir)) == 2


def test_module_data_is_read_at_call_time_on_a_hit(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    code = RUN.replace("import mod\n", "import mod\nmod.SCALE = 7.0\n")
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert eval(out[0]) == pytest.approx(expected(scale=7.0))  # noqa: S307
    assert out[1] == "False"


def test_a_corrupt_entry_is_rebuilt_not_trusted(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    for garbage in ("{not json", json.dumps({"format": 1, "source": 3}),
                    json.dumps({**json.loads(entry.read_text() if entry.exists() else "{}"),
                                "source": "def grad_f(:\n"})):
        entry.write_text(garbage)
        grads, sympy_loaded = run(tmp_path, cache_dir)
        assert grads == pytest.approx(expected()) and sympy_loaded
        assert json.loads(entry.read_text())["source"].startswith("def grad_f")


def test_off_switch(project):
    tmp_path, cache_dir = project
    grads, _ = run(tmp_path, "off")
    assert grads == pytest.approx(expected())
    assert not cache_dir.exists() and not (tmp_path / "off").exists()


def test_a_directory_others_can_write_is_not_used(project):
    tmp_path, cache_dir = project
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, 0o777)
    grads, _ = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected())
    assert cache.entries(cache_dir) == []


def test_an_unwritable_directory_only_makes_the_cache_slower(project, monkeypatch):
    tmp_path, cache_dir = project
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, 0o500)  # read-only (root can still write: so also refuse mkstemp)

    def refuse(*a, **k):
        raise PermissionError("read-only")

    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(cache.tempfile, "mkstemp", refuse)
    spec = importlib.util.spec_from_file_location("mod_ro", tmp_path / "mod.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from symdiff import grad

    assert grad(mod.f, wrt=(0, 1))(0.5, 2.0) == pytest.approx(expected())
    os.chmod(cache_dir, 0o700)


def test_several_processes_building_one_key_at_once(project):
    tmp_path, cache_dir = project
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir))
    procs = [subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(eval(o.split("\n")[0]) == pytest.approx(expected()) for o in outs)  # noqa: S307
    (entry,) = cache.entries(cache_dir)
    assert json.loads(entry.read_text())["source"].startswith("def grad_f")
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".tmp-")]


def test_info_and_clear(project, monkeypatch):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(cache_dir))
    assert textwrap.dedent(cache.info()).startswith(f"symdiff cache: {cache_dir}\n1 entries")
    assert cache.clear() == 1 and cache.entries(cache_dir) == []
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "off")
    assert cache.info() == "symdiff cache: off (SYMDIFF_CACHE_DIR=off)"


# --- the key covers what was differentiated ---

WRAPPED = """
import functools

import numpy as np

def twice(fn):
    @functools.wraps(fn)
    def wrapper(x, y):
        return fn(x, y) * 2.0
    return wrapper

@twice
def f(x, y):
    return np.sin(x) * y
"""


def test_editing_a_functools_wraps_wrapper_rebuilds(project):
    # inspect.getsourcelines follows __wrapped__ to the inner f; what is differentiated is
    # the wrapper, so its source must be in the key.
    tmp_path, cache_dir = project
    (tmp_path / "mod.py").write_text(WRAPPED)
    grads, _ = run(tmp_path, cache_dir)
    assert grads == pytest.approx((2.0 * 2.0 * 0.87758256189, 2.0 * 0.4794255386))
    (tmp_path / "mod.py").write_text(WRAPPED.replace("* 2.0", "* 5.0"))
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx((5.0 * 2.0 * 0.87758256189, 5.0 * 0.4794255386))
    assert sympy_loaded


HELPER_DEFAULT = """
K = 5.0

def h(x, c=K):
    return x * c

def f(x, y):
    return h(x) * y
"""


def test_a_helper_default_changed_between_processes_rebuilds(project):
    # h's default is the number K held at its def, written into the gradient: a new K
    # (the source of h and f unchanged) is a new gradient.
    tmp_path, cache_dir = project
    (tmp_path / "mod.py").write_text(HELPER_DEFAULT)
    grads, _ = run(tmp_path, cache_dir)
    assert grads == pytest.approx((5.0 * 2.0, 5.0 * 0.5))
    (tmp_path / "mod.py").write_text(HELPER_DEFAULT.replace("K = 5.0", "K = 7.0"))
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx((7.0 * 2.0, 7.0 * 0.5)) and sympy_loaded


# --- generated code in tracebacks and debuggers ---

FAILING = """
import numpy as np

def loss(x):
    y = np.sqrt(x)
    assert x > 0, "x must be positive"
    return y * 2.0
"""

CRASH = """
import sys
sys.path.insert(0, sys.argv[1])
import mod
from symdiff import grad
g = grad(mod.loss)
if sys.argv[2] == "print_exc":
    import traceback
    try:
        g(-1.0)
    except AssertionError:
        traceback.print_exc()
else:
    g(-1.0)  # uncaught: CPython's own printer, which reads files, not linecache
"""


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("how", ["uncaught", "print_exc"])
def test_a_traceback_shows_the_generated_line(project, cached, how):
    tmp_path, cache_dir = project
    (tmp_path / "mod.py").write_text(FAILING)
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir) if cached else "off")
    for _ in range(2):  # built, then (cached) from the disk cache
        done = subprocess.run([sys.executable, "-c", CRASH, str(tmp_path), how], env=env,
                              capture_output=True, text=True, timeout=120)
        assert "AssertionError: x must be positive" in done.stderr
        lines = done.stderr.splitlines()
        (at,) = [i for i, line in enumerate(lines) if line.endswith(", in grad_loss")]
        assert "grad_loss-" in lines[at]
        assert lines[at + 1].strip() == "assert x > 0, 'x must be positive'  # line 6"
    generated = lines[at].split('"')[1]
    if cached:
        assert generated.startswith(str(cache_dir))
        assert stat.S_IMODE(os.stat(generated).st_mode) & 0o077 == 0
    else:
        assert not cache_dir.exists() and not os.path.exists(generated)  # removed at exit


def test_pdb_runcall_steps_through_the_generated_lines(project):
    tmp_path, cache_dir = project
    script = RUN.replace("print(repr(g(0.5, 2.0)))",
                         "import pdb\nprint(pdb.runcall(g.__wrapped__, 0.5, 2.0))")
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir))
    for _ in range(2):  # built, then from the disk cache
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env,
                              input="next\nnext\nlist\ncontinue\n", capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        frame = done.stdout.splitlines()[0]  # where pdb stops: a real file, in the cache
        assert frame.startswith(f"> {cache_dir}") and frame.endswith(".py(7)grad_f()")
        assert "-> u = x  # line 10\n" in done.stdout
        assert "-> _ret = np.sin(u) * SCALE  # line 7 of helper\n" in done.stdout
        assert " 9  ->\t    z = _ret * y  # line 10\n" in done.stdout  # 'list'
        assert str(expected()[0])[:8] in done.stdout


# --- what clear may remove ---

def test_clear_removes_only_what_symdiff_wrote(project, monkeypatch, capsys):
    from symdiff.cli import main

    tmp_path, cache_dir = project
    # (symdiff's entry goes into the shard its key names: learnt first elsewhere, so that
    # the user's folders named like shards are others: symdiff never writes into theirs)
    run(tmp_path, tmp_path / "scratch")
    (scratch,) = cache.entries(tmp_path / "scratch")
    ab, cd, ef, nine = [s for s in ("ab", "cd", "ef", "9a", "9b") if s != scratch.parent.name][:4]
    # The user points the cache at a folder of theirs, holding JSON files of their own.
    cache_dir.mkdir()
    theirs = [cache_dir / "settings.json", cache_dir / "config" / "settings.json",
              cache_dir / ab / "index.json", cache_dir / cd / ("0" * 64 + ".json"),
              cache_dir / ef / "deep" / ("1" * 64 + ".json"),
              # a folder of theirs holding only names like symdiff's entries and writes
              cache_dir / nine / (nine + "2" * 62 + ".json"),
              cache_dir / nine / ".tmp-notes.json"]
    for f in theirs:
        f.parent.mkdir(exist_ok=True, parents=True)
        f.write_text(json.dumps({"format": 2, "key": f.stem}))
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(cache_dir))
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == "removed 1 entries\n"
    assert not entry.exists() and all(f.exists() for f in theirs)
    assert not (cache_dir / nine / cache.MARKER).exists()  # not taken for one of ours
    assert not [f for f in entry.parent.iterdir() if f.name != cache.MARKER]  # code file too


def test_an_entry_in_a_folder_symdiff_did_not_make_is_not_read(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    (entry.parent / cache.MARKER).unlink()
    assert cache.entries(cache_dir) == []
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected()) and sympy_loaded


# --- entries that must not be trusted ---

OTHER = MODULE + """
def g(x, y):
    return x * y * 100.0
"""


def _swap_in_g(tmp_path, cache_dir, how):
    """Build f's and g's entries, then put g's in f's place (copied or symlinked)."""
    (tmp_path / "mod.py").write_text(OTHER)
    run(tmp_path, cache_dir)
    subprocess.run([sys.executable, "-c", RUN.replace("mod.f", "mod.g"), str(tmp_path)],
                   env=dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir)), check=True)
    f_entry, g_entry = sorted(cache.entries(cache_dir),
                              key=lambda e: "def grad_g" in e.read_text())
    f_entry.unlink()
    if how == "copied":
        f_entry.write_text(g_entry.read_text())
        f_entry.chmod(0o600)
    else:
        f_entry.symlink_to(g_entry)


@pytest.mark.parametrize("how", ["copied", "symlinked"])
def test_an_entry_of_another_key_is_rebuilt(project, how):
    tmp_path, cache_dir = project
    _swap_in_g(tmp_path, cache_dir, how)
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected()) and sympy_loaded


def _tamper(cache_dir, change, mode=None):
    """Edit the one entry's source in place (a wrong gradient if it were trusted)."""
    (entry,) = cache.entries(cache_dir)
    data = json.loads(entry.read_text())
    data["source"] = change(data["source"])
    entry.write_text(json.dumps(data))
    if mode is not None:
        entry.chmod(mode)
    return entry


def test_a_tampered_private_entry_is_run(project):
    # The control for the tests below: the same edit in a private entry is trusted.
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    _tamper(cache_dir, lambda s: s.replace("    return (", "    return (7.0, 7.0) or ("))
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == (7.0, 7.0) and not sympy_loaded


@pytest.mark.parametrize("where", ["entry", "folder"])
def test_an_entry_others_could_have_written_is_rebuilt(project, where):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    entry = _tamper(cache_dir, lambda s: s.replace("    return (", "    return (7.0, 7.0) or ("))
    (entry if where == "entry" else entry.parent).chmod(0o666 if where == "entry" else 0o777)
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected()) and sympy_loaded


def test_an_entry_that_exits_while_loading_is_rebuilt(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    _tamper(cache_dir, lambda s: "raise SystemExit(3)\n" + s)
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected()) and sympy_loaded


def test_a_deeply_nested_entry_is_rebuilt(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    entry.write_text("[" * 100_000 + "]" * 100_000)
    grads, sympy_loaded = run(tmp_path, cache_dir)
    assert grads == pytest.approx(expected()) and sympy_loaded


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_an_entrys_place_does_not_block(project):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    entry.unlink()
    os.mkfifo(entry, 0o600)
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert eval(done.stdout.split("\n")[0]) == pytest.approx(expected())  # noqa: S307


# --- unfinished writes, and where the cache is ---

def test_unfinished_writes_are_not_entries_and_are_swept(project, monkeypatch):
    tmp_path, cache_dir = project
    run(tmp_path, cache_dir)
    (entry,) = cache.entries(cache_dir)
    old, new = entry.parent / ".tmp-abcd1234.json", entry.parent / ".tmp-efgh5678.json"
    for f in (old, new):
        f.write_text('{"format": 2, "sou')  # a writer killed mid-write
    os.utime(old, (1e9, 1e9))
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(cache_dir))
    assert cache.info().splitlines()[1:] == [
        f"1 entries, {entry.stat().st_size + len(expected_code(entry))} bytes",
        "2 unfinished writes (removed by 'symdiff cache clear')"]
    entry.unlink()
    run(tmp_path, cache_dir)  # writing an entry sweeps what its folder's dead writers left
    assert not old.exists() and new.exists()  # (a live writer may still rename its own)
    cache.clear()
    assert not new.exists()


def expected_code(entry):
    return json.loads(entry.read_text())["source"].encode()


def test_a_cache_dir_under_home_is_expanded(project):
    tmp_path, _ = project
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, SYMDIFF_CACHE_DIR="~/symdiff-cache", HOME=str(home))
    subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], env=env, cwd=tmp_path,
                   check=True, capture_output=True)
    assert len(cache.entries(home / "symdiff-cache")) == 1
    assert not (tmp_path / "~").exists()


def test_disk_cache_closures_of_different_functions(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path))
    m = load("""
import numpy as np
def make(act):
    def f(x):
        return np.sum(act(x))
    return f
""")
    x = np.array([0.3, 0.7])
    np.testing.assert_allclose(grad(m.make(np.tanh))(x), 1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(grad(m.make(np.sin))(x), np.cos(x))


def test_disk_cache_closures_of_different_helpers(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path))
    m = load("""
import numpy as np
def make(h):
    def f(x):
        return np.sum(h(x))
    return f
def square(u):
    return u * u
def cube(u):
    return u * u * u
""")
    x = np.array([0.3, 0.7])
    np.testing.assert_allclose(grad(m.make(m.square))(x), 2 * x)
    np.testing.assert_allclose(grad(m.make(m.cube))(x), 3 * x ** 2)


# --- caches ---


def test_cache_dir_that_is_a_file_turns_the_cache_off(tmp_path, monkeypatch, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(not_a_dir))
    m = live(write(tmp_path, "def f(x):\n    return x ** 3\n"))
    assert grad(m.f)(2.0) == pytest.approx(12.0)
    assert not_a_dir.read_text() == "x"
    assert main(["cache", "info"]) == 0
    assert "unusable" in capsys.readouterr().out


def test_cache_dir_symlinked_and_very_long(tmp_path, monkeypatch):
    target = tmp_path / "real"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(link))
    m = live(write(tmp_path, "def f(x):\n    return x ** 3\n"))
    assert grad(m.f)(2.0) == pytest.approx(12.0)
    assert len(cache.entries(target)) == 1
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / ("d" * 250) / ("e" * 250)
                                                 / ("f" * 4000)))
    m = live(write(tmp_path, "def f(x):\n    return x ** 4\n", name="m2.py"))
    assert grad(m.f)(2.0) == pytest.approx(32.0)


def test_an_entry_that_is_a_directory_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    path = write(tmp_path, "def f(x):\n    return x ** 3\n")
    m = live(path)
    k = cache.key(m.f, (("x",), False, False))
    entry = tmp_path / "c" / k[:2] / f"{k}.json"
    entry.mkdir(parents=True)
    assert grad(m.f, wrt="x")(2.0) == pytest.approx(12.0)


def test_closures_over_different_library_functions_share_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    m = live(write(tmp_path, """\
        def make(act):
            def f(x):
                return act(x) * 2.0
            return f
        """))
    x = 0.5
    assert grad(m.make(np.sin))(x) == pytest.approx(2 * np.cos(x))
    assert grad(m.make(np.tanh))(x) == pytest.approx(2 * (1 - np.tanh(x) ** 2))


def test_a_helper_redefined_in_a_notebook_cell_rebuilds(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    tag = uuid.uuid4().hex[:8]
    namespace = {"__name__": "__main__"}

    def cell(number, source):
        name = f"<ipython-input-{number}-{tag}>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        exec(compile(source, name, "exec"), namespace)

    cell(1, "def helper(u):\n    return u * 2.0\n")
    cell(2, "def f(x):\n    return helper(x) * x\n")
    assert grad(namespace["f"])(1.0) == pytest.approx(4.0)
    cell(3, "def helper(u):\n    return u * 5.0\n")
    assert grad(namespace["f"])(1.0) == pytest.approx(10.0)


def test_the_memory_cache_notices_a_replaced_code_object(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "off")
    m = live(write(tmp_path, """\
        def f(x):
            return x * 2.0

        def cube(x):
            return x ** 3
        """))
    assert grad(m.f)(2.0) == pytest.approx(2.0)
    m.f.__code__ = m.cube.__code__
    assert m.f(2.0) == 8.0
    assert grad(m.f)(2.0) == pytest.approx(12.0)


def test_editing_and_reimporting_a_module_with_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "off")
    path = tmp_path / f"{unique('adv_edited')}.py"
    path.write_text("def f(x):\n    return x * 2.0\n")
    assert grad(live(str(path)).f)(1.0) == pytest.approx(2.0)
    path.write_text("def f(x):\n    return x * x * x\n")
    later = path.stat().st_mtime + 10
    os.utime(path, (later, later))
    m = live(str(path))
    assert m.f(2.0) == 8.0
    assert grad(m.f)(1.0) == pytest.approx(3.0)


def test_an_entry_built_under_main_is_not_resolved_in_another_main(tmp_path):
    (tmp_path / "adv_mainmod.py").write_text(textwrap.dedent("""\
        from symdiff import grad

        SCALE = 3.0

        def f(x):
            return x * SCALE

        if __name__ == "__main__":
            print(grad(f)(1.0))
        """))
    (tmp_path / "driver.py").write_text(textwrap.dedent("""\
        SCALE = 100.0
        import adv_mainmod
        from symdiff import grad
        print(grad(adv_mainmod.f)(1.0))
        """))
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(tmp_path / "c"))
    first = subprocess.run([sys.executable, "-m", "adv_mainmod"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and float(first.stdout) == 3.0, first.stderr
    second = subprocess.run([sys.executable, "driver.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert float(second.stdout) == 3.0


def test_an_empty_cache_dir_variable_does_not_cache_in_the_current_directory(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    monkeypatch.chdir(work)
    root = cache.directory()
    assert root is None or root.resolve() != work.resolve()
