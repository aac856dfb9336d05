"""Property-based: any array, of any shape and dtype, is either classified or refused with our own error."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vit_demo.data.preprocess import InputError, preprocess_drawing, preprocess_photo

DTYPES = st.one_of(
    hnp.boolean_dtypes(), hnp.integer_dtypes(), hnp.unsigned_integer_dtypes(),
    hnp.floating_dtypes(), hnp.complex_number_dtypes(), hnp.datetime64_dtypes(), hnp.byte_string_dtypes(),
)
ARRAYS = hnp.arrays(dtype=DTYPES, shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=40))


@pytest.mark.parametrize("preprocess,shape", [(preprocess_drawing, (28, 28)), (preprocess_photo, (32, 32, 3))])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(array=ARRAYS)
def test_any_array_is_classified_or_refused_clearly(preprocess, shape, array):
    try:
        out = preprocess(array)
    except InputError as exc:
        assert str(exc)  # a message for the user
        return
    assert out.shape == shape and out.dtype == np.float32
    assert np.isfinite(out).all() and 0 <= out.min() and out.max() <= 1
