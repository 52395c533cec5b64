"""Compiled work that lasts and holds up: archives on every backend (and fuzzed),
cache management, two processes sharing a cache, eight threads sharing an
Executable, and bad input at call time on every backend."""

import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import ArgumentError, LimitError, LoadError

from ..helpers import run_in_threads

BACKENDS = ["host", "llvm", "csource", "examplejson"]


def graph():
    """Multi-output graph with a constant, a host-only op (sqrt on csource), a DAG."""
    a, b = nbyoc.var("a", (6, 5)), nbyoc.var("b", (5,))
    t = a * b + nbyoc.const(np.linspace(0, 1, 5, dtype=np.float32))
    return nbyoc.function([a, b], [(t - b) * t, nbyoc.sum(t, axis=1), nbyoc.relu(t)])


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((6, 5)).astype(np.float32),
        rng.standard_normal(5).astype(np.float32),
    ]


@pytest.fixture(scope="module", params=BACKENDS)
def compiled(request):
    return nbyoc.compile(graph(), backend=request.param)


def expected(seed=0):
    return nbyoc.compile(graph(), backend="host")(*inputs(seed))


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# -- archives --------------------------------------------------------------------


def test_save_and_load_give_the_same_results(compiled, tmp_path):
    path = tmp_path / "model.nbyoc"
    compiled.save(path)
    loaded = nbyoc.load(path)
    assert loaded.backend == compiled.backend
    assert nbyoc.structural_equal(loaded.module, compiled.module)
    assert sorted(loaded.runtime_modules) == sorted(compiled.runtime_modules)
    assert_close(loaded(*inputs()), expected())


def test_an_archive_holds_only_data(tmp_path):
    path = tmp_path / "model.nbyoc"
    nbyoc.compile(graph(), backend="llvm").save(path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("manifest.json"))
    assert names[:2] == ["manifest.json", "module.json"] and "constants/0.npy" in names
    assert (
        manifest["format"] == "nbyoc-archive"
        and manifest["runtime_modules"][0]["type_key"] == "llvm"
    )
    assert not any(n.endswith((".py", ".pkl", ".so")) for n in names)


def rewrite(path, change):
    """Rewrite the archive at ``path`` with ``change(name, data) -> data or None (drop)``."""
    with zipfile.ZipFile(path) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            new = change(name, data)
            if new is not None:
                archive.writestr(name, new)


def manifest_edit(edit):
    def change(name, data):
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        edit(manifest)
        return json.dumps(manifest)

    return change


@pytest.mark.parametrize(
    "change,needle",
    [
        (manifest_edit(lambda m: m.update(version=2)), "format version 2"),
        (manifest_edit(lambda m: m.update(format="zip")), "not an nbyoc archive"),
        (manifest_edit(lambda m: m["runtime_modules"][0].update(type_key="tpu")), "no loader for module type 'tpu'; loadable here: "),
        (manifest_edit(lambda m: m["runtime_modules"].clear()), "no runtime module for llvm_0"),
        (lambda n, d: None if n == "module.json" else d, "no 'module.json'"),
        (lambda n, d: b"\x93NUMPY garbage" if n.endswith(".npy") else d, "not written by nbyoc"),
        (lambda n, d: d[:-5] if n == "module.json" else d, "not valid JSON"),
        (lambda n, d: d.replace(b"llvm", b"lvvm") if n.endswith(".bin") else d, "not a saved llvm module"),
    ],
)  # fmt: skip
def test_bad_archives_raise_load_error(tmp_path, change, needle):
    path = tmp_path / "model.nbyoc"
    nbyoc.compile(graph(), backend="llvm").save(path)
    rewrite(path, change)
    with pytest.raises(LoadError) as info:
        nbyoc.load(path)
    assert needle in str(info.value)


def test_pickled_constants_are_refused(tmp_path):
    path = tmp_path / "model.nbyoc"
    nbyoc.compile(graph(), backend="host").save(path)
    pickled = io.BytesIO()
    np.save(pickled, np.array([object()], dtype=object), allow_pickle=True)
    rewrite(path, lambda n, d: pickled.getvalue() if n.endswith(".npy") else d)
    with pytest.raises(LoadError, match="holds object elements"):
        nbyoc.load(path)


def test_missing_and_non_zip_files(tmp_path):
    with pytest.raises(LoadError, match="cannot read"):
        nbyoc.load(tmp_path / "absent.nbyoc")
    (tmp_path / "text.nbyoc").write_text("hello")
    with pytest.raises(LoadError, match="not a readable nbyoc archive"):
        nbyoc.load(tmp_path / "text.nbyoc")


@pytest.fixture(scope="module")
def archive_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "model.nbyoc"
    nbyoc.compile(graph(), backend="csource").save(path)
    return path.read_bytes()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzzed_archives_load_correctly_or_raise_load_error(archive_bytes, tmp_path, data):
    blob = bytearray(archive_bytes)
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            blob[data.draw(st.integers(0, len(blob) - 1))] ^= data.draw(st.integers(1, 255))
    path = tmp_path / "fuzzed.nbyoc"
    path.write_bytes(bytes(blob))
    try:
        loaded = nbyoc.load(path)
    except (LoadError, LimitError):  # a flipped size field may claim a bomb
        return
    assert_close(loaded(*inputs()), expected())


# -- the cache ----------------------------------------------------------------------


def test_cache_info_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(tmp_path / "cache"))
    assert nbyoc.cache.info()["entries"] == 0
    x = nbyoc.var("x", (4,))
    nbyoc.compile(nbyoc.function([x], x * 5.0 - 1.0), backend="csource")
    info = nbyoc.cache.info()
    assert (
        info["entries"] == 1 and info["bytes"] > 0 and info["directory"] == str(tmp_path / "cache")
    )
    assert nbyoc.cache.clear() == info["bytes"]
    assert nbyoc.cache.info() == {**info, "entries": 0, "bytes": 0}


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NBYOC_CACHE", "0")
    x = nbyoc.var("x", (4,))
    fn = nbyoc.compile(nbyoc.function([x], x * 6.0 - 1.0), backend="csource")
    np.testing.assert_array_equal(fn(np.ones(4, np.float32)), [5, 5, 5, 5])
    assert not (tmp_path / "cache").exists()
    assert nbyoc.cache.info()["enabled"] is False


TWO_PROCESSES = """
import sys, numpy as np, nbyoc
a, b = nbyoc.var("a", (64, 3)), nbyoc.var("b", (3,))
f = nbyoc.function([a, b], [nbyoc.exp(a * b) * b, nbyoc.sum(a * b, axis=0)])
fn = nbyoc.compile(f, backend=sys.argv[1])
x, y = np.linspace(0, 1, 192, dtype=np.float32).reshape(64, 3), np.ones(3, np.float32)
want = nbyoc.compile(f, backend="host")(x, y)
assert all(np.allclose(g, w, rtol=1e-5) for g, w in zip(fn(x, y), want))
print("ok")
"""


@pytest.mark.parametrize("backend", ["llvm", "csource"])
def test_two_processes_compiling_at_once_share_the_cache(tmp_path, backend):
    env = {**os.environ, "NBYOC_CACHE_DIR": str(tmp_path / "shared")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESSES, backend],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0 and out.strip() == "ok", err


# -- threads ------------------------------------------------------------------------


def test_eight_threads_share_an_executable(compiled):
    failures = []

    def worker(seed):
        want = expected(seed)
        for _ in range(25):
            got = compiled(*inputs(seed))
            if not all(np.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want)):
                failures.append(seed)

    run_in_threads(worker)
    assert failures == []


# -- bad input at call time ---------------------------------------------------------


@pytest.mark.parametrize(
    "args,error",
    [
        (lambda a, b: [a], ArgumentError),
        (lambda a, b: [a, b, b], ArgumentError),
        (lambda a, b: [a[:, :4], b], ArgumentError),
        (lambda a, b: [a.astype(np.float64), b], ArgumentError),
        (lambda a, b: [a.tolist(), b], ArgumentError),
        (lambda a, b: [np.float32(1), b], ArgumentError),
    ],
)
def test_bad_arguments_are_refused_on_every_backend(compiled, args, error):
    with pytest.raises(error):
        compiled(*args(*inputs()))


def test_strided_read_only_and_special_values_on_every_backend(compiled):
    a, b = inputs()
    a[0, 0], a[1, 1], a[2, 2] = np.nan, np.inf, -np.inf
    want = nbyoc.compile(graph(), backend="host")(a, b)
    strided = np.asfortranarray(a)
    frozen = b.copy()
    frozen.flags.writeable = False
    with np.errstate(all="ignore"):
        got = compiled(strided, frozen)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_size_and_0d_arrays_on_every_backend(backend):
    z, s = nbyoc.var("z", (0, 4)), nbyoc.var("s", ())
    f = nbyoc.function([z, s], [z * s + 1.0, nbyoc.exp(s) * 2.0])
    fn = nbyoc.compile(f, backend=backend)
    empty, scalar = fn(np.zeros((0, 4), np.float32), np.asarray(np.float32(1.5)))
    assert empty.shape == (0, 4) and scalar.shape == ()
    np.testing.assert_allclose(scalar, np.exp(np.float32(1.5)) * 2, rtol=1e-6)


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
def test_an_output_aliasing_an_input_is_refused_in_destination_passing(backend):
    x = nbyoc.var("x", (8,))
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) * 2.0 + x), backend=backend)
    ((name, module),) = fn.runtime_modules.items()
    run = module.get_function(name)
    data = np.ones(8, np.float32)
    with pytest.raises(ArgumentError, match="overlap"):
        run(data, data)
