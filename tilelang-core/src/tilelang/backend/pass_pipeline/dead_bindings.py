"""DropDeadBindings: a scalar binding nothing reads is removed, where its value only reads
state.

TVM's ``CommonSubexprElim`` (the end of the shared middle end) names repeated index
expressions (``cse_v2 = bx * 4096 + tx``); a device-side ``StmtSimplify`` after the host /
device split substitutes those values back into their uses and keeps the bindings. Every
such binding is then dead: a 4 x 1024 rms_norm carried 33 ``int cse_vN = ...;`` lines
that nvcc drops again, with a warning each. A binding whose value calls something with an
effect (an atomic, a random draw) stays, used or not. Removing one binding can leave
another dead (``a = ...; b = a + 1`` with ``b`` unread), so the pass repeats until nothing
changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .pipeline import prim_func_pass

_HARMLESS_EFFECTS = ("ExprAnnotation", "Pure", "ReadState")


def only_reads_state(expr: Any) -> bool:
    """Whether every call in ``expr`` is pure or only reads state (TVM's
    ``TCallEffectKind``), so that evaluating it once more, or not at all, changes nothing."""
    import tvm
    import tvm_ffi
    from tvm.ir import Call
    from tvm.tirx import CallEffectKind

    harmless = {getattr(CallEffectKind, name).value for name in _HARMLESS_EFFECTS}
    calls: list[Any] = []
    tvm_ffi.structural_walk(expr, (Call, calls.append))
    for call in calls:
        effect = call.op.get_attr("TCallEffectKind") if isinstance(call.op, tvm.ir.Op) else None
        if effect is None or int(effect.value if hasattr(effect, "value") else effect) not in harmless:
            return False
    return True


def _drop_once(body: Any) -> tuple[Any, int]:
    import tvm_ffi
    from tvm import tirx

    uses: Counter = Counter()
    tvm_ffi.structural_walk(body, (tirx.Var, lambda var: uses.update((var,))))
    dropped = [0]

    def dead(var: Any, value: Any) -> bool:
        # the binding's own definition is the var's one occurrence
        return uses[var] <= 1 and only_reads_state(value)

    def on_seq(seq: Any) -> Any:
        kept = [s for s in seq.seq if not (isinstance(s, tirx.Bind) and dead(s.var, s.value))]
        if len(kept) == len(seq.seq):
            return seq
        dropped[0] += len(seq.seq) - len(kept)
        if not kept:
            return tirx.Evaluate(0)
        return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

    body = tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")
    return body, dropped[0]


def _drop_dead_bindings(func: Any, mod: Any, ctx: Any) -> Any:
    body, dropped = func.body, 1
    while dropped:
        body, dropped = _drop_once(body)
    return func if body.same_as(func.body) else func.with_body(body)


def DropDeadBindings() -> Any:
    """Remove scalar bindings (``Bind``: TVM's flat let, which scopes the statements after it)
    nothing reads, whose values only read state; run after the last simplification before
    code generation."""
    return prim_func_pass(_drop_dead_bindings, "tl.DropDeadBindings")
