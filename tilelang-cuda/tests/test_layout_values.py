"""The tensor-core layouts are values: frozen dataclasses, equal and hashable by their
fields (the passes compare them to decide whether two GEMMs share an accumulator layout and
key tables by them), so a layout cannot be changed after a pass chose it."""

from __future__ import annotations

import dataclasses

import pytest
from tilelang.cuda.transform.mma_layout import CoreMatrixLayout, MMALayout, SwizzledLayout, WGMMALayout

LAYOUTS = [MMALayout(128, 128, 2, 2), WGMMALayout(128, 256, 1, 1), CoreMatrixLayout(64, 32, 2),
           SwizzledLayout(64, 64, 2, 128)]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: type(layout).__name__)
def test_layouts_are_frozen_hashable_values(layout):
    same = dataclasses.replace(layout)
    assert same == layout and hash(same) == hash(layout) and len({layout, same}) == 1
    field = dataclasses.fields(layout)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(layout, field, 1)
