"""Ahead-of-time export: a C program calls the csource library; the llvm extension
module imports and runs without Numba."""

import os
import subprocess
import sys

import pytest

import nbyoc
from nbyoc.demo import reference_graph
from nbyoc.errors import CompileError

C_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "model.h"

int main(void) {
  float in[4][100], out[100];
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 100; ++i) in[k][i] = (float)(i + k) / 7.0f;
  int64_t shape[2] = {10, 10};
  DLTensor t[5];
  DLTensor* args[5];
  for (int k = 0; k < 5; ++k) {
    memset(&t[k], 0, sizeof t[k]);
    t[k].data = k < 4 ? (void*)in[k] : (void*)out;
    t[k].device.device_type = 1;
    t[k].ndim = 2;
    t[k].dtype.code = 2; t[k].dtype.bits = 32; t[k].dtype.lanes = 1;
    t[k].shape = shape;
    args[k] = &t[k];
  }
  if (csource_0(args, 5) != 0) { printf("failed: %s\n", csource_0_last_error()); return 1; }
  for (int i = 0; i < 100; ++i) {
    float want = ((in[0][i] + in[1][i]) - in[2][i]) * in[3][i];
    if (out[i] != want) { printf("wrong at %d\n", i); return 1; }
  }
  if (csource_0(args, 4) != 1 || strstr(csource_0_last_error(), "takes 5 arguments") == NULL) {
    printf("bad count not refused\n"); return 1;
  }
  t[2].dtype.bits = 64;
  if (csource_0(args, 5) != 2) { printf("bad dtype not refused\n"); return 1; }
  printf("ok\n");
  return 0;
}
"""


def test_a_c_program_calls_the_exported_csource_library(tmp_path):
    fn = nbyoc.compile(reference_graph((10, 10)), backend="csource")
    library = tmp_path / "model.so"
    fn.export_library(library)
    header = (tmp_path / "model.h").read_text()
    assert "int csource_0(DLTensor** args, int32_t num_args);" in header
    assert "inputs: in0 Tensor[(10, 10), float32]" in header
    (tmp_path / "main.c").write_text(C_PROGRAM)
    cc = os.environ.get("CC", "cc").split()
    built = subprocess.run(
        [*cc, str(tmp_path / "main.c"), str(library), f"-Wl,-rpath,{tmp_path}", "-o", str(tmp_path / "main")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True)
    assert ran.stdout.strip() == "ok", ran.stdout + ran.stderr


def test_the_llvm_extension_runs_without_numba(tmp_path):
    fn = nbyoc.compile(reference_graph((10, 10)), backend="llvm")
    fn.export_library(tmp_path / "model_aot.so")
    assert "llvm_0(inputs..., outputs...)" in (tmp_path / "model_aot.txt").read_text()
    code = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import model_aot\n"
        "a, b, c, d = (np.arange(100, dtype=np.float32).reshape(10, 10) / (k + 1) for k in range(4))\n"
        "out = np.empty((10, 10), np.float32)\n"
        "model_aot.llvm_0(a, b, c, d, out)\n"
        "assert np.array_equal(out, ((a + b) - c) * d)\n"
        "assert 'numba' not in sys.modules, 'the extension pulled in Numba'\n"
        "print('ok')\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.stdout.strip() == "ok", ran.stderr


def test_export_refuses_what_it_cannot_do(tmp_path):
    x = nbyoc.var("x", (3,))
    with pytest.raises(CompileError, match="nothing to export"):
        nbyoc.compile(nbyoc.function([x], x * 2.0), backend="host").export_library(
            tmp_path / "a.so"
        )
    # multiply runs on csource, sum (which csource lacks) on examplejson
    mixed = nbyoc.compile(
        nbyoc.function([x], nbyoc.sum(x * 2.0)), backend=["csource", "examplejson"]
    )
    assert {m.type_key for m in mixed.runtime_modules.values()} == {"csource", "examplejson"}
    with pytest.raises(CompileError, match="one backend at a time"):
        mixed.export_library(tmp_path / "b.so")
    ej = nbyoc.compile(nbyoc.function([x], x * 2.0), backend="examplejson")
    with pytest.raises(CompileError, match="no ahead-of-time export for 'examplejson'"):
        ej.export_library(tmp_path / "c.so")
    h = nbyoc.var("h", (3,), "float16")
    half = nbyoc.compile(nbyoc.function([h], h * 2.0), backend="llvm")
    with pytest.raises(CompileError, match="takes or returns float16"):
        half.export_library(tmp_path / "d.so")


def test_a_numba_without_pycc_gets_a_clear_error(tmp_path, monkeypatch):
    fn = nbyoc.compile(reference_graph((4, 4)), backend="llvm")
    monkeypatch.setitem(sys.modules, "numba.pycc", None)  # as if this Numba had no pycc
    with pytest.raises(
        CompileError, match=r"numba\.pycc is not available in Numba .*Executable\.save"
    ):
        fn.export_library(tmp_path / "model_aot.so")
