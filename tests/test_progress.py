"""Long compiles show their progress on stderr (a tqdm bar counting compiled units, or
one line when a compile without a bar is slow), and only when wanted."""

import gc
import re
import sys
import time
import types
import warnings

import numpy as np
import pytest

import nbyoc
from nbyoc import progress
from nbyoc.runtime.llvm.numba_progress import function_count

from .transform.backends import ARITH


def two_regions():
    x = nbyoc.var("x", (3,))
    return nbyoc.function([x], nbyoc.exp(x * 2.0) + 1.0)  # exp stays on the host


def staged(scale: float):
    """A function whose llvm kernel calls a stage function (a row group in a module of
    its own, then the kernel: ``scale`` makes both ones no other test compiled, the
    stage by its constants, the kernel by its shape)."""
    x = nbyoc.var("x", (64, round(64 * scale)))
    y = x
    for _ in range(8):  # (8 ops or more make a stage function of their own)
        y = y * scale + 0.25
    return nbyoc.function([x], [y, nbyoc.sum(y, axis=1)])


class FakeBar:
    """Stands in for tqdm: records what the bar was told."""

    made: list = []

    def __init__(self, total, desc, **options):
        self.total, self.n, self.descriptions, self.steps = total, 0, [desc], []
        self.closed = False
        FakeBar.made.append(self)

    def update(self, n=1):
        self.n += n
        self.steps.append((self.n, self.total))

    def set_description_str(self, description, refresh=True):
        self.descriptions.append(description)

    def refresh(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def no_delay(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0)


@pytest.fixture
def fake_tqdm(monkeypatch):
    """tqdm replaced by ``FakeBar``, shown (``NBYOC_PROGRESS=1``); the bars made."""
    monkeypatch.setenv("NBYOC_PROGRESS", "1")
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    FakeBar.made = []
    return FakeBar.made


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """An empty disk cache, so that Numba really compiles."""
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def notice_at_once(monkeypatch):
    """Every real compile is slow enough for the notice."""
    monkeypatch.setattr(progress, "NOTICE_AFTER", 0)


def notices(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("nbyoc: compiling ")]


# -- the units counted ----------------------------------------------------------------


def test_a_region_counts_as_one_unit_unless_its_backend_counts_its_own():
    with progress.progress(3, "compiling") as bar:
        with bar.region("a"), progress.progress(4, "a") as kernel:
            kernel.update()
            assert (bar.done, bar.total) == (1, 6)  # the region's one unit became 4
        assert (bar.done, bar.total) == (4, 6)
        with bar.region("b"):
            bar.update(5)  # never more than the region expects
        assert (bar.done, bar.total) == (5, 6)
        with bar.region("c"), progress.progress(2, "c") as ops:
            with progress.progress(7, "c's op kernel"):  # inside ops: not counted
                ops.update(7)
            assert (bar.done, bar.total) == (5, 7)
            ops.update()
            ops.update()
    assert (bar.done, bar.total) == (7, 7)


def test_the_bar_counts_regions_of_a_backend_that_counts_nothing(monkeypatch, capsys, no_delay):
    monkeypatch.setenv("NBYOC_PROGRESS", "1")
    nbyoc.compile(two_regions(), backend=ARITH)
    err = capsys.readouterr().err
    assert "nbyoc: compiling" in err and re.search(r"2/2 \[\d\d:\d\d\]", err)  # elapsed


def test_the_bar_counts_every_numba_function_of_an_llvm_kernel(cold, fake_tqdm, no_delay):
    fn = nbyoc.compile(staged(1.25), backend="llvm")
    n = function_count(fn.get_source())
    assert n == 2  # the stage and the kernel
    (bar,) = fake_tqdm
    # the region's one unit becomes the kernel's functions, counted one by one
    assert [total for _, total in bar.steps] == [n] * n
    assert [done for done, _ in bar.steps] == list(range(1, n + 1))
    assert "nbyoc: llvm_0 stage (1/2)" in bar.descriptions
    assert "nbyoc: llvm_0 kernel (2/2)" in bar.descriptions
    assert bar.closed


def test_a_kernel_loaded_from_the_cache_counts_as_done_and_says_nothing(
    cold, monkeypatch, capsys, notice_at_once
):
    fn = nbyoc.compile(staged(1.5), backend="llvm")
    del fn
    gc.collect()
    assert nbyoc.cache.release() >= 1  # (the next compile loads from the disk cache)
    capsys.readouterr()
    monkeypatch.setenv("NBYOC_PROGRESS", "1")
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    FakeBar.made = []
    nbyoc.compile(staged(1.5), backend="llvm")
    (bar,) = FakeBar.made
    # The kernel's function at once, when its module has run; the stage's machine code
    # stayed loaded (``kernels.release``), so it is not loaded again, nor counted.
    assert bar.steps == [(1, 1)]
    assert capsys.readouterr().err == ""


def test_examplejson_counts_the_kernels_of_its_ops(fake_tqdm, no_delay):
    x = nbyoc.var("x", (5,))
    nbyoc.compile(nbyoc.function([x], nbyoc.abs(x * 3.0 - 1.0)), backend="examplejson")
    (bar,) = fake_tqdm
    assert (bar.n, bar.total) == (3, 3)
    assert "nbyoc: examplejson_0 abs (3/3)" in bar.descriptions


# -- the notice of a slow compile -------------------------------------------------------


def test_a_slow_compile_without_a_bar_says_so_once(cold, monkeypatch, capsys, notice_at_once):
    monkeypatch.delenv("NBYOC_PROGRESS", raising=False)  # capsys's stderr: no bar
    nbyoc.compile(staged(1.75), backend="llvm")  # (two functions compiled: two chances)
    (line,) = notices(capsys.readouterr().err)
    assert line.startswith("nbyoc: compiling the llvm kernel of 'llvm_0' (2 Numba functions)")
    assert "load it from the cache in " in line and "NBYOC_PROGRESS=0" in line


def test_the_notice_waits_for_the_threshold_and_a_quick_compile_never_prints(monkeypatch, capsys):
    monkeypatch.delenv("NBYOC_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "NOTICE_AFTER", 0.2)
    with progress.progress(1, "quick") as bar:
        bar.working()  # done long before 0.2 s
    time.sleep(0.4)
    with progress.progress(1, "slow") as bar:
        bar.working()
        time.sleep(0.4)
        bar.working()
        time.sleep(0.4)
    assert notices(capsys.readouterr().err) == [
        f"nbyoc: compiling slow; the first compile of a model takes seconds; "
        f"later ones load it from the cache in {nbyoc.cache.cache_dir()} "
        f"(NBYOC_PROGRESS=0 turns this message off)"
    ]


def test_no_notice_from_a_compile_that_compiles_nothing(monkeypatch, capsys, notice_at_once):
    monkeypatch.delenv("NBYOC_PROGRESS", raising=False)
    x = nbyoc.var("x", (4,))
    f = nbyoc.function([x], x * 2.0 + 1.0)
    nbyoc.compile(f, backend="llvm")  # (compiled here or by another test, or cached)
    capsys.readouterr()
    nbyoc.compile(f, backend="llvm")  # from memory: nothing compiles
    nbyoc.compile(two_regions(), backend=ARITH)  # a backend that never says it works
    assert capsys.readouterr().err == ""


# -- when it is shown -----------------------------------------------------------------


@pytest.mark.parametrize("setting", ["0", "", "auto"])
def test_no_bar_when_turned_off_or_not_a_terminal(monkeypatch, capsys, no_delay, setting):
    monkeypatch.setenv("NBYOC_PROGRESS", setting)  # capsys's stderr is not a terminal
    nbyoc.compile(two_regions(), backend=ARITH)
    assert capsys.readouterr().err == ""


def test_nbyoc_progress_0_silences_the_bar_and_the_notice(
    cold, monkeypatch, capsys, fake_tqdm, notice_at_once
):
    monkeypatch.setenv("NBYOC_PROGRESS", "0")
    fn = nbyoc.compile(staged(2.0), backend="llvm")
    assert fn(np.ones((64, 128), np.float32))[1].shape == (64,)
    assert fake_tqdm == [] and capsys.readouterr().err == ""


def test_a_terminal_gets_the_bar_unless_turned_off(monkeypatch, capsys, no_delay):
    monkeypatch.delenv("NBYOC_PROGRESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress.wanted()
    monkeypatch.setenv("NBYOC_PROGRESS", "0")
    assert not progress.wanted()


def test_without_tqdm_asking_for_progress_says_what_to_install(monkeypatch, no_delay):
    monkeypatch.setenv("NBYOC_PROGRESS", "1")
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    with pytest.warns(UserWarning, match=r"pip install 'nbyoc\[progress\]'"):
        nbyoc.compile(two_regions(), backend=ARITH)
    monkeypatch.setenv("NBYOC_PROGRESS", "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbyoc.compile(two_regions(), backend=ARITH)  # not asked for: no warning


def test_without_tqdm_a_slow_compile_still_says_so(cold, monkeypatch, capsys, notice_at_once):
    monkeypatch.setenv("NBYOC_PROGRESS", "1")
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with pytest.warns(UserWarning, match="needs tqdm"):
        nbyoc.compile(staged(2.25), backend="llvm")
    assert len(notices(capsys.readouterr().err)) == 1


def test_csource_says_which_c_file_is_slow(cold, monkeypatch, capsys, notice_at_once):
    monkeypatch.delenv("NBYOC_PROGRESS", raising=False)
    nbyoc.compile(two_regions(), backend="csource")  # two C files, one compile: one line
    (line,) = notices(capsys.readouterr().err)
    assert line.startswith("nbyoc: compiling the C code of 'csource_0' (")
