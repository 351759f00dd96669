"""The disk cache: hits without SymPy, rebuilds when anything in the key changes, safety."""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from symdiff import cache

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
    import math
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
    import importlib.util
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
