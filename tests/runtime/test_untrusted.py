"""Loading never executes code from the file: a corpus of crafted archives and
ExampleJSON files for every shipped backend.

Every value and every key of an archive's JSON (the manifest, the partitioned
module, each runtime module's saved function) and every token of an ExampleJSON
text is replaced, one at a time, by payloads that would create a file if any
codegen wrote them into Python or C source (the breakout reported in issue 12
among them), by numbers that overflow, and by dtypes NumPy would read as
objects. Each crafted file must either be refused with ``LoadError`` or load
and compute exactly what the original graph computes; the file a payload
would create must never appear. A new backend joins by adding its name to
``BACKENDS``.
"""

import io
import json
import zipfile

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import LoadError

from ..helpers import run_fresh

BACKENDS = ["llvm", "csource", "examplejson"]


def payloads(sentinel) -> list:
    """Text that runs code if it reaches generated source unescaped, and values that
    overflow or mean something else than a number or a name."""
    target = str(sentinel)
    python = f'__import__("pathlib").Path({target!r}).touch()'
    c_code = f'fopen("{target}", "w")'
    return [
        f"k(a={python}) -> (lambda *z: 0)",  # issue 12's breakout of a Python def line
        f"x\n{python}\n#",  # a line of its own, the rest of the line commented out
        f"x): pass\n{python}\ndef y(",
        f"x */ __attribute__((constructor)) static void run(void) {{ {c_code}; }} /* ",
        f"x\n__attribute__((constructor)) static void run(void) {{ {c_code}; }}\n//",
        f'x"); {c_code}; ("',
        f"x\n  input 9 2\n  {python}",
        "float32\n",
        "O",
        2**64,
        -(2**63) - 1,
        10**30,
        -1,
    ]


def graph():
    a, b = nbyoc.var("a", (2, 3)), nbyoc.var("b", (3,))
    t = a * b + nbyoc.const(np.array([1.0, 2.0, 3.0], np.float32))
    return nbyoc.function([a, b], [nbyoc.sum(t, axis=1), nbyoc.reshape(t, (3, 2)) * 2.0])


INPUTS = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, -1, 2], np.float32)]


@pytest.fixture(scope="module", params=BACKENDS)
def original(request, tmp_path_factory):
    """(backend, archive members, expected results) of the graph saved on that backend."""
    path = tmp_path_factory.mktemp("original") / "model.nbyoc"
    fn = nbyoc.compile(graph(), backend=request.param)
    fn.save(path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    return request.param, members, fn(*INPUTS)


def positions(doc, path=()):
    """Every place in a JSON document: ("value", path) for each leaf, ("key", path) for
    each key of each object."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield ("key", (*path, key))
            yield from positions(value, (*path, key))
    elif isinstance(doc, list):
        for k, value in enumerate(doc):
            yield from positions(value, (*path, k))
    else:
        yield ("value", path)


def replaced(doc, where, payload):
    """A copy of ``doc`` with the place ``where`` holding ``payload``."""
    kind, path = where
    doc = json.loads(json.dumps(doc))
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if kind == "value":
        parent[last] = payload
    else:
        parent = {(str(payload) if k == last else k): v for k, v in parent.items()}
        if len(path) == 1:
            return parent
        holder = doc
        for step in path[:-2]:
            holder = holder[step]
        holder[path[-2]] = parent
    return doc


def archive_bytes(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def crafted(members: dict, sentinel):
    """(label, crafted archive members) for every place and payload."""
    for name, data in members.items():
        if name.endswith(".json") or (name.endswith(".bin") and data.startswith(b"{")):
            doc = json.loads(data)
            for where in positions(doc):
                for payload in payloads(sentinel):
                    text = json.dumps(replaced(doc, where, payload)).encode()
                    yield f"{name} {where} = {payload!r}", {**members, name: text}
        elif name.endswith(".bin"):  # ExampleJSON text
            text = data.decode()
            for label, changed in crafted_texts(text, sentinel):
                yield f"{name} {label}", {**members, name: changed.encode()}


def crafted_texts(text: str, sentinel):
    """(label, text) with each token of ExampleJSON ``text`` replaced by each payload."""
    lines = text.splitlines()
    for row, line in enumerate(lines):
        tokens = line.split()
        for k in range(len(tokens)):
            for payload in payloads(sentinel):
                changed = [*tokens[:k], str(payload), *tokens[k + 1 :]]
                new = [*lines[:row], "  " + " ".join(changed), *lines[row + 1 :]]
                yield f"line {row + 1} token {k} = {payload!r}", "\n".join(new)


def assert_same_results(got, want, label):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, label
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=label)


def test_crafted_archives_are_refused_or_run_the_intended_graph(original, tmp_path):
    _, members, expected = original
    sentinel = tmp_path / "PAYLOAD_RAN"
    path = tmp_path / "crafted.nbyoc"
    outcomes = {"refused": 0, "ran": 0}
    for label, changed in crafted(members, sentinel):
        path.write_bytes(archive_bytes(changed))
        try:
            fn = nbyoc.load(path)
        except LoadError:
            outcomes["refused"] += 1
        else:
            assert_same_results(fn(*INPUTS), expected, label)
            outcomes["ran"] += 1
        assert not sentinel.exists(), f"a payload ran: {label}"
    # Sanity: the corpus reached deep enough that both outcomes occur.
    assert outcomes["refused"] > 500 and outcomes["ran"] > 0, outcomes


def test_crafted_examplejson_files_are_refused_or_run_the_intended_graph(tmp_path):
    fn = nbyoc.compile(graph(), backend="examplejson")
    (module,) = fn.runtime_modules.values()
    text = module.get_source()
    (symbol,) = module.subgraphs
    func = module.subgraphs[symbol]
    outputs = [np.empty(t.shape, t.dtype) for t in nbyoc.ir.types.tensor_types(func.ret_type)]
    module.get_function(symbol)(*INPUTS, *outputs)
    sentinel = tmp_path / "PAYLOAD_RAN"
    path = tmp_path / "crafted.examplejson"
    refused = 0
    for label, changed in crafted_texts(text, sentinel):
        path.write_text(changed)
        try:
            loaded = nbyoc.load_module(path, "examplejson")
        except LoadError:
            refused += 1
        else:
            # A renamed subgraph is the same graph under another name.
            (name,) = [symbol] if symbol in loaded.subgraphs else list(loaded.subgraphs)
            got = [np.empty_like(o) for o in outputs]
            loaded.get_function(name)(*INPUTS, *got)
            assert_same_results(got, outputs, label)
        assert not sentinel.exists(), f"a payload ran: {label}"
    assert refused > 100


@pytest.mark.parametrize(
    "array",
    [
        np.array(["a", "b", "c"]),
        np.array([1 + 2j, 3, 4], np.complex64),
        np.zeros(3, dtype=[("x", np.float32)]),
        np.array([1, 2, 3], np.float16),
    ],
    ids=["unicode", "complex", "structured", "float16"],
)
def test_constants_of_other_dtypes_are_refused(original, tmp_path, array):
    _, members, _ = original
    data = io.BytesIO()
    np.save(data, array)
    path = tmp_path / "crafted.nbyoc"
    path.write_bytes(archive_bytes({**members, "constants/0.npy": data.getvalue()}))
    with pytest.raises(LoadError):
        nbyoc.load(path)


def test_a_big_endian_constant_is_refused_or_runs_the_intended_graph(original, tmp_path):
    _, members, expected = original
    data = io.BytesIO()
    np.save(data, np.array([1.0, 2.0, 3.0], ">f4"))
    path = tmp_path / "crafted.nbyoc"
    path.write_bytes(archive_bytes({**members, "constants/0.npy": data.getvalue()}))
    try:
        fn = nbyoc.load(path)
    except LoadError as e:
        assert "constants[0]" in str(e)
    else:
        assert_same_results(fn(*INPUTS), expected, "big-endian")


REPORTED = """
import json, sys, zipfile, nbyoc
x = nbyoc.var("x", (4,))
nbyoc.compile(nbyoc.function([x], x * 2.0)).save("good.nbyoc")
with zipfile.ZipFile("good.nbyoc") as archive:
    members = {name: archive.read(name) for name in archive.namelist()}
doc = json.loads(members["runtime/llvm_0.bin"])
doc["function"]["functions"][0]["attrs"]["global_symbol"] = (
    'k(a=__import__("os").system("touch pwned")) -> (lambda *z: 0)')
members["runtime/llvm_0.bin"] = json.dumps(doc).encode()
with zipfile.ZipFile("evil.nbyoc", "w") as archive:
    for name, data in members.items():
        archive.writestr(name, data)
try:
    nbyoc.load("evil.nbyoc")
    outcome = "loaded"
except nbyoc.errors.LoadError as e:
    outcome = str(e)
print(json.dumps({"outcome": outcome}))
"""


def test_the_reported_archive_is_refused_in_a_fresh_process(tmp_path):
    seen = run_fresh(REPORTED, tmp_path, env={"NBYOC_CACHE_DIR": str(tmp_path / "cache")})
    assert "global_symbol" in seen["outcome"] and "is not an identifier" in seen["outcome"]
    assert not (tmp_path / "pwned").exists()
