"""The DLTensor wrapper and the checked, exported entry point of a csource function.

``<sym>_wrapper(DLTensor* arg0, ..., DLTensor* out)`` casts ``->data`` (plus
``byte_offset``) and calls the subgraph function, as in the guide.
``<sym>(DLTensor** args, int32_t num_args)`` is what callers use: it checks
everything the kernels rely on and returns a non-zero code with a message
(``<sym>_last_error()``, per thread) instead of reading or writing out of
bounds, and refuses an output that overlaps another argument. Codes: 1
argument count, 2 a bad tensor, 3 an error NumPy would raise (negative
integer power), 4 out of memory, 5 a tensor whose data is not aligned to its
element size (the caller copies such an input).
"""

from __future__ import annotations

from . import rules

CHECK_TENSOR = """\
static int nbyoc_check_tensor(const DLTensor* t, const char* what, int32_t ndim,
                              const int64_t* shape, uint8_t code, uint8_t bits,
                              char* message, size_t length) {
  if (t == NULL) { snprintf(message, length, "%s is NULL", what); return 2; }
  if (t->device.device_type != 1) {
    snprintf(message, length, "%s is not on the CPU (device type %d)", what,
             (int)t->device.device_type);
    return 2;
  }
  if (t->ndim != ndim) {
    snprintf(message, length, "%s should have %d dimensions, got %d", what, (int)ndim,
             (int)t->ndim);
    return 2;
  }
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1) {
    snprintf(message, length,
             "%s should have dtype code %d with %d bits, got code %d, %d bits, %d lanes", what,
             (int)code, (int)bits, (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes);
    return 2;
  }
  int64_t size = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (t->shape == NULL || t->shape[i] != shape[i]) {
      snprintf(message, length, "%s has the wrong size on axis %d: expected %lld, got %lld", what,
               (int)i, (long long)shape[i], t->shape == NULL ? -1LL : (long long)t->shape[i]);
      return 2;
    }
    size *= shape[i];
  }
  if (t->strides != NULL) {
    int64_t expected = 1;
    for (int32_t i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t->strides[i] != expected) {
        snprintf(message, length, "%s is not C-contiguous (stride %lld on axis %d)", what,
                 (long long)t->strides[i], (int)i);
        return 2;
      }
      expected *= shape[i];
    }
  }
  if (t->data == NULL && size > 0) { snprintf(message, length, "%s has no data", what); return 2; }
  /* The kernels dereference typed pointers: data at an address that is not a multiple of
     the element size is undefined behaviour (and vectorised code may fault on it). */
  uintptr_t address = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (size > 0 && bits >= 16 && address % (uintptr_t)(bits / 8) != 0) {
    snprintf(message, length, "%s is not aligned to its %d-byte elements", what, (int)(bits / 8));
    return 5;
  }
  return 0;
}

static size_t nbyoc_nbytes(const DLTensor* t) {
  size_t n = t->dtype.bits / 8;
  for (int32_t i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* Do two checked tensors share any byte? (An output must not alias another argument.) */
static int nbyoc_overlap(const DLTensor* a, const DLTensor* b) {
  size_t na = nbyoc_nbytes(a), nb = nbyoc_nbytes(b);
  if (na == 0 || nb == 0) return 0;
  uintptr_t pa = (uintptr_t)a->data + a->byte_offset, pb = (uintptr_t)b->data + b->byte_offset;
  return pa < pb + nb && pb < pa + na;
}
"""


def entry_point_source(graph) -> str:
    """The wrapper, the per-thread error message and the exported entry point."""
    sym = graph.symbol
    arguments = graph.arguments()
    n_in = len(graph.func.params)
    wrapper_params = [f"DLTensor* arg{k}" for k in range(n_in)] + [
        f"DLTensor* {name}" for name, _, out in arguments if out
    ]
    tensor_names = [f"arg{k}" for k in range(n_in)] + [name for name, _, out in arguments if out]
    casts = []
    for (_, t, out), tensor in zip(arguments, tensor_names):
        c_type = rules.C_TYPES[t.dtype]
        qualifier = "" if out else "const "
        casts.append(f"({qualifier}{c_type}*)((char*){tensor}->data + {tensor}->byte_offset)")
    lines = [
        CHECK_TENSOR,
        f"NBYOC_EXPORT int {sym}_wrapper({', '.join(wrapper_params)}) {{",
        f"  return {sym}_({', '.join(casts)});",
        "}",
        "",
        f"static _Thread_local char {sym}_message[512];",
        "",
        f"NBYOC_EXPORT const char* {sym}_last_error(void) {{ return {sym}_message; }}",
        "",
        f"NBYOC_EXPORT int {sym}(DLTensor** args, int32_t num_args) {{",
        f"  {sym}_message[0] = 0;",
        f"  {rules.ERROR_FLAG} = NULL;",
        f"  if (args == NULL || num_args != {len(arguments)}) {{",
        f"    snprintf({sym}_message, sizeof {sym}_message,",
        f'             "{sym} takes {len(arguments)} arguments ({n_in} inputs, then '
        f'{len(arguments) - n_in} outputs), got %d", (int)num_args);',
        "    return 1;",
        "  }",
        "  int rc;",
    ]
    for k, (name, t, out) in enumerate(arguments):
        dims = ", ".join(str(d) for d in t.shape) or "0"
        code, bits = rules.DLPACK_DTYPES[t.dtype]
        what = f"argument {k} ({'output' if out else 'input'} {name})"
        lines += [
            f"  static const int64_t shape_{k}[] = {{{dims}}};",
            f'  rc = nbyoc_check_tensor(args[{k}], "{what}", {len(t.shape)}, shape_{k}, {code}, '
            f"{bits}, {sym}_message, sizeof {sym}_message);",
            "  if (rc) return rc;",
        ]
    lines += [
        "  for (int32_t k = 0; k < num_args; ++k) {",
        f"    for (int32_t j = {n_in}; j < num_args; ++j) {{",
        "      if (j != k && nbyoc_overlap(args[j], args[k])) {",
        f"        snprintf({sym}_message, sizeof {sym}_message,",
        '                 "output argument %d overlaps argument %d; pass distinct arrays",',
        "                 (int)j, (int)k);",
        "        return 2;",
        "      }",
        "    }",
        "  }",
    ]
    call_args = ", ".join(f"args[{k}]" for k in range(len(arguments)))
    lines += [
        f"  rc = {sym}_wrapper({call_args});",
        f"  if (rc && {rules.ERROR_FLAG})",
        f'    snprintf({sym}_message, sizeof {sym}_message, "%s", {rules.ERROR_FLAG});',
        "  return rc;",
        "}",
    ]
    return "\n".join(lines)
