"""Saved work loads in any process: archives of every backend, ExampleJSON files, and
a user backend whose loader an installed package names through its entry point.
Each case saves in one fresh process and loads and runs in another, with a cache of
its own, and loading imports only what the module needs (no Numba for csource)."""

import json

import numpy as np
import pytest

from ..helpers import run_fresh

BACKENDS = ["host", "llvm", "csource", "examplejson"]

SAVE = """
import sys, numpy as np, nbyoc
a, b = nbyoc.var("a", (6, 5)), nbyoc.var("b", (5,))
t = a * b + nbyoc.const(np.linspace(0, 1, 5, dtype=np.float32))
# The new ops, attribute kinds and dtypes cross processes too: bool (where), float16 (cast),
# str and float attributes (pad's mode, clip's bounds), slices, a decomposed softmax.
extra = [nbyoc.where(a > 0, a, b), nbyoc.cast(t, "float16"), nbyoc.pad(a, (1, 0, 0, 2), "reflect"),
         nbyoc.clip(t, -0.5, 0.5), a[::-1, 1:], nbyoc.softmax(t, axis=0), nbyoc.floor_divide(a, b)]
# ... and the ops llvm runs as stages of their own, and float16 arithmetic in its kernels.
g = nbyoc.reshape(a, (1, 1, 6, 5))
extra += [nbyoc.gather(a, np.array([5, 0, -1]), 0), nbyoc.max_pool(g, (2, 2)),
          nbyoc.resize(g, scales=(1.0, 1.0, 2.0, 1.5), mode="linear"), nbyoc.cast(a, "float16") * 2.0]
# ... and matmul and conv (direct, and as tiles) with the ops after them.
w = nbyoc.const(np.linspace(-1, 1, 16 * 16, dtype=np.float32).reshape(16, 1, 4, 4))
extra += [nbyoc.relu(a @ nbyoc.transpose(a) + 1.0), nbyoc.tanh(nbyoc.conv(g, w[:2, :, :3, :3])),
          nbyoc.conv(g, w, pads=(1, 1, 1, 1)) + 0.5]
base = [(t - b) * t, nbyoc.sum(t, axis=1), nbyoc.relu(t)]
f = nbyoc.function([a, b], [*base, *extra])
rng = np.random.default_rng(0)
inputs = [rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
np.savez("io.npz", a=inputs[0], b=inputs[1], *nbyoc.compile(f, backend="host")(*inputs))
for backend in sys.argv[1:]:
    fn = nbyoc.compile(f, backend=backend)
    fn.save(f"{backend}.nbyoc")
    if backend == "examplejson":  # one subgraph, for load_module
        plain = nbyoc.compile(nbyoc.function([a, b], base), backend=backend)
        (module,) = plain.runtime_modules.values()
        open("sub.examplejson", "wb").write(module.save_to_bytes())
print("{}")
"""

LOAD = """
import json, sys, numpy as np, nbyoc
io = np.load("io.npz")
fn = nbyoc.load(sys.argv[1] + ".nbyoc")
got = fn(io["a"], io["b"])
close = all(np.allclose(g, io[f"arr_{k}"], rtol=1e-5, atol=1e-6) for k, g in enumerate(got))
print(json.dumps({"close": close, "numba": "numba" in sys.modules, "cffi": "cffi" in sys.modules,
                  "types": sorted({m.type_key for m in fn.runtime_modules.values()})}))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    run_fresh(SAVE, folder, *BACKENDS, env={"NBYOC_CACHE_DIR": str(folder / "save-cache")})
    return folder


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_archive_loads_and_runs_in_a_fresh_process(saved, backend, tmp_path):
    seen = run_fresh(LOAD, saved, backend, env={"NBYOC_CACHE_DIR": str(tmp_path / "cache")})
    assert seen["close"]
    assert seen["types"] == ([] if backend == "host" else [backend])
    # Loading imports what the module needs and nothing more.
    assert seen["numba"] == (backend in ("llvm", "examplejson"))
    assert seen["cffi"] == (backend != "host")


LOAD_MODULE = """
import json, sys, numpy as np, nbyoc
module = nbyoc.load_module("sub.examplejson", "examplejson")
(symbol,) = module.subgraphs
out = [np.empty(t.shape, t.dtype) for t in nbyoc.ir.types.tensor_types(module.subgraphs[symbol].ret_type)]
io = np.load("io.npz")
a, b = io["a"], io["b"]
module.get_function(symbol)(a, b, *out)
print(json.dumps({"symbol": symbol, "sum": out[1].tolist()}))
"""


def test_load_module_reads_an_examplejson_file_in_a_fresh_process(saved, tmp_path):
    seen = run_fresh(LOAD_MODULE, saved, env={"NBYOC_CACHE_DIR": str(tmp_path / "cache")})
    io = np.load(saved / "io.npz")
    assert seen["symbol"] == "examplejson_0"
    np.testing.assert_allclose(seen["sum"], io["arr_1"], rtol=1e-5)


# -- a user backend, installed as a package with an entry point -----------------------

USER_BACKEND = '''
"""A backend of a user's own, in a package of its own."""
import numpy as np
import nbyoc
from nbyoc.runtime import HostFunction, Module, destination_passing


@nbyoc.register_loader("user_numpy")
class UserModule(Module):
    type_key = "user_numpy"

    def __init__(self, func):
        self.func, self.run = func, HostFunction(func)

    def get_function(self, symbol):
        return destination_passing(self.func, lambda ins, outs: np.copyto(outs[0], self.run(*ins)))

    def save_to_bytes(self):
        return nbyoc.to_json(self.func).encode()

    @classmethod
    def load_from_bytes(cls, data):
        return cls(nbyoc.from_json(data))


nbyoc.register_op_support("userbackend", "multiply")


@nbyoc.register_codegen("userbackend")
def codegen(func):
    return UserModule(func)
'''

USER_SAVE = """
import numpy as np, nbyoc, userbackend
x = nbyoc.var("x", (4,))
nbyoc.compile(nbyoc.function([x], nbyoc.exp(x * x)), backend="userbackend").save("user.nbyoc")
print("{}")
"""

USER_LOAD = """
import json, sys, numpy as np, nbyoc
try:
    fn = nbyoc.load("user.nbyoc")
except nbyoc.errors.LoadError as e:
    print(json.dumps({"error": str(e), "imported": "userbackend" in sys.modules}))
    raise SystemExit
x = np.arange(4, dtype=np.float32)
print(json.dumps({"close": bool(np.allclose(fn(x), np.exp(x * x))),
                  "types": [m.type_key for m in fn.runtime_modules.values()]}))
"""


@pytest.fixture
def user_package(tmp_path):
    """A folder on which the user's package is 'installed': its module and its metadata
    with an ``nbyoc.loaders`` entry point, as pip would lay them out."""
    site = tmp_path / "site"
    (site / "userbackend-0.1.dist-info").mkdir(parents=True)
    (site / "userbackend.py").write_text(USER_BACKEND)
    (site / "userbackend-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: userbackend\nVersion: 0.1\n"
    )
    entry_points = "[nbyoc.loaders]\nuser_numpy = userbackend:UserModule\n"
    (site / "userbackend-0.1.dist-info" / "entry_points.txt").write_text(entry_points)
    return site


def test_a_user_backend_loads_in_a_fresh_process_through_its_entry_point(user_package, tmp_path):
    env = {"PYTHONPATH": str(user_package), "NBYOC_CACHE_DIR": str(tmp_path / "cache")}
    run_fresh(USER_SAVE, tmp_path, env=env)
    seen = run_fresh(USER_LOAD, tmp_path, env=env)
    assert seen == {"close": True, "types": ["user_numpy"]}


def test_without_its_entry_point_the_error_names_the_module_to_import(user_package, tmp_path):
    env = {"PYTHONPATH": str(user_package), "NBYOC_CACHE_DIR": str(tmp_path / "cache")}
    run_fresh(USER_SAVE, tmp_path, env=env)
    for info in user_package.glob("*.dist-info"):
        (info / "entry_points.txt").unlink()
    seen = run_fresh(USER_LOAD, tmp_path, env=env)
    assert "no loader for module type 'user_numpy'" in seen["error"]
    assert "written by userbackend:UserModule: import userbackend first" in seen["error"]
    assert seen["imported"] is False, "nbyoc never imports a module an archive names"


def test_a_broken_entry_point_is_a_load_error(user_package, tmp_path):
    env = {"PYTHONPATH": str(user_package), "NBYOC_CACHE_DIR": str(tmp_path / "cache")}
    run_fresh(USER_SAVE, tmp_path, env=env)
    entry = user_package / "userbackend-0.1.dist-info" / "entry_points.txt"
    entry.write_text("[nbyoc.loaders]\nuser_numpy = userbackend_missing:UserModule\n")
    seen = run_fresh(USER_LOAD, tmp_path, env=env)
    assert "failed to import: ModuleNotFoundError" in seen["error"]


def test_the_manifest_records_the_writer_only_as_a_hint(saved):
    import zipfile

    with zipfile.ZipFile(saved / "llvm.nbyoc") as archive:
        manifest = json.loads(archive.read("manifest.json"))
    writers = {entry["written_by"] for entry in manifest["runtime_modules"]}
    assert writers == {"nbyoc.codegen.llvm.module:LLVMModule"}
