"""The benchmark suite runs, and bench/report.py turns its JSON into the performance
page's report and the README's summary of it. The suite runs small here (10x10, one round) in its own
process with an empty cache: it checks every case against NumPy before timing it. That
smoke run is slow (``smoke``, with --run-slow); the renderers run by default."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def load_report():
    spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The tests of the smoke run: about 4.5 minutes of one CI worker (every case compiled
#: cold in its own process), so they run with --run-slow; the report's renderers of the
#: conv sweep and the real-model set below run by default.
smoke = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "bench.json"
    # Not an xdist worker's environment: pytest-benchmark switches itself off under xdist.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["NBYOC_CACHE_DIR"] = str(tmp / "cache")
    command = [
        sys.executable, "-m", "pytest", "bench", "-q", "-p", "no:cacheprovider",
        "--benchmark-enable", f"--benchmark-json={out}", "--bench-sizes", "10", "--bench-quick",
        "--scaling-nodes", "10", "--scaling-families", "chain", "blocks",
        "--benchmark-min-rounds=1", "--benchmark-max-time=0", "--benchmark-warmup=off",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(out.read_text())


@smoke
def test_nbyoc_jit_is_measured_against_numpy_numba_and_numexpr(smoke_run):
    measured = {
        (b["extra_info"]["graph"], b["extra_info"]["case"])
        for b in smoke_run["benchmarks"]
        if b["extra_info"].get("kind") == "jit"
    }
    for name in ("gelu", "softmax", "layer_norm", "axpby"):
        assert {(name, c) for c in ("numpy", "nbyoc.jit", "numba.njit")} <= measured
    if importlib.util.find_spec("numexpr"):
        assert {("gelu", "numexpr"), ("axpby", "numexpr")} <= measured
    assert "nbyoc.jit on NumPy functions" in load_report().markdown(smoke_run)


@smoke
def test_every_graph_and_case_is_measured(smoke_run):
    measured = {
        (b["extra_info"]["graph"], b["extra_info"]["case"])
        for b in smoke_run["benchmarks"]
        if b["extra_info"].get("kind") == "run"
    }
    nbyoc_cases = ["host", "csource", "csource-fused", "llvm", "examplejson"]
    cases = ["numpy", "numpy-out", "onnxruntime", *nbyoc_cases]
    if importlib.util.find_spec("numexpr"):
        cases.append("numexpr")
    graphs = ["reference", "diamond", "chain10", "fallback", "mlp"]
    expected = {(g, c) for g in graphs for c in cases}
    # The neural-network graphs have no numpy-out version, and numexpr only for GELU.
    nn_cases = ["numpy", "onnxruntime", *nbyoc_cases]
    expected |= {(g, c) for g in ("softmax", "log_softmax", "layer_norm", "rms_norm", "gelu")
                 for c in nn_cases}  # fmt: skip
    if importlib.util.find_spec("numexpr"):
        expected.add(("gelu", "numexpr"))
    expected |= {(f"model {m}", c) for m in ("mlp", "cnn", "transformer")
                 for c in ("onnxruntime", "host", "llvm", "csource")}  # fmt: skip
    if importlib.util.find_spec("jax"):  # (every graph's NumPy version, and the transformer)
        expected |= {(g, "jax.jit") for g in [*graphs, "softmax", "log_softmax", "layer_norm",
                                              "rms_norm", "gelu"]}  # fmt: skip
        expected.add(("model transformer", "jax.jit"))
    assert measured == expected


@smoke
def test_report_has_every_table(smoke_run):
    text = load_report().markdown(smoke_run)
    assert text.startswith("Machine: ")
    for title in ("Run time", "Against ONNX Runtime", "Compute-bound: the MLP", "Compile time",
                  "Peak memory per call", "Compile time against graph size",
                  "The user corpus"):  # fmt: skip
        assert f"#### {title}" in text
    corpus = text.split("#### The user corpus")[1].split("####")[0]
    assert "| ewma | 12x4 | " in corpus  # (a rewrite's row)
    scaling = text.split("#### Compile time against graph size")[1].split("####")[0]
    for family in ("chain", "blocks"):  # (the families the smoke run sweeps)
        for backend in ("llvm", "csource", "examplejson", "host"):
            for phase in ("cold", "warm"):
                assert f"| {family} | {backend} | {phase} | " in scaling
    run_table = text.split("#### Run time")[1].split("####")[0]
    assert "| reference | 10x10 | " in run_table
    for backend in ("llvm", "csource", "examplejson", "host"):
        assert f"| {backend} | " in text.split("#### Compile time")[1]
    assert run_table.count("x) |") >= 4 * 6  # a ratio to NumPy for each nbyoc case


@smoke
def test_report_rewrites_only_the_page_report_and_the_readme_summary(smoke_run, tmp_path):
    report = load_report()
    page, readme = tmp_path / "performance.md", tmp_path / "README.md"
    page.write_text(f"before\n{report.REPORT_START}\nstale report\n{report.REPORT_END}\nafter\n")
    readme.write_text(f"intro\n{report.SUMMARY_START}\nold\n{report.SUMMARY_END}\nrest\n")
    json_path = tmp_path / "bench.json"
    json_path.write_text(json.dumps(smoke_run))
    assert report.main([str(json_path), "--page", str(page), "--summary", str(readme)]) == 0
    text = page.read_text()
    assert text.startswith(f"before\n{report.REPORT_START}\nMachine: ")
    assert text.endswith(f"{report.REPORT_END}\nafter\n")
    assert "stale report" not in text
    summary = readme.read_text()
    assert summary.startswith(
        f"intro\n{report.SUMMARY_START}\n- llvm, times faster than NumPy at 10x10: "
    )
    assert summary.endswith(f"{report.SUMMARY_END}\nrest\n") and "\nold\n" not in summary


def committed_report() -> str:
    report = load_report()
    page = (ROOT / "docs" / "performance.md").read_text()
    return page.split(report.REPORT_START)[1].split(report.REPORT_END)[0].lstrip("\n")


def test_the_performance_page_report_comes_from_the_report():
    section = committed_report()
    assert section.startswith("Machine: ")
    assert "#### Run time" in section and "#### Compile time" in section


def test_the_readme_summary_is_read_from_the_performance_page():
    """The README states no benchmark number of its own: its summary is the page's."""
    report = load_report()
    readme = (ROOT / "README.md").read_text()
    shown = readme.split(report.SUMMARY_START)[1].split(report.SUMMARY_END)[0].lstrip("\n")
    assert shown == report.summary(committed_report()), (
        "run bench/report.py with --summary README.md, or paste report.summary() of the page"
    )


def test_seconds_formats_with_a_unit():
    seconds = load_report().seconds
    assert [seconds(v) for v in (2.5, 0.00123, 4.2e-6, 3e-9)] == [
        "2.5 s",
        "1.23 ms",
        "4.2 us",
        "3 ns",
    ]


def test_a_case_is_bound_by_the_smallest_copy_touching_as_many_bytes():
    report = load_report()
    mib = 1 << 20

    def copy(n, median):
        info = {"kind": "copy", "shape": f"{n}x{n}", "case": "np.copyto"}
        info.update(traffic=3 * 4 * n * n, footprint=2 * 4 * n * n)
        return {"extra_info": info, "stats": {"median": median}}

    doc = {"benchmarks": [copy(2048, 0.75e-3), copy(4096, 4.5e-3)]}  # 64 and 43 GB/s
    five = {"shape": "2048x2048", "footprint": 80 * mib}  # five 16 MiB arrays
    assert report.bound_copy(doc, five) == "4096x4096"
    assert report.bound_copy(doc, {"shape": "2048x2048", "footprint": 32 * mib}) == "2048x2048"
    assert report.bound_copy(doc, {"shape": "8192x8192", "footprint": 1 << 40}) == "4096x4096"
    assert report.bound_copy(doc, {"shape": "2048x2048"}) == "2048x2048"  # an older file
    run = {"extra_info": {"kind": "run", "graph": "g", "case": "llvm", **five,
                          "traffic": 96 * mib}, "stats": {"median": 3e-3}}  # fmt: skip
    doc["benchmarks"].append(run)
    table = "\n".join(report.bandwidth_table(doc))
    assert "| g | 2048x2048 | 2.25 ms (np.copyto, 4096x4096) | 75% |" in table, table


def test_a_streaming_copy_counts_what_it_moves_and_bounds_the_pass_without_reads():
    """A copy with streaming stores moves twice the array (no read of the destination
    first); against it a case's ideal pass moves its footprint (no read of the result
    first), and the bound is the faster of that and the pass at an ordinary copy's
    speed."""
    report = load_report()
    mib = 1 << 20

    def copy(case, streams, median):
        info = {"kind": "copy", "shape": "4096x4096", "case": case, "streams": streams}
        info.update(traffic=(2 if streams else 3) * 64 * mib, footprint=128 * mib)
        return {"extra_info": info, "stats": {"median": median}}

    # 192 MiB in 4.8 ms and 128 MiB in 2.4 ms: 41.9 and 55.9 GB/s
    doc = {
        "benchmarks": [copy("parallel copy", False, 4.8e-3), copy("streaming copy", True, 2.4e-3)]
    }
    run = {"extra_info": {"kind": "run", "graph": "g", "case": "llvm", "shape": "4096x4096",
                          "footprint": 128 * mib, "traffic": 192 * mib},
           "stats": {"median": 3.0e-3}}  # fmt: skip
    doc["benchmarks"].append(run)
    (bound,) = [report.bound_seconds(run["extra_info"], report.bandwidths(doc)["4096x4096"])]
    assert bound == pytest.approx(2.4e-3)  # the footprint at the streaming copy's speed
    table = "\n".join(report.bandwidth_table(doc))
    assert "streaming copy 55.9 GB/s (streaming stores)" in table, table
    assert "| g | 4096x4096 | 2.4 ms (streaming copy, 4096x4096) | 80% |" in table, table


def test_a_read_only_pass_faster_than_every_copy_is_the_bound():
    """The read pass moves each byte once, like a streaming copy: when it runs faster
    than every copy, a case's footprint at its speed is the bound (the bound issue 40
    asked for: the faster of a copy and a read-only pass over the same bytes)."""
    report = load_report()
    mib = 1 << 20

    def copy(case, median, **flags):
        info = {"kind": "copy", "shape": "4096x4096", "case": case, **flags}
        traffic = 3 * 64 * mib if not flags else 2 * 64 * mib
        info.update(traffic=traffic, footprint=128 * mib)
        return {"extra_info": info, "stats": {"median": median}}

    doc = {
        "benchmarks": [copy("parallel copy", 4.8e-3), copy("read pass", 1.6e-3, reads_only=True)]
    }
    run = {"extra_info": {"kind": "run", "graph": "g", "case": "llvm", "shape": "4096x4096",
                          "footprint": 128 * mib, "traffic": 192 * mib},
           "stats": {"median": 3.2e-3}}  # fmt: skip
    doc["benchmarks"].append(run)
    copies = report.bandwidths(doc)["4096x4096"]
    assert report.bound_pass(run["extra_info"], copies) == (pytest.approx(1.6e-3), "read pass")
    table = "\n".join(report.bandwidth_table(doc))
    assert "read pass 83.9 GB/s," not in table and "read pass 83.9 GB/s" in table, table
    assert "| g | 4096x4096 | 1.6 ms (read pass, 4096x4096) | 50% |" in table, table


@smoke
def test_the_scaling_plot_is_drawn(smoke_run, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "scaling.png"
    assert load_report().scaling_plot(smoke_run, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_growth_exponent_fits_a_power_law():
    fit = load_report().growth_exponent
    assert fit({100: 1.0, 300: 3.0, 1000: 10.0}) == pytest.approx(1.0)
    assert fit({100: 1.0, 1000: 100.0}) == pytest.approx(2.0)
    assert fit({10: 1.0}) is None


def test_the_real_model_tables_say_what_a_warm_start_and_a_fixed_shape_are():
    real = load_bench("real_models")
    warm = {"cold_s": 0.55, "prepare_s": 0.452, "first_call_s": 0.098}
    assert real.fmt_warm(warm) == "452 ms + run 98 ms"
    assert real.fmt_warm({"error": "ValueError: x"}) == "error"
    fixed = {"error": f"ModelImportError: shapes['x'] = (2, 3) {real.FIXED_SHAPE} 'x'"}
    assert real.fmt_s(fixed) == "fixed shape"


def test_the_real_model_tables_show_what_the_second_core_buys():
    real = load_bench("real_models")
    result = {"nodes": 10, "refused": None, "cold": {"llvm": {"cold_s": 1.0, "run_ms": 4.0}},
              "warm": {}, "resized": {}, "peers": {}, "checks": {}, "vs_ort": {},
              "one_thread": {"llvm": {"cold_s": 1.0, "run_ms": 7.0}}}  # fmt: skip
    text = real.tables({"ppocr-cls": result}, ["llvm"], [])
    assert "| ppocr-cls | 7 ms / 4 ms = 1.75x |" in text, text
    del result["one_thread"]
    assert "1 thread" not in real.tables({"ppocr-cls": result}, ["llvm"], [])


def test_the_real_model_tables_show_where_the_time_goes():
    real = load_bench("real_models")
    rows = [{"name": "@llvm_0", "backend": "llvm", "ops": "conv2d, add, relu", "ms": 3.0,
             "share": 0.6},
            {"name": "(executor)", "backend": "host", "ops": "argument checks", "ms": 0.1,
             "share": 0.02}]  # fmt: skip
    result = {"nodes": 10, "refused": None, "cold": {"llvm": {"cold_s": 1.0, "run_ms": 5.0}},
              "warm": {}, "resized": {}, "peers": {}, "checks": {}, "vs_ort": {},
              "profile": {"llvm": {"profile": {"total_ms": 5.0, "rows": rows, "stages": [
                  {"name": "@llvm_0", "ops": "conv 1x8x4x4 w8x3x3x3", "ms": 2.0,
                   "share": 0.4}]}}}}  # fmt: skip
    text = real.tables({"ppocr-cls": result}, ["llvm"], [])
    expected = (
        "| ppocr-cls | llvm | 5 ms | @llvm_0 3 ms (60%): conv2d, add, relu"
        "<br>(executor) 0.1 ms (2%): argument checks"
        " | @llvm_0 2 ms (40%): conv 1x8x4x4 w8x3x3x3 |"
    )
    assert expected in text, text
    del result["profile"]
    assert "where the time goes" not in real.tables({"ppocr-cls": result}, ["llvm"], [])


def test_the_real_model_speeds_against_peers_and_their_geometric_mean():
    real = load_bench("real_models")
    results = {"a": {"cold": {"llvm": {"run_ms": 2.0}}, "peers": {"ort": {"run_ms": 4.0},
                                                                  "openvino": {"run_ms": 1.0}}},
               "b": {"cold": {"llvm": {"run_ms": 8.0}}, "peers": {"ort": {"run_ms": 2.0},
                                                                  "openvino": {}}},
               "c": {"cold": {"llvm": {"error": "x"}}, "peers": {"ort": {"run_ms": 1.0}}}}  # fmt: skip
    lines = real.speed_table(results, ["llvm"], ["ort", "openvino"]).splitlines()
    assert lines[2] == "| a | 2 | 4 | 1 | 2.00x | 0.50x |"
    assert lines[4] == "| c | - | 1 | - | - | - |"
    assert lines[5] == "| geometric mean |  |  |  | 0.71x of 2 | 0.50x of 1 |"
    assert real.speed_table(results, ["llvm"], []) is None


def test_the_real_model_report_renders_between_its_markers(tmp_path):
    report = load_report()
    model = {"nodes": 10, "refused": None, "cold": {"llvm": {"cold_s": 3.0, "run_ms": 2.0}},
             "warm": {}, "resized": {}, "one_thread": {}, "profile": {}, "checks": {},
             "vs_ort": {}, "peers": {"ort": {"compile_s": 0.1, "run_ms": 4.0}}}  # fmt: skip
    doc = {"machine": {"cpu": "X", "cpus": 2, "date": "2026-11-28",
                       "load_average_at_start": [0.5, 0, 0], "load_average_at_end": [1.5, 0, 0]},
           "backends": ["llvm"], "peers": ["ort"], "notes": ["no OpenVINO"], "runs": 20,
           "models": {"ppocr-cls": model}}  # fmt: skip
    text = report.real_models_markdown(doc)
    assert text.startswith(
        "Machine: X, 2 cores; run on 2026-11-28; run times the median of "
        "up to 20 runs; load average 0.5 at the start, 1.5 at the end."
    )
    assert "| ppocr-cls | 2 | 4 | 2.00x |" in text and text.endswith("no OpenVINO\n")
    page = tmp_path / "page.md"
    page.write_text(f"before\n{report.REAL_START}\nold\n{report.REAL_END}\nafter\n")
    data = tmp_path / "real.json"
    data.write_text(json.dumps(doc))
    assert report.main(["--real-models", str(data), "--page", str(page)]) == 0
    assert page.read_text() == f"before\n{report.REAL_START}\n{text}{report.REAL_END}\nafter\n"


def test_jax_is_a_peer_not_an_nbyoc_case():
    """jax.jit has its own table (its median over nbyoc's), and is no column of the ONNX
    Runtime table's nbyoc cases."""
    report = load_report()

    def run(case, median):
        info = {"kind": "run", "graph": "softmax", "shape": "1024x1024", "case": case}
        return {"extra_info": info, "stats": {"median": median}}

    doc = {"benchmarks": [run("numpy", 4e-3), run("jax.jit", 2e-3), run("onnxruntime", 3e-3),
                          run("llvm", 1e-3)]}  # fmt: skip
    jax_table = "\n".join(report.peer_table(doc, "jax.jit"))
    assert "| softmax | 1024x1024 | 2 ms | 2.00x |" in jax_table, jax_table
    ort_table = "\n".join(report.peer_table(doc))
    assert "jax.jit" not in ort_table and "| softmax | 1024x1024 | 3 ms | 3.00x |" in ort_table


def load_bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (a dataclass finds its module's names there)
    spec.loader.exec_module(module)
    return module


def test_the_conv_sweep_runs_checks_and_renders_its_table(tmp_path):
    """``conv_sweep.py --quick`` end to end: two layers on nbyoc (1 thread and all), the
    peers that are installed (a note for each that is not), each nbyoc result checked
    against ONNX Runtime's; then report.py puts its table between the page's markers."""
    pytest.importorskip("onnx")
    out = tmp_path / "conv.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(BENCH / "conv_sweep.py"), "--quick", "--json", str(out)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    doc = json.loads(out.read_text())
    quick = load_bench("conv_layers").QUICK
    assert list(doc["layers"]) == list(quick)
    fma = doc["phases"]["fma"]["gflops"]
    assert set(fma) == {"float32", "float64"} and all(
        r > 0 for by in fma.values() for r in by.values()
    )
    for phase in ("nbyoc-1", "nbyoc-all"):
        for name in quick:
            assert doc["phases"][phase]["layers"][name]["ms"] > 0, (phase, name)
    assert {e["threads"] for e in doc["phases"]["nbyoc-1"]["layers"].values()} == {1}
    text = done.stdout
    assert "| layer | conv | MFLOP | nbyoc, 1 thread |" in text
    for module, column in (("onnxruntime", "ONNX Runtime"), ("openvino", "OpenVINO")):
        if importlib.util.find_spec(module):
            assert f"| {column} |" in text.splitlines()[3]
        else:
            assert f"{module} is not installed" in text
    if importlib.util.find_spec("onnxruntime"):
        assert set(doc["checks"]) == set(quick)
        assert all(v["ok"] for by in doc["checks"].values() for v in by.values())
        assert text.count("| ok (") == len(quick)
    report = load_report()
    page = tmp_path / "performance.md"
    page.write_text(f"before\n{report.CONV_START}\nstale\n{report.CONV_END}\nafter\n")
    assert report.main(["--conv-sweep", str(out), "--page", str(page)]) == 0
    written = page.read_text()
    assert written.startswith(f"before\n{report.CONV_START}\nMachine: ") and "stale" not in written
    assert written.endswith(f"{report.CONV_END}\nafter\n") and "| layer | conv |" in written


def test_the_conv_check_fails_a_result_beyond_twice_the_rounding_bound(tmp_path):
    """The sweep's check holds a result against ONNX Runtime's within twice the rounding
    bound: a result off by a rounding passes, one off by 1e-3 of each element does not
    (the bound is each element's: about (9 + 4) roundings of its products' size here)."""
    pytest.importorskip("onnx")
    import numpy as np

    import nbyoc
    from nbyoc.runtime.host import HostFunction

    sweep, layers = load_bench("conv_sweep"), load_bench("conv_layers")
    layer = layers.LAYERS["mobilenetv2-dw-960"]
    model = tmp_path / f"{layer.name}.onnx"
    model.write_bytes(layers.onnx_model(layer).SerializeToString())
    exact = HostFunction(nbyoc.from_onnx(str(model)))(layers.sample(layer))
    np.save(tmp_path / f"ort-{layer.name}.npy", exact)
    for scale, ok in ((1e-7, True), (1e-3, False)):
        off = exact.astype(np.float64) * (1 + scale)
        np.save(tmp_path / f"nbyoc-all-{layer.name}.npy", off.astype(np.float32))
        verdict = sweep.check(layer, tmp_path, "nbyoc-all")
        assert verdict["ok"] is ok, (scale, verdict)
    assert sweep.check(layer, tmp_path, "nbyoc-1") is None  # nothing to check


def test_the_fma_peak_loop_is_register_only_fmas():
    """The peak's loop, as compiled on this machine: one FMA per accumulator, no memory
    operand, nothing but the counter besides (x86; elsewhere the ISA's names differ)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the check reads x86 assembly")
    fma = load_bench("fma_peak")
    loop = fma.loop_instructions(fma.compiled("float32").assembly())
    fmas = [i for i in loop if i.startswith("vfmadd")]
    assert len(fmas) == fma.ACCUMULATORS, loop
    assert not any("(" in i for i in loop), loop  # no load or store
    register = {512: "%zmm", 256: "%ymm", 128: "%xmm"}[fma.vector_bits()]
    assert all(i.count(register) == 3 for i in fmas), loop
    assert len(loop) <= fma.ACCUMULATORS + 4, loop  # the counter, the test and the jump
