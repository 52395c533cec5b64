"""The host executor and Executable: multi-output graphs, fresh outputs, argument
checking, module calls and run-time errors."""

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings

import nbyoc
from nbyoc.errors import (
    ArgumentCountError,
    ArgumentError,
    DTypeMismatchError,
    ExecutionError,
    ShapeMismatchError,
    UnknownBackendError,
)
from nbyoc.ir import Call, GlobalVar, IRModule
from nbyoc.runtime import HostFunction

from ..strategies import graphs, random_inputs


def reference():
    a, b, c, d = (nbyoc.var(n, (10, 10)) for n in "abcd")
    return nbyoc.function([a, b, c, d], ((a + b) - c) * d)


def test_reference_graph_matches_numpy():
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.standard_normal((10, 10)).astype(np.float32) for _ in range(4))
    out = nbyoc.compile(reference(), backend="host")(a, b, c, d)
    np.testing.assert_array_equal(out, ((a + b) - c) * d)


def test_multi_output_graph_with_nested_tuples_and_repeats():
    x = nbyoc.var("x", (2, 3))
    s = nbyoc.sum(x, axis=1)
    inner = nbyoc.tuple([s, x * 2.0])
    f = nbyoc.function([x], [inner, s, s, inner[1]])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    (s1, twice), s2, s3, twice2 = nbyoc.compile(f, backend="host")(data)
    np.testing.assert_array_equal(s1, [3, 12])
    np.testing.assert_array_equal(twice, data * 2)
    for arr in (s2, s3):
        np.testing.assert_array_equal(arr, s1)
    np.testing.assert_array_equal(twice2, twice)
    outputs = [s1, twice, s2, s3, twice2]
    assert len({id(o) for o in outputs}) == 5, "repeated outputs must be distinct arrays"


def test_outputs_never_alias_inputs_constants_or_views():
    x = nbyoc.var("x", (2, 3))
    k = nbyoc.const(np.ones((2, 3), np.float32))
    f = nbyoc.function([x], [x, k, nbyoc.transpose(x), nbyoc.reshape(x, (6,))])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    same, const, t, r = nbyoc.compile(f, backend="host")(data)
    for out in (same, const, t, r):
        assert not np.shares_memory(out, data) and out.flags.c_contiguous and out.flags.writeable
    const[0, 0] = 5  # must not change the graph's constant
    np.testing.assert_array_equal(nbyoc.compile(f, backend="host")(data)[1], np.ones((2, 3)))
    np.testing.assert_array_equal(t, data.T)


def test_a_value_written_into_is_not_a_result_a_reader_returned_unchanged():
    """``clip`` with no bound returns its operand itself; a later ``add`` that was free
    to write into that operand (its last reader) overwrote the clip's result too (found
    by tests/transform/test_partition.py's random graphs: an output doubled)."""
    x = nbyoc.var("x", (4,))
    chosen = nbyoc.where(nbyoc.less(x, x), x, x)
    f = nbyoc.function([x], [nbyoc.clip(chosen), x + chosen])
    data = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    clipped, total = HostFunction(f)(data)
    np.testing.assert_array_equal(clipped, data)
    np.testing.assert_array_equal(total, data + data)


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_results_have_the_declared_types(f):
    with np.errstate(all="ignore"):
        out = nbyoc.compile(f, backend="host")(*random_inputs(f))
    types = f.ret_type.fields if isinstance(out, tuple) else [f.ret_type]
    outs = out if isinstance(out, tuple) else [out]
    for arr, t in zip(outs, types):
        assert arr.shape == t.shape and arr.dtype.name == t.dtype


@pytest.mark.parametrize(
    "args,error,needle",
    [
        ([np.zeros((10, 10), np.float32)] * 3, ArgumentCountError, "takes 4 argument(s)"),
        ([np.zeros((10, 10), np.float32)] * 5, ArgumentCountError, "got 5"),
        ([np.zeros((10, 10), np.float32)] * 3 + [np.zeros((10, 10))], DTypeMismatchError,
         "argument 3 (d) should be Tensor[(10, 10), float32], got dtype float64"),
        ([np.zeros((10, 10), np.float32)] * 3 + [np.zeros((10, 9), np.float32)], ShapeMismatchError,
         "got shape (10, 9)"),
        ([np.zeros((10, 10), np.float32)] * 3 + [[[0.0] * 10] * 10], ArgumentError,
         "should be a numpy.ndarray"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_with_a_clear_message(args, error, needle):
    with pytest.raises(error) as info:
        nbyoc.compile(reference(), backend="host")(*args)
    assert needle in str(info.value)


def test_numpy_scalars_and_non_contiguous_arrays_are_accepted():
    s = nbyoc.var("s", (), "float64")
    x = nbyoc.var("x", (3, 2), "float64")
    fn = nbyoc.compile(nbyoc.function([s, x], x * s), backend="host")
    strided = np.arange(6.0).reshape(2, 3).T
    np.testing.assert_array_equal(fn(np.float64(2), strided), strided * 2)


def test_runtime_failures_name_the_node():
    x = nbyoc.var("x", (2,), "int32")
    y = nbyoc.var("y", (2,), "int32")
    f = nbyoc.function([x, y], (x + 1) ** y + 1)
    assert "%2 = power(%1, %y)" in str(f)  # the error's label points at this line
    with pytest.raises(ExecutionError, match=r"%2 = power\(...\) failed: ValueError"):
        nbyoc.compile(f, backend="host")(np.array([1, 2], np.int32), np.array([1, -1], np.int32))


def test_module_functions_call_each_other_on_the_host():
    p = nbyoc.var("p", (3,))
    double = nbyoc.function([p], p * 2.0)
    q = nbyoc.var("q", (3,))
    gv_double = GlobalVar("double", double.type)
    quad = nbyoc.function([q], [Call(gv_double, [Call(gv_double, [q])]), q])
    a = nbyoc.var("a", (3,))
    gv_quad = GlobalVar("quad", quad.type)
    main = nbyoc.function([a], Call(gv_quad, [a])[0] + 1.0)
    mod = IRModule({"main": main, "quad": quad, "double": double})
    out = nbyoc.compile(mod, backend="host")(np.ones(3, np.float32))
    np.testing.assert_array_equal(out, [5, 5, 5])


def test_intermediates_are_released_after_their_last_use():
    x = nbyoc.var("x", (1000,))
    # %0 = negative (last read by sum), %1 = sum, the result = abs
    f = nbyoc.function([x], nbyoc.abs(nbyoc.sum(-x)))
    run = HostFunction(f)
    negated = []
    alive_at_last_step = []

    def keep_negative(x):
        negated.append(weakref.ref(out := np.negative(x)))
        return out

    def check_abs(x):
        gc.collect()
        alive_at_last_step.append(negated[0]() is not None)
        return np.abs(x)

    spies = {"%0": keep_negative, "the": check_abs}
    run._steps = [s._replace(fn=spies.get(s.label.split()[0], s.fn)) for s in run._steps]
    run(np.zeros(1000, np.float32))
    assert alive_at_last_step == [False], "%0 was last read by sum and should be freed by now"


def test_dying_temporaries_are_reused_like_numpy_does():
    run = HostFunction(reference())
    assert [s.reuse >= 0 for s in run._steps] == [False, True, True]


def test_temporaries_seen_through_views_or_tuples_are_not_overwritten():
    x = nbyoc.var("x", (2, 3))
    t = nbyoc.exp(x)
    view = nbyoc.reshape(t, (2, 3))  # a view of t's buffer
    u = nbyoc.exp(-x)
    pair = nbyoc.tuple([u, x])
    f = nbyoc.function([x], [view, t + 1.0, pair, u * 2.0, x * 3.0])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    v, t1, (u0, x0), u2, x3 = nbyoc.compile(f, backend="host")(data)
    np.testing.assert_allclose(v, np.exp(data), rtol=1e-6)
    np.testing.assert_allclose(t1, np.exp(data) + 1, rtol=1e-6)
    np.testing.assert_allclose(u0, np.exp(-data), rtol=1e-6)
    np.testing.assert_allclose(u2, 2 * np.exp(-data), rtol=1e-6)
    np.testing.assert_array_equal(x0, data)
    np.testing.assert_array_equal(x3, data * 3)
    np.testing.assert_array_equal(data, np.arange(6).reshape(2, 3)), "the input must not change"


def test_unknown_backend_lists_the_registered_ones():
    with pytest.raises(UnknownBackendError, match="registered backends: host"):
        nbyoc.compile(reference(), backend="tpu")


def test_compile_refuses_other_objects():
    with pytest.raises(nbyoc.NbyocError, match="takes an nbyoc Function or IRModule"):
        nbyoc.compile(lambda x: x)


def test_executable_describes_itself():
    fn = nbyoc.compile(reference(), backend="host")
    assert "a: Tensor[(10, 10), float32]" in fn.signature
    assert fn.backend == "host" and fn.get_source() == "" and fn.sources == {}
    assert nbyoc.structural_equal(fn.module["main"], reference())
    assert repr(fn).startswith("<nbyoc.Executable backend='host'")


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
def test_parameters_used_in_another_order_still_call_the_external_function_directly(backend):
    """``a * x + b * y`` of ``(x, y, a, b)``: the partitioner orders the external
    function's inputs by first use (a, x, b, y); main is still one call, reordered,
    without the host executor, and a wrong argument is named by main's parameters."""
    x, y = nbyoc.var("x", (3, 4)), nbyoc.var("y", (3, 4))
    a, b = nbyoc.var("a", ()), nbyoc.var("b", ())
    fn = nbyoc.compile(nbyoc.function([x, y, a, b], a * x + b * y), backend=backend)
    (call,) = fn.module["main"].body.args[0:1]
    assert call is a  # the external function's first input is main's third parameter
    assert fn._direct is not None
    data = [np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((3, 4), np.float32),
            np.asarray(2, np.float32), np.asarray(-1, np.float32)]  # fmt: skip
    np.testing.assert_array_equal(fn(*data), 2 * data[0] - data[1])
    with pytest.raises(nbyoc.errors.ShapeMismatchError, match="y"):
        fn(data[0], np.ones((4, 3), np.float32), data[2], data[3])


@pytest.mark.parametrize("bounds", [(None, None), (0, 255), (-5, 300)])
def test_a_reference_returning_its_input_is_never_written_into(bounds):
    # clip with no bound that binds returns its operand itself; the multiply after it
    # must allocate rather than write into the caller's array (issue 35, item 1).
    img = np.arange(10, dtype=np.uint8)
    x = nbyoc.var("img", (10,), "uint8")
    y = nbyoc.clip(x, *bounds) * nbyoc.const(np.uint8(2))
    fn = nbyoc.compile(nbyoc.function([x], y), backend="host")
    out = fn(img)
    np.testing.assert_array_equal(img, np.arange(10, dtype=np.uint8))
    np.testing.assert_array_equal(out, np.clip(img, 0, 255) * np.uint8(2))


def test_a_reference_result_found_not_private_is_written_into_by_no_later_step():
    # The check is made where the value is computed, so every later reader sees it:
    # here two steps could each have written into the clip's result.
    x = nbyoc.var("x", (4,))
    c = nbyoc.clip(x, None, None)
    fn = nbyoc.compile(nbyoc.function([x], [(c + 1.0) * 2.0, c * 3.0]), backend="host")
    data = np.arange(4, dtype=np.float32)
    first, second = fn(data)
    np.testing.assert_array_equal(data, np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(first, (data + 1) * 2)
    np.testing.assert_array_equal(second, data * 3)
