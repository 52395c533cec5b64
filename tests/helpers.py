"""Helpers shared by the backend tests."""

from __future__ import annotations

import nbyoc
from nbyoc.runtime import get_loader


def reload(fn: nbyoc.Executable) -> nbyoc.Executable:
    """The same compiled work after a save -> load round trip of the IR and of
    every runtime module (through the registered loaders)."""
    module = nbyoc.from_json(nbyoc.to_json(fn.module))
    runtime = {
        name: get_loader(m.type_key)(m.save_to_bytes()) for name, m in fn.runtime_modules.items()
    }
    return nbyoc.Executable(module, runtime, fn.backend)


def external(params, outputs, symbol: str, compiler: str) -> nbyoc.ir.Function:
    """An external function, as the partitioner would make it."""
    body = outputs[0] if len(outputs) == 1 else outputs
    return nbyoc.function(params, body).with_attrs(Compiler=compiler, global_symbol=symbol)
