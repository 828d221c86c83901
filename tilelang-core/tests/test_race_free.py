"""race_free.is_race_free, the proof behind thread-dependent branches that need no barrier
(transform/gpu/race_free.py), on hand-built regions: which ones no two threads share an
element in, and which ones they do. (The CUDA backend's tests lower and run whole kernels.)"""

from __future__ import annotations

from tilelang.transform.gpu.race_free import is_race_free
from tvm import tirx

THREADS = 32


def shared(n: int = 64):
    return tirx.decl_buffer((n,), "float32", name="s", scope="shared")


def proven(region, buffer, tx, outer=()):
    return is_race_free(region, list(outer), tx, THREADS, {buffer.__chandle__()}, {})


def swap_with(tx, s, partner, condition=None):
    """``s[partner] = s[tx]``, under ``condition`` when one is given."""
    store = tirx.BufferStore(s, tirx.BufferLoad(s, [tx]), [partner])
    return store if condition is None else tirx.IfThenElse(condition, store, None)


def test_even_threads_writing_the_odd_neighbour_share_nothing():
    tx, s = tirx.Var("tx", "int32"), shared()
    assert proven(swap_with(tx, s, tirx.bitwise_xor(tx, 1), tirx.floormod(tx, 2) == 0), s, tx)


def test_a_partner_that_another_thread_reads_is_a_race():
    tx, s = tirx.Var("tx", "int32"), shared()
    # even thread t writes t ^ 2, which even thread t ^ 2 reads
    assert not proven(swap_with(tx, s, tirx.bitwise_xor(tx, 2), tirx.floormod(tx, 2) == 0), s, tx)
    # every thread: t writes t + 1, which thread t + 1 reads
    assert not proven(swap_with(tx, s, tx + 1), s, tx)


def test_a_condition_read_from_memory_counts_both_ways():
    tx, s = tirx.Var("tx", "int32"), shared()
    maybe = tirx.BufferLoad(s, [tx]) > tirx.const(0.0, "float32")
    # whichever threads take it, thread t touches t and t + 32 alone
    assert proven(swap_with(tx, s, tx + 32, maybe), s, tx)
    # ... but t ^ 1 is another thread's own element
    assert not proven(swap_with(tx, s, tirx.bitwise_xor(tx, 1), maybe), s, tx)


def test_loops_inside_and_around_the_region_are_counted():
    tx, s, k, outer = tirx.Var("tx", "int32"), shared(), tirx.Var("k", "int32"), tirx.Var("o", "int32")
    element = k * THREADS + tx
    inside = tirx.For(k, 0, 2, tirx.ForKind.SERIAL, swap_with(element, s, element))
    assert proven(inside, s, tx)
    # around it: in iteration o, thread t writes (t + o) % 32, which thread (t + o) % 32 reads
    shifted = swap_with(tx, s, tirx.floormod(tx + outer, THREADS))
    loop = tirx.For(outer, 0, 4, tirx.ForKind.SERIAL, shifted)
    assert proven(shifted, s, tx, [loop]) is False
    assert proven(swap_with(tx, s, tx), s, tx, [loop])


def test_an_index_read_from_memory_is_not_counted():
    tx, s = tirx.Var("tx", "int32"), shared()
    index = tirx.Cast("int32", tirx.BufferLoad(s, [tx]))
    assert not proven(swap_with(tx, s, index), s, tx)
