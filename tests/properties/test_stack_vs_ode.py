"""A residual stack is a fixed-grid ODE solve: for random fields, schemes, depths and horizons it
equals torchdiffeq's solver with the same tableau, in float64, to round-off."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchdiffeq import odeint

from resflow.dynamics import LinearField, MLPField, ResidualStack

from .strategies import examples, seeds

F64 = torch.float64
# torchdiffeq's fixed-grid solvers and the registered scheme with the same tableau
TWINS = {"euler": "euler", "midpoint": "midpoint", "heun": "heun2", "heun3": "heun3", "rk38": "rk4"}
# Both sides do the same float64 arithmetic in a different order: a few ulps per operation, over at
# most 64 steps of an O(1) state.
ROUNDOFF = 1e-11


@st.composite
def fields(draw):
    dim = draw(st.integers(1, 12))
    seed = draw(seeds)
    if draw(st.booleans()):
        return MLPField(dim, hidden=draw(st.integers(1, 32)), seed=seed,
                        activation=draw(st.sampled_from(["relu2", "softplus2"])), dtype=F64)
    g = torch.Generator().manual_seed(seed)
    return LinearField(torch.randn(dim, dim, generator=g, dtype=F64) / dim**0.5)


@settings(max_examples=examples(40))
@given(field=fields(), scheme=st.sampled_from(sorted(TWINS)), depth=st.integers(1, 64),
       horizon=st.floats(0.05, 3.0), batch=st.integers(1, 8), seed=seeds)
def test_stack_equals_fixed_grid_torchdiffeq(field, scheme, depth, horizon, batch, seed):
    dim = field.dim if isinstance(field, MLPField) else field.A.shape[0]
    h0 = torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    with torch.no_grad():
        got = ResidualStack(field, depth, scheme=scheme, horizon=horizon)(h0)
        t = torch.tensor([0.0, horizon], dtype=F64)
        ref = odeint(field, h0, t, method=TWINS[scheme], options={"step_size": horizon / depth})[-1]
    scale = max(1.0, float(ref.abs().max()))
    torch.testing.assert_close(got, ref, rtol=ROUNDOFF, atol=ROUNDOFF * scale)
