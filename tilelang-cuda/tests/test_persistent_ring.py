"""The sm_90 TMA stage ring inside an outer loop (T.Persistent and upstream's hand-written
wave loop; transform/tma.py), without a GPU: the kernel takes TMA boxes, a producer warp
that replays the outer loop, and running iteration counts; nvcc assembles it; and the
ring protocol, with the stage and parity expressions taken from the generated source and
driven by the loop bounds, neither hangs nor reads a stage before its data arrived or
after it was refilled. The same model rejects a ring whose stage and parity restart with
each tile (what a per-tile ``k`` would give), so it can fail.

The GPU runs (correctness against torch) are in test_gpu_persistent.py.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import pytest
import tilelang.language as T
from tilelang.backend.module import create_backend_context
from tilelang.backend.resolution import execution_specs
from tilelang.engine.lower import lower_with_context as lower_artifact
from tilelang.testing.kernels import persistent_gemm

SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower(func, **configs):
    """The artifact for tvm_ffi, whose host code encodes the TMA tensor maps."""
    context = create_backend_context(SM90, execution_backend=None)
    spec = next(s for s in execution_specs(context.module) if s.name == "tvm_ffi")
    context = dataclasses.replace(context, execution_spec=spec)
    return lower_artifact(func, context, out_idx=[-1], pass_configs=configs or None)


def gated_gemm(M, N, K, sm_num):
    """A ring under a condition on memory the consumers read (a per-tile flag): a producer
    warp could take a different path than the consumers, so thread 0 issues instead."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Flags: T.Tensor((64,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(sm_num, threads=128) as block_id:
            A_shared = T.alloc_shared((128, 32), "float16")
            B_shared = T.alloc_shared((32, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            for bx, by in T.Persistent([T.ceildiv(M, 128), T.ceildiv(N, 128)], sm_num, block_id):
                if Flags[bx * 8 + by] > 0:
                    T.clear(C_local)
                    for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                        T.copy(A[bx * 128, k * 32], A_shared)
                        T.copy(B[k * 32, by * 128], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
                    T.copy(C_local, C[bx * 128, by * 128])

    return main


def two_rings(outer: int):
    """Two pipelined GEMMs inside one outer loop: one producer warp per kernel."""

    @T.prim_func
    def main(A: T.Tensor((512, 512), "float16"), B: T.Tensor((512, 512), "float16"),
             C: T.Tensor((512, 512), "float32"), D: T.Tensor((512, 512), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((64, 128), "float16")
            A2 = T.alloc_shared((128, 64), "float16")
            B2 = T.alloc_shared((64, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            Dl = T.alloc_fragment((128, 128), "float32")
            for r in T.serial(outer):
                T.clear(Cl)
                for k in T.Pipelined(8, num_stages=3):
                    T.copy(A[by * 128, k * 64], As)
                    T.copy(B[k * 64, bx * 128], Bs)
                    T.gemm(As, Bs, Cl)
                T.copy(Cl, C[by * 128, bx * 128])
                T.clear(Dl)
                for k in T.Pipelined(8, num_stages=3):
                    T.copy(B[by * 128, k * 64], A2)
                    T.copy(A[k * 64, bx * 128], B2)
                    T.gemm(A2, B2, Dl)
                T.copy(Dl, D[by * 128, bx * 128])

    return main


def kernel_body(source: str) -> str:
    return source[source.index('extern "C" __global__'):]


def roles(body: str, threads: int) -> tuple[str, str]:
    """(the consumers' code, the producer warp's code)."""
    consumers = body.split(f"if (((int)threadIdx.x) < {threads}) {{", 1)[1]
    return tuple(consumers.split(f"if (((int)threadIdx.x) == {threads}) {{", 1))


CONFIGS = [pytest.param(4096, 4096, 512, 128, 256, 64, 256, 3, id="128x256x64-t256-s3"),
           pytest.param(1000, 1400, 520, 128, 128, 32, 128, 3, id="128x128x32-t128-s3-tails")]


#: every spelling of a persistent GEMM (tilelang.testing.kernels.persistent_gemm) and the
#: name of its outer loop's variable in the generated source
SPELLINGS = {"persistent": "w", "wave_loop": "w", "scheduler": "sched_iter", "scheduler_coord": "w"}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@pytest.mark.parametrize("M,N,K,bM,bN,bK,threads,stages", CONFIGS)
def test_persistent_gemm_takes_tma_and_a_producer_warp_that_runs_ahead(M, N, K, bM, bN, bK, threads, stages,
                                                                       spelling):
    body = kernel_body(lower(persistent_gemm(M, N, K, bM, bN, bK, threads, stages, 132, spelling)).device_source)
    assert "const __grid_constant__ CUtensorMap A_tensor_map" in body and "tl_cp_async" not in body
    assert f"__launch_bounds__({threads + 32}" in body
    consumers, producer = roles(body, threads)
    # the producer replays the wave loop and issues every box; the consumers issue none
    assert "tl_tma_load_2d" in producer and "tl_tma_load" not in consumers
    outer = SPELLINGS[spelling]
    assert re.search(rf"for \(int {outer}_\d+ = 0; {outer}_\d+ < [^;]+; \+\+{outer}_\d+\)", producer)
    # stage and parity from the running counts, which each role advances per tile
    k_steps = -(-K // bK)
    assert f"(consumed + k) % {stages})" in consumers and f"((consumed + k) % {2 * stages}) / {stages})" in consumers
    assert f"tma_consumed_ptr[0] = (consumed + {k_steps});" in consumers
    assert f"tma_produced_ptr[0] = (produced + {k_steps});" in producer
    # the epilogue goes through C's shared tile, synchronized among the consumers alone
    assert "__syncthreads" not in consumers and f"tl_named_barrier_sync(1, {threads});" in consumers


@pytest.mark.parametrize("spelling", ["persistent", "wave_loop", "scheduler_coord"])
def test_the_producer_keeps_the_tile_guard_when_blocks_outnumber_tiles(spelling):
    """One wave (132 blocks, 48 tiles): the replayed guard is the same expression as the
    consumers' own, so a producer left inside their condition lost it to the simplifier and
    the idle blocks' producers waited forever (H200). It sits before the wave loop now."""
    body = kernel_body(lower(persistent_gemm(1024, 1536, 512, 128, 256, 64, 256, 3, 132, spelling)).device_source)
    _, producer = roles(body, 256)
    guard = re.search(r"if \(.*blockIdx\.x.*\) \{\n", producer)  # tiles past the last: nothing to load
    assert guard is not None and guard.start() < producer.index("tl_tma_load_2d")


def test_a_condition_on_memory_keeps_a_single_issuer():
    body = kernel_body(lower(gated_gemm(1024, 1024, 256, 132)).device_source)
    assert "tl_tma_load_2d" in body and "__launch_bounds__(128" in body and "tma_consumed" not in body


def test_the_first_ring_of_a_kernel_gets_the_producer_warp_a_second_a_single_issuer():
    consumers, producer = roles(kernel_body(lower(two_rings(2)).device_source), 128)
    assert producer.count("tl_mbarrier_expect_tx") == 1 and "tma_consumed" in consumers
    # the second ring: thread 0 arms its barriers (initialized per outer iteration) and issues
    assert "tma_barrier_ptr_1" in consumers and "tl_tma_load_2d" in consumers


def named_ring(gated: bool):
    """One tile per block (no outer loop), its batch and split named before the ring as
    upstream's decode kernels do (``bz = bs // 2``: locals the consumers assign), and
    (``gated``) the ring under a condition on the block index."""

    @T.prim_func
    def main(A: T.Tensor((4, 256, 256), "float16"), B: T.Tensor((4, 256, 128), "float16"),
             C: T.Tensor((4, 2, 128, 128), "float32")):
        with T.Kernel(8, threads=128) as bs:
            bz = bs // 2
            sx = bs % 2
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            if not gated or bs < 6:
                for k in T.Pipelined(4, num_stages=3):
                    T.copy(A[bz, sx * 128, k * 32], As)
                    T.copy(B[bz, sx * 128 + k * 32, 0], Bs)
                    T.gemm(As, Bs, Cl)
            T.copy(Cl, C[bz, sx, 0, 0])

    return main


@pytest.mark.parametrize("gated", [False, True], ids=["names", "names-and-condition"])
def test_the_producer_replays_the_names_and_conditions_before_a_ring(gated, tmp_path):
    """SpecializeWarps moves the producer out of the consumers' scope: it binds the names
    itself (before: `sx_ptr`/`bz_ptr` undefined in the producer branch, an NVRTC error on
    the H200 for the mla_decoding family) and keeps the condition, placed before it."""
    body = kernel_body(lower(named_ring(gated)).device_source)
    consumers, producer = roles(body, 128)
    assert "tl_tma_load_3d" in producer and "tl_tma_load" not in consumers
    assert "_ptr[0]" not in producer  # no local of the consumers'
    if gated:
        guard = re.search(r"if \(.*blockIdx\.x.* < 6\)\) \{\n", producer)
        assert guard is not None and guard.start() < producer.index("tl_tma_load_3d")
    if shutil.which("nvcc") is not None:
        src = tmp_path / "named.cu"
        src.write_text(lower(named_ring(gated)).device_source)
        subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", str(src), "-o", str(tmp_path / "named.cubin")],
                       check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("M,N,K,bM,bN,bK,threads,stages", CONFIGS)
def test_nvcc_assembles_the_persistent_ring_without_spills(tmp_path, M, N, K, bM, bN, bK, threads, stages):
    src = tmp_path / "persistent.cu"
    src.write_text(lower(persistent_gemm(M, N, K, bM, bN, bK, threads, stages, 132)).device_source)
    report = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-Xptxas", "-v", str(src), "-o",
                             str(tmp_path / "persistent.cubin")], check=True, capture_output=True, text=True).stderr
    assert (tmp_path / "persistent.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "0 bytes spill stores" in report, report


# -- the ring protocol, driven by the loop bounds ----------------------------------------

_BARRIER = r"\(&\(tma_barrier_ptr\[(.+?)\]\)\)"


def _python(c_expr: str) -> str:
    """A C integer expression of the generated code as Python (operands never negative)."""
    return c_expr.replace("(int)", "").replace("/", "//")


@dataclasses.dataclass
class TileCode:
    """The barrier pair of the tiles a carried ring's producer loads once per outer
    iteration (flash attention's Q), as functions of the role's tile count (``count``) and,
    for the producer's issue, of the ring iteration ``k`` inside the tile."""

    full: int
    empty: int
    wait: str  # consumers: parity of their wait for the tile, before the loop
    issue_at: str  # producer: the condition (on k) under which it issues the tile
    free_wait: tuple[str, str]  # producer: (condition, parity) of its wait for the tile's release

    @classmethod
    def parse(cls, consumers: str, producer: str, loop_var: str) -> TileCode | None:
        wait = re.search(rf"tl_mbarrier_wait\({_BARRIER}, \((tma_tiles_consumed_ptr\[0\] .+?)\)\);", consumers)
        if wait is None:
            return None
        # the condition on k is gone where the loop has one iteration
        fixed = r"\(&\(tma_barrier_ptr\[(\d+)\]\)\)"  # the pair's barriers sit at constant indices
        issue = re.search(rf"(?:if \(\((.+?)\)\) {{\s+)?if \(\((.+?)\)\) {{\s+tl_mbarrier_wait\({fixed}, (.+?)\);"
                          rf"\s+}}\s+tl_mbarrier_expect_tx\({fixed}, \d+\);", producer)

        def py(text: str) -> str:
            text = _python(text).replace("tma_tiles_consumed_ptr[0]", "count")
            return re.sub(r"\b(\w+)\b", lambda m: {"tiles": "count", loop_var: "k"}.get(m.group(1), m.group(1)), text)

        assert issue.group(5) == wait.group(1), "the producer arms the barrier the consumers wait for"
        return cls(int(wait.group(1)), int(issue.group(3)), py(wait.group(2)), py(issue.group(1) or "1"),
                   (py(issue.group(2)), py(issue.group(4))))


def _matching_brace(text: str, opened: int) -> int:
    """The index just past the brace that closes the one at ``opened``."""
    depth = 0
    for i in range(opened, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise AssertionError("unbalanced braces")


def _loop_around(text: str, at: int) -> tuple[str, int, int]:
    """(variable, start, end) of the innermost ``for`` loop of ``text`` that holds ``at``."""
    for m in reversed(list(re.finditer(r"for \(int (\w+) = 0;", text[:at]))):
        end = _matching_brace(text, text.index("{", m.end()))
        if end > at:
            return m.group(1), m.start(), end
    raise AssertionError("no loop around the ring's wait")


@dataclasses.dataclass
class RingCode:
    """The ring's barrier operations from the generated source, in program order, their
    expressions as functions of the role's count before this tile (``base``) and the
    iteration ``k`` inside it. Barriers: full of group g, stage s at g * stages + s, empty
    at (groups + g) * stages + s (one group, or K and V's of their own)."""

    stages: int
    groups: int
    # ("wait", index, parity, of the previous iteration) or ("arrive", index, of the previous
    # iteration): an operation under ``if (0 < k)`` is for iteration k - 1
    consumer_loop: list[tuple]
    consumer_after: list[tuple]  # the same, after the loop (for its last iteration)
    producer_loop: list[tuple]  # ("wait", condition, index, parity) or ("fill", index)
    tile: TileCode | None = None

    @classmethod
    def parse(cls, body: str, threads: int, stages: int) -> RingCode:
        consumers, producer = roles(body, threads)
        p_var, p_start, p_end = _loop_around(producer, producer.index("tl_mbarrier_expect_tx"))
        tile = TileCode.parse(consumers, producer, p_var)
        constant = [] if tile is None else [str(tile.full), str(tile.empty)]
        first = next(m for m in re.finditer(rf"tl_mbarrier_wait\({_BARRIER}, (.+?)\);", consumers)
                     if "tiles" not in m.group(2))
        c_var, c_start, c_end = _loop_around(consumers, first.start())

        def py(text: str, loop_var: str) -> str:
            rename = {"produced": "base", "consumed": "base", loop_var: "k"}
            return re.sub(r"\b(\w+)\b", lambda m: rename.get(m.group(1), m.group(1)), _python(text))

        ops = rf"tl_mbarrier_wait\({_BARRIER}, (.+?)\);|tl_mbarrier_arrive\({_BARRIER}\);"

        def operations(text: str) -> list[tuple]:
            found = []
            for m in re.finditer(ops, text):
                previous = re.search(rf"if \(\(?0 < {c_var}\)?\) {{\s*$", text[:m.start()]) is not None
                if m.group(1) is not None and m.group(1) not in constant:
                    found.append(("wait", py(m.group(1), c_var), py(m.group(2), c_var), previous))
                elif m.group(3) is not None and m.group(3) not in constant:
                    found.append(("arrive", py(m.group(3), c_var), previous))
            return found

        consumer_loop, after = operations(consumers[c_start:c_end]), operations(consumers[c_end:])
        producer_loop = []
        loop = producer[p_start:p_end]
        for m in re.finditer(rf"if \((.+?)\) {{\s+tl_mbarrier_wait\({_BARRIER}, (.+?)\);|"
                             rf"tl_mbarrier_expect_tx\({_BARRIER}, \d+\);", loop):
            if m.group(1) is not None and m.group(2) not in constant:
                producer_loop.append(("wait", py(m.group(1), p_var), py(m.group(2), p_var), py(m.group(3), p_var)))
            elif m.group(4) is not None and m.group(4) not in constant:
                producer_loop.append(("fill", py(m.group(4), p_var)))
        groups = sum(op[0] == "fill" for op in producer_loop)
        return cls(stages, groups, consumer_loop, after, producer_loop, tile)

    def replaced(self, old: str, new: str) -> RingCode:
        """Every ring expression with ``old`` spelled ``new`` (the tile pair's kept)."""
        def swap(op: tuple) -> tuple:
            return tuple(x.replace(old, new) if isinstance(x, str) else x for x in op)

        return dataclasses.replace(self, consumer_loop=[swap(op) for op in self.consumer_loop],
                                   consumer_after=[swap(op) for op in self.consumer_after],
                                   producer_loop=[swap(op) for op in self.producer_loop])


def run_ring(code: RingCode, tiles: int, steps: int, producer_first: bool, alternate: bool = False) -> None:
    """Producer warp and consumers of one block over ``tiles`` tiles of ``steps`` ring
    iterations each, interleaved greedily (the producer as far ahead as its waits allow,
    or the consumers first) or, ``alternate``, one step each in turn. mbarrier semantics
    (PTX ISA, mbarrier.try_wait.parity): a wait for parity P passes once the phase of
    parity P completed, i.e. while the barrier's current phase parity differs from P; the
    consumers arrive together (the empty barrier counts all of them). Every operation
    runs in the order the source has it. Raises AssertionError on a hang, a stage read
    before its data arrived or a stage refilled while it is read."""
    stages, groups = code.stages, code.groups
    full = [[0] * stages for _ in range(groups)]  # completed phases per barrier
    empty = [[0] * stages for _ in range(groups)]
    holds = [[None] * stages for _ in range(groups)]  # which ring iteration's data each stage holds
    released: list[set[int]] = [set() for _ in range(groups)]
    # the per-tile barrier pair (flash attention's Q): phases, which tile it holds, freed
    tile_full, tile_empty, tile_holds, tiles_freed = [0], [0], [None], set()

    def ev(expr: str, base: int, k: int, count: int = 0) -> int:
        return int(eval(expr, {}, {"base": base, "k": k, "count": count}))  # the kernel's own integer expressions

    def slot(index: int, empty_barrier: bool) -> tuple[int, int]:
        index -= groups * stages if empty_barrier else 0
        assert 0 <= index < groups * stages, f"barrier index {index} outside the ring"
        return index // stages, index % stages

    def producer():
        for tile in range(tiles):
            base = tile * steps
            for k in range(steps):
                for op in code.producer_loop:
                    if op[0] == "wait":
                        if ev(op[1], base, k):
                            g, s = slot(ev(op[2], base, k), True)
                            while empty[g][s] % 2 == ev(op[3], base, k):
                                yield False
                        continue
                    g, s = slot(ev(op[1], base, k), False)
                    previous = holds[g][s]
                    assert previous is None or previous in released[g], \
                        f"iteration {base + k} refills stage {s} (group {g}) while iteration {previous} still reads it"
                    holds[g][s] = base + k
                    full[g][s] += 1  # the boxes land
                    yield True
                if code.tile is not None and ev(code.tile.issue_at, base, k):
                    condition, parity = code.tile.free_wait
                    if ev(condition, base, k, tile):
                        while tile_empty[0] % 2 == ev(parity, base, k, tile):
                            yield False
                    assert tile_holds[0] is None or tile_holds[0] in tiles_freed, \
                        f"tile {tile} overwrites tile {tile_holds[0]} while its GEMMs still read it"
                    tile_holds[0] = tile
                    tile_full[0] += 1
                    yield True

    def consumers():
        for tile in range(tiles):
            base = tile * steps
            if code.tile is not None:
                while tile_full[0] % 2 == ev(code.tile.wait, base, 0, tile):
                    yield False
                assert tile_holds[0] == tile, f"tile {tile} reads the tile of {tile_holds[0]}"
            for k in range(steps + 1):  # the operations after the loop as k = steps, for iteration steps - 1
                for op in code.consumer_loop if k < steps else code.consumer_after:
                    iteration = base + k - 1 if op[-1] or k == steps else base + k
                    if op[-1] and k == 0:
                        continue
                    if op[0] == "wait":
                        g, s = slot(ev(op[1], base, k), False)
                        while full[g][s] % 2 == ev(op[2], base, k):
                            yield False
                        assert holds[g][s] == iteration, f"iteration {iteration} (tile {tile}) reads " \
                            f"stage {s} (group {g}), which holds {holds[g][s]}"
                    else:
                        release(ev(op[1], base, k), iteration)
                        yield True  # (a step that changes the state counts as progress, even if the next one waits)
                yield True
            if code.tile is not None:  # another arrive: the producer may run in between
                tiles_freed.add(tile)
                tile_empty[0] += 1
                yield True

    def release(index: int, iteration: int) -> None:
        g, s = slot(index, True)
        assert holds[g][s] == iteration, \
            f"iteration {iteration} releases stage {s} (group {g}), which holds {holds[g][s]}"
        released[g].add(iteration)
        empty[g][s] += 1

    roles_ = [producer(), consumers()] if producer_first else [consumers(), producer()]
    done = [False, False]
    while not all(done):
        progressed = False
        for i, role in enumerate(roles_):
            while not done[i]:
                try:
                    if not next(role):
                        break
                    progressed = True
                    if alternate:
                        break
                except StopIteration:
                    done[i] = progressed = True
        assert progressed, f"the ring hangs: {tiles} tiles of {steps} iterations, {stages} stages"


@pytest.mark.parametrize("spelling", ["persistent", "scheduler"])
@pytest.mark.parametrize("M,N,K,bM,bN,bK,threads,stages", CONFIGS)
@pytest.mark.parametrize("tiles", [1, 2, 3, 5])
def test_the_generated_ring_protocol_holds_across_tiles(M, N, K, bM, bN, bK, threads, stages, tiles, spelling):
    body = kernel_body(lower(persistent_gemm(M, N, K, bM, bN, bK, threads, stages, 132, spelling)).device_source)
    code = RingCode.parse(body, threads, stages)
    for producer_first in (True, False):
        run_ring(code, tiles, -(-K // bK), producer_first)


def test_the_model_rejects_a_ring_that_restarts_per_tile():
    # stage and parity from k alone: right for one tile, wrong from the second on unless
    # the tile's iterations are a multiple of 2 x stages (9 iterations, 3 stages)
    body = kernel_body(lower(persistent_gemm(4096, 4096, 576, 128, 256, 64, 256, 3, 132)).device_source)
    code = RingCode.parse(body, 256, 3)
    run_ring(code, 3, 9, producer_first=True)
    per_tile = code.replaced("base", "0")
    run_ring(per_tile, 1, 9, producer_first=True)
    with pytest.raises(AssertionError, match=r"hangs|reads stage|refills stage|releases stage"):
        run_ring(per_tile, 3, 9, producer_first=True)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_persistent_gemm_as_lowered_equals_numpy(spelling):
    """The codegen-only lowering (cp.async stage rings; tilelang.lower has no host code for
    tensor maps) run by the numpy interpreter of lowered device IR: T.Persistent's waves,
    the tail tiles, wgmma on swizzled tiles beside the (padded) shared C tile."""
    import numpy as np
    import tilelang
    from lowered_instructions import lowered_kernel

    M, N, K, sm_num = 200, 136, 64, 2  # 2 x 3 tiles of 128 x 64 over 2 blocks, tails in M and N
    rng = np.random.default_rng(14)
    a, b = rng.integers(-4, 5, (M, K)), rng.integers(-4, 5, (K, N))  # every sum exact in fp16
    # upstream's wave loop covers every tile when the tile columns fill whole groups (3 here)
    func = persistent_gemm(M, N, K, 128, 64, 32, 128, 3, sm_num, spelling, group_size=3)
    device = tilelang.lower(func, target=SM90, out_idx=[-1]).device_mod
    kernel = lowered_kernel(device)
    c = np.full((M, N), np.nan, np.float16)
    kernel(a.astype(np.float16), b.astype(np.float16), c)
    assert any(name.startswith("tl_wgmma_m64n64k16") for name in kernel.calls)
    np.testing.assert_array_equal(c.astype(np.float64), a @ b)


def test_persistent_attention_writes_its_output_in_pairs():
    """T.Persistent binds the tile coordinates (``by = t % 16 // 8`` ...) and guards the
    last one (``bx < 32``): the ranges of the bound values and that guard prove the output
    copy in bounds, so it gets no bounds check and each lane's two neighbouring columns are
    one half2 store (scalar stores before: 64 a thread instead of 32)."""
    import tilelang
    from tilelang.testing.kernels import flash_attention_persistent

    func = flash_attention_persistent(8, 16, 4096, 128, 128, 128, 256, 3, sm_num=132)
    source = tilelang.lower(func, target=SM90, out_idx=[3]).device_source
    assert source.count("*(half2*)(Output_ptr") == 32 and "Output_ptr[" not in source


# -- flash attention's Q: loaded by the ring's producer once per tile ----------------------
def attention_ring(seq_len: int, stages: int) -> tuple[str, RingCode]:
    from tilelang.testing.kernels import flash_attention_persistent

    func = flash_attention_persistent(2, 4, seq_len, 128, 128, 128, 256, stages, sm_num=3)
    body = kernel_body(lower(func, **{"tl.intra_warpgroup_overlap": True}).device_source)
    return body, RingCode.parse(body, 256, stages)


@pytest.mark.parametrize("seq_len,stages", [(1024, 3), (1024, 2), (128, 2)])
def test_the_producer_loads_each_tiles_q_and_the_protocol_holds(seq_len, stages):
    """The consumers no longer copy Q through their registers behind a block barrier: the
    producer issues its TMA boxes once the first ``stages`` K/V iterations of the tile are
    out (or all of them, when there are fewer) and the consumers freed the previous tile's
    Q; the model runs that with the ring, producer or consumers first."""
    body, code = attention_ring(seq_len, stages)
    consumers, producer = roles(body, 256)
    assert "Q_tensor_map" in producer and "Q_ptr" not in body
    # a warp barrier after the spinning wait (without it ptxas doubled the loop, divergent)
    assert re.search(r"tl_mbarrier_wait\(.+tma_tiles_consumed_ptr.+\);\s+__syncwarp\(\);", consumers)
    # K and V have barriers of their own (the ring's two groups), the tile pair comes after
    assert code.groups == 2 and code.tile is not None
    assert code.tile.full == 2 * 2 * stages and code.tile.empty == 2 * 2 * stages + 1
    steps = seq_len // 128
    assert [k for k in range(steps) if eval(code.tile.issue_at, {}, {"k": k})] == [min(stages, steps) - 1]
    for tiles in (1, 2, 3, 5):
        for producer_first in (True, False):
            for alternate in (False, True):
                run_ring(code, tiles, steps, producer_first, alternate)


def test_the_model_rejects_q_issued_before_the_previous_tile_is_freed():
    _, code = attention_ring(1024, 3)
    # issued with the tile's first K/V and without waiting: the previous tile still reads Q
    no_wait = dataclasses.replace(code, tile=dataclasses.replace(code.tile, issue_at="k == 0", free_wait=("0", "0")))
    run_ring(no_wait, 1, 8, producer_first=True, alternate=True)  # one tile: nothing to overwrite
    with pytest.raises(AssertionError, match="overwrites tile 0"):
        run_ring(no_wait, 2, 8, producer_first=True, alternate=True)
    stale = dataclasses.replace(code, tile=dataclasses.replace(code.tile, wait="(count + 1) % 2"))
    with pytest.raises(AssertionError, match="reads the tile of None|hangs"):
        run_ring(stale, 2, 8, producer_first=False)


def q_times_k(plain_read: bool):
    """A persistent S = Q K^T over (head, query block) tiles: Q copied once per tile before
    the K ring; ``plain_read`` adds a read of Q_shared outside the GEMMs (which the TMA
    producer's tile would race: the consumers keep copying it themselves)."""
    heads, seq, dim, bM, bN = 2, 512, 128, 128, 128

    @T.prim_func
    def main(Q: T.Tensor((heads, seq, dim), "float16"), K: T.Tensor((heads, seq, dim), "float16"),
             S: T.Tensor((heads, seq, bN), "float32")):
        with T.Kernel(3, threads=256) as block_id:
            Q_shared = T.alloc_shared((bM, dim), "float16")
            K_shared = T.alloc_shared((bN, dim), "float16")
            acc = T.alloc_fragment((bM, bN), "float32")
            row_max = T.alloc_fragment((bM,), "float32")
            for h, bx in T.Persistent([heads, seq // bM], 3, block_id):
                T.copy(Q[h, bx * bM:(bx + 1) * bM, :], Q_shared)
                T.clear(acc)
                for k in T.Pipelined(seq // bN, num_stages=2):
                    T.copy(K[h, k * bN:(k + 1) * bN, :], K_shared)
                    T.gemm(Q_shared, K_shared, acc, transpose_B=True)
                # a row family (as attention's softmax): wgmma may then read an unstaged Q
                T.reduce_max(acc, row_max, dim=1)
                for i, j in T.Parallel(bM, bN):
                    acc[i, j] -= row_max[i]
                if plain_read:
                    for i, j in T.Parallel(bM, bN):
                        acc[i, j] += Q_shared[i, j]
                T.copy(acc, S[h, bx * bM:(bx + 1) * bM, :])

    return main


@pytest.mark.parametrize("plain_read", [False, True], ids=["gemm-only", "plain-read"])
def test_only_a_tile_that_gemms_alone_read_moves_to_the_producer(plain_read):
    consumers, producer = roles(kernel_body(lower(q_times_k(plain_read)).device_source), 256)
    assert ("Q_tensor_map" in producer) is not plain_read
    assert ("Q_ptr" in consumers) is plain_read
    # one GEMM reads the ring's only tile: one barrier pair per stage, no K/V split
    code = RingCode.parse(kernel_body(lower(q_times_k(plain_read)).device_source), 256, 2)
    assert code.groups == 1 and (code.tile is None) is plain_read
    for producer_first in (True, False):
        run_ring(code, 3, 4, producer_first, alternate=not producer_first)
