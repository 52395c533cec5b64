"""``transform.support``: the registry the passes ask, and the reasons a backend refuses."""

import pytest

import nbyoc
from nbyoc.errors import NbyocError, UnknownBackendError
from nbyoc.transform.support import HOST, OperatorSupport, refusal, supports


@pytest.fixture
def backend(request):
    """A backend name private to one test (registries refuse duplicates)."""
    name = "".join(c if c.isalnum() else "_" for c in request.node.name)
    return f"s_{abs(hash(name)) % 10**8}_{name[-40:]}"


def test_a_predicate_may_answer_with_its_reason(backend):
    nbyoc.register_op_support(backend, "relu", lambda c: c.type.ndim == 1 or "only vectors")
    assert supports(backend, nbyoc.relu(nbyoc.var("x", (3,))))
    assert refusal(backend, nbyoc.relu(nbyoc.var("x", (3, 3)))) == "only vectors"


@pytest.mark.parametrize("answer", [False, None, ""])
def test_a_refusal_without_a_reason_says_the_predicate_refused(backend, answer):
    nbyoc.register_op_support(backend, "exp", lambda call: answer)
    assert refusal(backend, nbyoc.exp(nbyoc.var("x", (3,)))) == "its predicate refused"


def test_a_string_is_never_taken_for_yes(backend):
    # bool("reason") is True: a string must still mean "refused".
    nbyoc.register_op_support(backend, "exp", lambda call: "never")
    assert not supports(backend, nbyoc.exp(nbyoc.var("x", (3,))))
    assert not OperatorSupport([backend]).takes(nbyoc.exp(nbyoc.var("x", (3,))))


def test_an_op_without_a_rule_is_named(backend):
    nbyoc.register_op_support(backend, "add")
    assert refusal(backend, nbyoc.exp(nbyoc.var("x", (3,)))) == "no rule for op exp"


def test_a_failing_predicate_is_an_error_naming_backend_and_op(backend):
    nbyoc.register_op_support(backend, "exp", lambda call: 1 / 0)
    with pytest.raises(NbyocError, match=f"{backend}/exp"):
        supports(backend, nbyoc.exp(nbyoc.var("x", (3,))))


def test_operator_support_asks_in_priority_order_and_keeps_each_reason(backend):
    nbyoc.register_op_support(backend, "exp", lambda call: "busy")
    x = nbyoc.var("x", (3,))
    support = OperatorSupport([backend, "llvm"])
    assert support.target(nbyoc.exp(x)) == "llvm"
    assert support.refusals(nbyoc.exp(x)) == [(backend, "busy")]
    assert support.target(x @ x) == "llvm" and support.refusals(x @ x) == [
        (backend, "no rule for op matmul")
    ]


def test_when_no_backend_takes_a_call_the_host_does_and_every_reason_is_kept():
    q = nbyoc.cast(nbyoc.var("q", (2,), "float8_e4m3fn"), "float32")
    support = OperatorSupport(["csource", "llvm", HOST])
    assert support.target(q) == HOST
    assert [b for b, _ in support.refusals(q)] == ["csource", "llvm"]
    assert all("float8_e4m3fn not supported" in reason for _, reason in support.refusals(q))


def test_the_shipped_backends_say_why():
    big = nbyoc.var("i", (300, 300), "int32")
    assert "matmul of integers" in refusal("llvm", big @ big)
    assert refusal("examplejson", big @ big) == refusal("llvm", big @ big)
    assert "bfloat16" in refusal("csource", nbyoc.var("b", (2,), "bfloat16") + 1)
    empty = nbyoc.var("e", (0, 3))
    assert "empty" in refusal("llvm", empty + 1.0)


def test_an_unknown_backend_is_refused_by_name():
    with pytest.raises(UnknownBackendError, match="nosuch"):
        OperatorSupport(["nosuch"])


def test_a_backend_with_only_a_codegen_is_known(backend):
    nbyoc.register_codegen(backend)(lambda func: None)
    assert OperatorSupport([backend]).target(nbyoc.exp(nbyoc.var("x", (3,)))) == HOST
