"""The command line's subcommands, one module each (``python -m nbyoc --help``), with what
they share: reading a model and its input shapes (``models``), and the exit convention
(``errors``: one line, exit status 2; output piped into ``head`` ends quietly)."""
