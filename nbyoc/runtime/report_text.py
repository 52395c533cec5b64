"""Times, sizes and tables as people read them, for the reports that print them (the
demo, profiles, the test kit's report).

>>> seconds_text(0.00123), seconds_text(2.5e-8), bytes_text(1536), bytes_text(12)
('1.23 ms', '25 ns', '1.54 kB', '12 B')
>>> print(text_table(["op", "cases"], [["add", 3], ["multiply", 12]], right={"cases"}))
op        cases
add           3
multiply     12
"""

from __future__ import annotations


def seconds_text(seconds: float) -> str:
    """``seconds`` in s, ms, us or ns, to three significant digits."""
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def bytes_text(count: int) -> str:
    """``count`` bytes in B, kB, MB or GB (powers of 1000), to three significant digits."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def text_table(header: list[str], rows: list[list], right: set[str] = frozenset()) -> str:
    """``rows`` under ``header`` in aligned columns (those named in ``right`` aligned
    right, for numbers), without trailing spaces."""
    cells = [list(header), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[k]) for row in cells) for k in range(len(header))]
    lines = []
    for row in cells:
        parts = [
            c.rjust(w) if name in right else c.ljust(w) for c, w, name in zip(row, widths, header)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
