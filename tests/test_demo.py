"""The demo compiles the reference graph on every backend and checks it against NumPy."""

import subprocess
import sys

from nbyoc.__main__ import main


def test_demo_passes_and_reports_every_backend():
    # A fresh process: only the built-in backends, not the ones tests register.
    code = (
        "import sys, nbyoc\n"
        "from nbyoc.__main__ import main\n"
        "print('BACKENDS', *nbyoc.codegen.registered_backends())\n"
        "sys.exit(main(['demo', '--sizes', '8', '64']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    backends = out.split("\n")[0].split()[1:]
    assert "host" in backends
    assert "((a + b) - c) * d" in out
    for step, backend in enumerate(backends, 1):
        assert f"  {backend} " in out
        assert f"[{step}/{len(backends)}] compiling for {backend}: 8x8 " in out
        assert f"--- {backend}: the partitioned module ---" in out
        if backend != "host":
            assert f"runs on {backend}" in out
            assert f"--- {backend}: generated code of @{backend}_0 ---" in out
    assert "CSOURCE_BINARY_OP_2D(" in out  # the guide's macro, from csource's excerpt
    assert out.count(" ok ") == 2 * len(backends)
    assert "MISMATCH" not in out


def test_demo_reports_a_mismatch_with_a_failing_exit_code(monkeypatch, capsys):
    import nbyoc.demo

    monkeypatch.setattr(nbyoc.demo, "numpy_reference", lambda a, b, c, d: a + b)
    assert main(["demo", "--sizes", "4", "--backend", "host"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_module_entry_point_runs():
    result = subprocess.run(
        [sys.executable, "-m", "nbyoc", "demo", "--sizes", "4"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "host" in result.stdout
