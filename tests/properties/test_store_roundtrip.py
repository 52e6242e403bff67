"""Store round trip of arbitrary Datasets: what goes in comes out identical (values, dtypes,
coordinates, attrs), for every dtype the store documents (integers, floats with NaN/inf, booleans,
unicode text) and any dims, sizes and attrs."""

import tempfile

import numpy as np
import xarray as xr
import xarray.testing.strategies as xrst
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst

from resflow.store import Store

from .strategies import examples

DTYPES = st.one_of(
    npst.integer_dtypes(endianness="="), npst.unsigned_integer_dtypes(endianness="="),
    npst.floating_dtypes(endianness="=", sizes=(32, 64)), st.just(np.dtype(bool)),
    npst.unicode_string_dtypes(endianness="=", min_len=1, max_len=8),
)
names = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=6)
attr_values = st.one_of(st.text(max_size=20), st.integers(-(2**31), 2**31 - 1),
                        st.floats(allow_nan=False, allow_infinity=False))


@st.composite
def datasets(draw):
    sizes = draw(xrst.dimension_sizes(dim_names=names, min_dims=1, max_dims=3, min_side=1, max_side=4))
    dims = list(sizes)
    variables = {}
    for name in draw(st.lists(names.filter(lambda n: n not in dims), min_size=1, max_size=4, unique=True)):
        vdims = draw(st.lists(st.sampled_from(dims), min_size=0, max_size=len(dims), unique=True))
        dtype = draw(DTYPES)
        values = draw(npst.arrays(dtype, tuple(sizes[d] for d in vdims)))
        variables[name] = (vdims, values, draw(st.dictionaries(names, attr_values, max_size=2)))
    coords = {d: (d, np.arange(sizes[d]) * draw(st.integers(1, 5))) for d in dims if draw(st.booleans())}
    return xr.Dataset(variables, coords=coords, attrs=draw(st.dictionaries(names, attr_values, max_size=3)))


@settings(max_examples=examples(40))
@given(ds=datasets())
def test_any_dataset_round_trips_identically(ds):
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"{tmp}/s", create=True)
        record = store.write(ds, kind="toy-run", name="roundtrip")
        back = store.load(record)
        for key in ("store_kind", "store_name", "store_record", "store_schema_version", "store_kind_schema"):
            back.attrs.pop(key)
        xr.testing.assert_identical(back, ds)
        for name in ds.data_vars:
            assert back[name].dtype.kind == ds[name].dtype.kind, (name, back[name].dtype, ds[name].dtype)
