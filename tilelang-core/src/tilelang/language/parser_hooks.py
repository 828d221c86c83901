"""Extensions of TVMScript's tirx parser, for upstream's spellings (below; a macro's
``return`` value and ``T.Ref`` parameters, ``macros.py``; also a Python
literal compared with a bfloat16 or fp8 expression, ``_compare_literals_in_narrow_floats``),
and a macro call's search for its parser that keeps no frames alive (``_find_parser``).

A kernel body may give a Python callable a name. Upstream's kernels pick a tile op in the
body (``scan = T.cumsum if op == "cumsum" else T.cummax``, then ``scan(A_shared, dim=0)``);
TVMScript 0.27 binds every assigned value as IR and fails on a function ("Cannot
automatically inference the type"). Upstream's parser keeps such a value as a plain Python
name; so does this hook, for callables that are not TVM objects.

``name = expr`` is a binding, as upstream's parser makes it, where the function (or macro)
assigns that name nowhere else and the value is pure: index arithmetic with no memory read
and no call with an effect, or another variable, which the name then stands for. A
constant (``rows = 128``) stays the constant. So ``bx = n - 1 - block`` is an expression
the compiler sees through (bounds, addresses, tensor-map coordinates), and ``T.Parallel(rows,
64)`` has a static extent. TVMScript 0.27 makes every such name a one-element scalar
buffer, which the compiler cannot see through: the loop over ``rows`` became a dynamic loop
over a fragment demoted to shared memory. A name assigned twice or augmented (``x += 1``), a
value that reads memory, and ``x: T.int32 = ...`` (upstream's spelling of a mutable
variable) stay such scalars, so a reassignment inside a loop updates the one variable, as
Python reads it. Everything else goes to TVMScript's own binding, unchanged.

A one-dimensional ``T.Kernel`` unpacks into a one-element tuple: ``with T.Kernel(n) as
(bx,):`` (upstream's frame is iterable; here the frame yields the block index itself, a TVM
variable that Python cannot unpack).

``while sched.valid():`` over a ``T.PersistentTileScheduler`` is a counted loop where its
shape allows (``tile_scheduler.tile_loop``); every other ``while`` is TVMScript's.

``if`` on a plain Python value that is not a bool (``if par:`` with ``par = 0``, ``if
bias is not None`` after it became ``None``) is decided while parsing, by Python's truth
rules, as upstream's parser decides it; TVMScript accepted only ``True``/``False`` and
refused the rest ("If condition must be a boolean expression, but got 0").
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

from . import macros

_INSTALLED = False
#: per function (or macro) being parsed: the names its body assigns more than once
_REBOUND_ATTR = "_tilelang_rebound_names"


def rebound_names(tree: ast.AST) -> frozenset[str]:
    """Names ``tree`` assigns at more than one place, augments, annotates or uses as loop
    or ``with`` targets alongside another assignment: the names that must stay variables."""
    counts: Counter[str] = Counter()
    forced: set[str] = set()

    def targets(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Name):
            return [node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            return [name for elt in node.elts for name in targets(elt)]
        if isinstance(node, ast.Starred):
            return targets(node.value)
        return []

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                counts.update(targets(target))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            forced.update(targets(node.target))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            counts.update(targets(node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    counts.update(targets(item.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            counts.update(targets(node.target))
    return frozenset(forced | {name for name, n in counts.items() if n > 1})


def _pure(value: Any) -> bool:
    """No memory read and no call with an effect anywhere in ``value``."""
    import tvm
    import tvm_ffi
    from tvm.ir import TensorLoad

    impure: list[Any] = []

    def call(node: Any, *_: Any) -> None:  # (the walk may pass a definition kind too)
        op = node.op
        if not isinstance(op, tvm.ir.Op) or int(op.get_attr("TCallEffectKind") or 4) > 1:
            impure.append(node)

    tvm_ffi.structural_walk(value, (TensorLoad, lambda node, *_: impure.append(node)), (tvm.ir.Call, call))
    return not impure


def _let_var(self: Any, var_name: str, value: Any) -> Any:
    """``value`` bound immutably to ``var_name``, or None where the name must stay a
    variable (see the module's docstring)."""
    import tvm
    from tvm.script.ir_builder import IRBuilder
    from tvm.script.ir_builder.tirx import ir as T

    stack = getattr(self, _REBOUND_ATTR, None)
    if not stack or var_name in stack[-1]:
        return None
    if isinstance(value, (bool, int, float, tvm.tirx.IntImm, tvm.tirx.FloatImm)):
        return value  # a constant stays one (``rows = 128``: static extents, fragments in registers)
    if not tvm.ir.is_prim_expr(value):
        return None
    if isinstance(getattr(value, "ty", None), tvm.ir.PointerType) or not _pure(value):
        return None
    if isinstance(value, tvm.tirx.Var):
        # another name for a variable (``bx = block``): the same variable, as upstream's
        # parser binds it
        return value if self.var_table.exist(value) else None
    var = tvm.tirx.Var(var_name, value.ty)
    IRBuilder.name(var_name, var)
    T.Bind(value, var=var)
    return var


def _name_variable(var_name: str, value: Any) -> None:
    """``count = T.alloc_var(T.int32)``: the variable's buffer takes the name, as upstream's
    does (the generated source said ``_ptr[0]``)."""
    from tvm.script.ir_builder import IRBuilder
    from tvm.script.ir_builder.ir.ir import meta_var

    from .variables import LocalVar

    value = value.value if isinstance(value, meta_var) else value
    if isinstance(value, LocalVar) and not str(value.buffer.name):
        IRBuilder.name(var_name, value.buffer)


def _compare_literals_in_narrow_floats() -> None:
    """``A[i] != 0`` with A bfloat16 or fp8 (upstream's sparse compressor compares so):
    TVMScript makes a Python literal a constant of the other operand's type only for int,
    uint, bool and float types; for these it passed the bare int on ("'int' object has no
    attribute 'expr_ty'"). The literal becomes a constant of that type first."""
    from tvm import DataType, tirx
    from tvm.script.parser.core import dispatch, doc

    def literal(value: Any, other: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        dtype = str(getattr(getattr(other, "ty", None), "dtype", ""))
        if dtype.startswith(("bfloat16", "float8", "float6", "float4")):
            return tirx.const(value, str(DataType(dtype).with_lanes(1)))  # a vector's lanes' type
        return value

    for operand in (tirx.Expr, tirx.IterVar):
        for node in (doc.Eq, doc.NotEq, doc.Lt, doc.LtE, doc.Gt, doc.GtE):
            for index in (0, 1):
                method = dispatch.get_op(operand_type=operand, op_node_type=node, operand_index=index)
                if method is None:
                    continue

                def compare(a: Any, b: Any, _method: Any = method) -> Any:
                    return _method(literal(a, b), literal(b, a))

                dispatch.register_op(operand, node, index)(compare)


def _with_rebound(self: Any, tree: Any, parse: Any) -> Any:
    """Run ``parse`` with the names ``tree`` (a doc AST function) rebinds on the stack."""
    from tvm.script.parser.core import doc

    stack = getattr(self, _REBOUND_ATTR, None)
    if stack is None:
        stack = []
        setattr(self, _REBOUND_ATTR, stack)
    stack.append(rebound_names(doc.from_doc(tree)))
    try:
        return parse()
    finally:
        stack.pop()


def _find_parser(macro: Any) -> Any:
    """The parser a macro call expands in: the nearest calling frame whose globals hold it.
    TVMScript's own search keeps ``inspect.getouterframes()`` in a local of its frame, a
    reference cycle through every caller's frame (and each tensor one holds) that lasted
    until the garbage collector ran; this walk holds no frame list."""
    import sys

    frame = sys._getframe(1)
    name = type(macro).parser_object_name
    try:
        while frame is not None:
            parser = frame.f_globals.get(name)
            if parser is not None:
                return parser
            frame = frame.f_back
    finally:
        del frame
    raise RuntimeError(f"{name} not available")


def _slice_lanes(index: Any) -> int:
    """The elements a store's last index names, where it is a slice (``4:8``); else 0."""
    from tvm import tirx

    if isinstance(index, slice):
        start, stop = index.start or 0, index.stop
        return stop - start if isinstance(start, int) and isinstance(stop, int) else 0
    return int(index.lanes) if isinstance(index, tirx.Ramp) and isinstance(index.lanes, int) else 0


def _one_element(region: Any) -> bool:
    from tvm import tirx

    return all(isinstance(r.extent, tirx.IntImm) and r.extent.value == 1 for r in region.region)


def _region_as_vector(region: Any, target: Any) -> Any:
    """A slice used as a value (upstream's ``b = A[0, 0:4]``, then ``A[0, 4:8] = b``): the
    vector load of its elements, where it runs along the last axis only."""
    from tvm import tirx

    ranges = list(region.region)
    wide = [i for i, r in enumerate(ranges) if not (isinstance(r.extent, tirx.IntImm) and r.extent.value == 1)]
    last = ranges[-1].extent
    if wide not in ([], [len(ranges) - 1]) or not isinstance(last, tirx.IntImm):
        raise TypeError(f"the value stored into {target.name} is a slice of {region.source.name} over "
                        f"{len(wide)} axes (or of a run-time length): a value slice is a vector along the last "
                        "axis of a constant length; copy tiles with T.copy")
    index = ranges[-1].min if last.value == 1 else tirx.Ramp(ranges[-1].min, 1, int(last.value))
    return tirx.BufferLoad(region.source, [r.min for r in ranges[:-1]] + [index])


def _is_python_callable(value: Any) -> bool:
    import tvm_ffi

    return callable(value) and not isinstance(value, (tvm_ffi.Object, type))


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorRegion
    from tvm.tirx.script.parser import parser as tirx_parser

    original = tirx_parser.bind_assign_value

    def bind_assign_value(self: Any, node: Any, var_name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_python_callable(value):
            return value
        _name_variable(var_name, value)
        if not isinstance(value, (tvm_ffi.Object, bool, int, float)):
            return original(self, node, var_name, value, *args, **kwargs)
        bound = _let_var(self, var_name, value)
        return original(self, node, var_name, value, *args, **kwargs) if bound is None else bound

    tirx_parser.bind_assign_value = bind_assign_value

    buffer_store = tirx_parser.T.buffer_store

    def buffer_store_checked(buffer: Any, value: Any, indices: Any) -> Any:
        if value is None:  # TVM's BufferStore takes None and crashes the process
            raise TypeError(f"the value stored into {buffer.name} is None: a function or T.macro without "
                            "`return` gives None; return the value from it")
        if isinstance(value, TensorRegion) and (_one_element(value) or (indices and _slice_lanes(indices[-1]))):
            value = _region_as_vector(value, buffer)  # `b = A[0, 0:4]; B[0, 4:8] = b`: a vector
        return buffer_store(buffer, value, indices)

    tirx_parser.T.buffer_store = buffer_store_checked

    from tvm.script.parser.core import dispatch

    visit_function_def = dispatch.get(token="tirx", type_name="FunctionDef")

    def visit_function_def_scoped(self: Any, node: Any) -> Any:
        return _with_rebound(self, node, lambda: visit_function_def(self, node))

    dispatch.register(token="tirx", type_name="FunctionDef")(visit_function_def_scoped)

    from tvm.tirx.script.parser.entry import TIRMacro

    parse_macro = TIRMacro.parse_macro

    def parse_macro_scoped(macro: Any, parser: Any) -> Any:
        return _with_rebound(parser, macro.get_macro_def(), lambda: macros.expand(parser, parse_macro, macro))

    TIRMacro.parse_macro = parse_macro_scoped
    TIRMacro._find_parser_def = _find_parser


    from tvm.script.parser.core import doc
    from tvm.script.parser.core.parser import Parser

    original_eval_assign = Parser.eval_assign

    def eval_assign(self: Any, target: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(target, (doc.Tuple, doc.List)) and len(target.elts) == 1 and isinstance(source, tirx.Var):
            source = (source,)
        return original_eval_assign(self, target, source, *args, **kwargs)

    Parser.eval_assign = eval_assign

    visit_assign = dispatch.get(token="tirx", type_name="Assign")

    def read_once(self: Any, value: Any, where: tuple, name: str) -> Any:
        """``value`` bound to a fresh name first (unless a constant), so it is read once,
        before any of the assignment's stores."""
        if isinstance(value, doc.Constant):
            return value
        visit_assign(self, doc.Assign([doc.Name(name, doc.Store(), *where)], value, *where))
        return doc.Name(name, doc.Load(), *where)

    def visit_chained_assign(self: Any, node: Any) -> Any:
        """``A[i] = B[i] = value``: Python's meaning, the value evaluated once and stored to
        each target from left to right (TVMScript refused "Consequential assignments").
        ``A[0], A[1] = A[1], A[0]`` and ``a, b = b, a`` of ``T.alloc_var`` variables: Python's
        meaning too, every value read before the first store (TVMScript refused element
        targets in a tuple, "Invalid type in assign statement", and variables there,
        "Variable a already defined in current scope")."""
        where = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
        if len(node.targets) == 1 and macros.store_through_reference(self, node.targets[0], node.value):
            return None
        if len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if (isinstance(target, (doc.Tuple, doc.List)) and isinstance(value, (doc.Tuple, doc.List))
                    and len(target.elts) == len(value.elts)
                    and any(isinstance(t, doc.Subscript) or _is_variable(self, t) for t in target.elts)
                    and not any(isinstance(t, doc.Starred) for t in target.elts)):
                values = [read_once(self, v, where, f"_tuple_value_{node.lineno}_{node.col_offset}_{i}")
                          for i, v in enumerate(value.elts)]
                for t, v in zip(target.elts, values):
                    visit_assign(self, doc.Assign([t], v, *where))
                return None
            return visit_assign(self, node)
        value = read_once(self, node.value, where, f"_chained_value_{node.lineno}_{node.col_offset}")
        for target in node.targets:
            visit_assign(self, doc.Assign([target], value, *where))
        return None

    dispatch.register(token="tirx", type_name="Assign")(visit_chained_assign)

    _compare_literals_in_narrow_floats()

    visit_while = dispatch.get(token="tirx", type_name="While")

    def visit_while_tiles(self: Any, node: Any) -> Any:
        from .tile_scheduler import tile_loop

        if not tile_loop(self, node):
            visit_while(self, node)

    dispatch.register(token="tirx", type_name="While")(visit_while_tiles)

    visit_if = dispatch.get(token="tirx", type_name="If")

    def visit_if_python(self: Any, node: Any) -> Any:
        predicate = self.eval_expr(node.test)
        if _plain_python(predicate):
            taken = node.body if predicate else node.orelse
            if taken:  # no scope of its own, as in Python (TVMScript's static branch too)
                self.visit_body(taken)
            return None
        evaluate = self.eval_expr  # TVMScript's visit evaluates the test again: give it this value
        shadowed = self.__dict__.get("eval_expr")  # an enclosing `if`'s, while its body parses
        self.eval_expr = lambda expr, *args, **kwargs: (
            predicate if expr is node.test else evaluate(expr, *args, **kwargs))
        try:
            return visit_if(self, node)
        finally:
            if shadowed is None:
                del self.eval_expr
            else:
                self.eval_expr = shadowed

    dispatch.register(token="tirx", type_name="If")(visit_if_python)

    visit_return = dispatch.get(token="tirx", type_name="Return")

    def visit_return_of_macro(self: Any, node: Any) -> Any:
        if macros.visit_return(self, node) is NotImplemented:
            return visit_return(self, node)
        return None

    dispatch.register(token="tirx", type_name="Return")(visit_return_of_macro)
    _INSTALLED = True


def _is_variable(parser: Any, target: Any) -> bool:
    """Whether ``target`` names a variable a store goes into (``T.alloc_var``: its element)."""
    from tvm.script.parser.core import doc

    values = parser.var_table.name2value.get(target.id) if isinstance(target, doc.Name) else None
    return bool(values) and macros.is_variable(values[-1])


def _plain_python(value: Any) -> bool:
    """A Python value that is neither a TVM object nor a bool (TVMScript decides bools)."""
    import numbers

    import tvm_ffi

    if isinstance(value, (bool, tvm_ffi.Object)):
        return False
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():  # np.bool_, np.int64
        return True
    return isinstance(value, (numbers.Number, str, bytes, tuple, list, dict, set, type(None)))
