"""Long compiles show their progress on stderr (through tqdm), and only when wanted."""

import sys
import warnings

import pytest

import nbyoc
from nbyoc import progress

from .transform.backends import ARITH


def two_regions():
    x = nbyoc.var("x", (3,))
    return nbyoc.function([x], nbyoc.exp(x * 2.0) + 1.0)  # exp stays on the host


@pytest.fixture
def no_delay(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0)


def test_the_bar_counts_regions_when_asked(monkeypatch, capsys, no_delay):
    monkeypatch.setenv("NBYOC_PROGRESS", "1")
    nbyoc.compile(two_regions(), backend=ARITH)
    err = capsys.readouterr().err
    assert "nbyoc: compiling" in err and "/2 [" in err and "region" in err


@pytest.mark.parametrize("setting", ["0", "", "auto"])
def test_no_bar_when_turned_off_or_not_a_terminal(monkeypatch, capsys, no_delay, setting):
    monkeypatch.setenv("NBYOC_PROGRESS", setting)  # capsys's stderr is not a terminal
    nbyoc.compile(two_regions(), backend=ARITH)
    assert capsys.readouterr().err == ""


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
