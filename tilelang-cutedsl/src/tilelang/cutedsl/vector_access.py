"""Vectorized loops (T.Parallel partitioned into per-thread vectors, ``T.vectorized``) as
128-bit (or 64/32-bit) global accesses: the printer's half for ForKind.VECTORIZED loops.

A loop ``for x in vectorized(n): Y[b + x] = f(X[b' + x], ...)`` whose global operands are
contiguous in ``x`` and start at a multiple of ``n`` elements becomes: one
``cute.autovec_copy`` of ``n`` elements per distinct global load into a register tensor,
the body per element on registers, and one vector copy of the stored register tensor
back. The alignment claim (``.align(bytes)``) holds because the tensors' own alignment
(the kernel's min_alignment, which the argument binder checks) is at least the vector's
size, and the offsets are multiples of ``n``. Anything else (a condition in the loop, a
guarded load, an offset not known to be aligned) prints as the plain unrolled loop.
Mixed into KernelPrinter; uses its ``names``, ``params``, ``expr``, ``emit``, ``bind``,
``body``, ``lines``, ``alignment``, ``vector_loads``, ``vector_var`` and ``vector_binds``."""

from __future__ import annotations

from typing import Any

from .cute_emit import dtype_of

VECTOR_BYTES = (4, 8, 16)


def _loads(expr: Any) -> list[Any] | None:
    """The buffer loads of ``expr``; None when a load sits under a lazy condition."""
    import tvm
    import tvm_ffi
    from tvm.ir import TensorLoad

    found: list[Any] = []
    lazy = [False]

    def visit(node: Any) -> None:
        if isinstance(node, TensorLoad):
            found.append(node)
        elif getattr(getattr(node, "op", None), "name", "") in ("tirx.if_then_else", "prim.if_then_else"):
            lazy[0] = True

    tvm_ffi.structural_walk(expr, [(TensorLoad, visit), (tvm.ir.Call, visit)])
    return None if lazy[0] else found


class VectorAccesses:
    def _vector_base(self, index: Any, var: Any, lanes: int) -> Any:
        """``index - var`` when it is free of ``var`` and a multiple of ``lanes``, else None."""
        from tilelang.plugin import substitute
        from tvm import tirx
        from tvm.sym.analyzer import Analyzer

        analyzer = Analyzer()
        for bound, value in reversed(self.vector_binds):  # the loop's CSE variables, inlined
            index = substitute(index, [(bound, value)])
        base = analyzer.simplify(substitute(index, [(var, tirx.const(0, "int32"))]))
        if not analyzer.can_prove_equal(index, base + var):
            return None
        modular = analyzer.modular_set(base)
        if int(modular.coeff) % lanes or int(modular.base) % lanes:
            return None
        return base

    def vector_loop(self, node: Any, depth: int) -> bool:
        """Print ``node`` (a VECTORIZED loop) with vector global accesses; False when it
        does not have the shape above (the caller prints it as a plain loop)."""
        from tilelang.plugin import uses_var
        from tvm import tirx

        if isinstance(node.body, tirx.IfThenElse) and node.body.else_case is None and \
                not uses_var(node.body.condition, node.loop_var):
            # a condition of the whole vector (an edge row): tested once, outside
            self.emit(depth, f"if {self.expr(node.body.condition)}:")
            inner = tirx.For(node.loop_var, node.min, node.extent, node.kind, node.body.then_case)
            if self.vector_loop(inner, depth + 1):
                return True
            self.lines.pop()
            return False
        # TVM's CSE leaves Bind statements before the store: analysed through their values
        stmts = list(node.body.seq) if isinstance(node.body, tirx.SeqStmt) else [node.body]
        *binds, store = stmts
        if not isinstance(store, tirx.BufferStore) or not all(isinstance(b, tirx.Bind) for b in binds) or \
                not isinstance(node.extent, tirx.IntImm) or not isinstance(node.min, tirx.IntImm) or \
                int(node.min.value) != 0 or len(store.indices) != 1:
            return False
        self.vector_binds = [(b.var, b.value) for b in binds]
        lanes, var = int(node.extent.value), node.loop_var
        loads = _loads(store.value)
        if loads is None:
            return False
        plan: list[tuple[Any, Any, bool]] = []  # (buffer, base, is_store) of the global accesses
        for buffer, index, is_store in [(load.source, load.indices[0], False) for load in loads] + \
                [(store.buffer, store.indices[0], True)]:
            if self.names.get(hash(buffer)) not in self.params:
                continue  # shared and register accesses stay scalar
            bytes_ = lanes * buffer.dtype.bits // 8
            base = self._vector_base(index, var, lanes)
            if base is None or bytes_ not in VECTOR_BYTES or bytes_ > self.alignment:
                return False
            plan.append((buffer, base, is_store))
        if not plan:
            return False
        x = self.bind(var)
        self.vector_var = var
        stored = None
        for buffer, base, is_store in plan:
            name, dtype = self.names[hash(buffer)], dtype_of(buffer.dtype, f"buffer {buffer.name!r}")
            bytes_ = lanes * buffer.dtype.bits // 8
            view = f"cute.make_tensor(({name}.iterator + ({self.expr(base)})).align({bytes_}), cute.make_layout({lanes}))"
            key = (hash(buffer), str(base))
            if key in self.vector_loads:  # read and written in place (Y = a X + Y): one register
                reg = self.vector_loads[key][0]
            else:
                reg = f"{name}_v{len(self.lines)}"
                self.emit(depth, f"{reg} = cute.make_rmem_tensor(cute.make_layout({lanes}), {dtype})")
                if not is_store:
                    self.emit(depth, f"cute.autovec_copy({view}, {reg})")
            if is_store:
                stored = (reg, view)
            self.vector_loads[key] = (reg, x)
        self.emit(depth, f"for {x} in cutlass.range_constexpr({lanes}):")
        self.body(node.body, depth + 1)
        if stored is not None:
            self.emit(depth, f"cute.autovec_copy({stored[0]}, {stored[1]})")
        self.vector_loads.clear()
        return True

    def vector_element(self, buffer: Any, index: Any) -> str | None:
        """Inside a vector loop: the register element that stands for ``buffer[index]``."""
        if not self.vector_loads:
            return None
        base = self._vector_base(index, self.vector_var, 1)
        hit = self.vector_loads.get((hash(buffer), str(base))) if base is not None else None
        return None if hit is None else f"{hit[0]}[{hit[1]}]"
