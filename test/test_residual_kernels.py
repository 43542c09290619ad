"""The residual's compiled kernels are their numpy formulas (issue 35).

The momentum observer's step (residual._observe): the formula is written here in numpy, as
residual.MomentumObserver's docstring gives it, and both are run over the same random
sequences: uneven and repeated steps, restarts (the first sample, a gap), a zero step, nan
and inf inputs, and a mass matrix whose lower triangle is garbage (only the upper one is
read, as crba fills it). Each friction model compiled for the per-sample path
(StaticTerms.friction) is friction.py's numpy formula. The residual node's finite check
(residual_node._all_finite) is np.isfinite(x).all() on every placement of nan and ±inf, and
on huge finite values. The chain, built as the replay builds it, compiles nothing on its
samples: the arrays the listener hands on are those its kernels were compiled for at start.
"""
import numpy as np
import pytest

from test_batches import _recording

from contact_estimation.commands import replay
from contact_estimation.core.chain import friction, residual
from contact_estimation.core.chain.residual import StaticTerms, _observe, make_residual
from contact_estimation.nodes.residual_node import _all_finite

N = 7


def formula(mass, coriolis, gravity, friction, tau, v, restart, dt, gain, previous):
    """(p, β, r) of one step in numpy; `previous` is (p, β, r) of the step before."""
    upper = np.triu(mass)
    p = (upper + np.triu(mass, 1).T) @ v
    beta = tau + v @ coriolis - gravity - friction
    if restart:
        return p, beta, np.zeros(N)
    p_previous, beta_previous, r_previous = previous
    decay = np.exp(-gain * dt)
    return p, beta, decay * r_previous + (1.0 - decay) * (
        (p - p_previous) / dt - 0.5 * (beta + beta_previous))


def random_terms(rng):
    mass = rng.normal(size=(N, N))  # lower triangle different from the upper: not read
    return (mass, rng.normal(size=(N, N)), rng.normal(size=N) * 10, rng.normal(size=N),
            rng.normal(size=N) * 5, rng.normal(size=N))


def run_both(steps, gain, rng, spoil=None):
    """Kernel and formula over `steps` (dt, or None for a restart); `spoil(k, terms)` may
    put nan/inf into the terms of step k. Returns the r of each, per step."""
    memory = np.zeros((residual._MEMORY_ROWS, N))
    memory[residual._DECAY_STEP] = np.nan
    r_kernel, previous, got, expected = np.zeros(N), None, [], []
    for k, dt in enumerate(steps):
        terms = random_terms(rng)
        if spoil:
            spoil(k, terms)
        r = np.empty(N)
        _observe(*terms, dt is None, 0.0 if dt is None else dt, gain, memory, r_kernel, r)
        with np.errstate(all='ignore'):
            previous = formula(*terms, dt is None, dt, gain, previous)
        np.testing.assert_allclose(memory[residual._P], previous[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(memory[residual._BETA], previous[1], rtol=1e-12,
                                   atol=1e-12)
        r_kernel = r
        got.append(r)
        expected.append(previous[2])
    return np.array(got), np.array(expected)


@pytest.mark.parametrize('seed', range(4))
def test_the_kernel_is_the_formula_on_uneven_steps_and_restarts(seed):
    rng = np.random.default_rng(seed)
    steps = [None] + [float(x) for x in rng.choice([1e-3, 1e-3, 1.3e-3, 0.5e-3, 1e-2], 60)]
    steps[20] = steps[41] = None  # gaps: the observer starts over
    gain = rng.uniform(0.1, 1000.0, N)
    got, expected = run_both(steps, gain, rng)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    assert not got[20].any() and got[21].any()


def test_a_zero_step_gives_what_numpy_gives():
    got, expected = run_both([None, 1e-3, 0.0, 1e-3], np.full(N, 50.0),
                             np.random.default_rng(7))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, equal_nan=True)
    assert np.isnan(got[2]).all() or np.isinf(got[2]).any()


@pytest.mark.parametrize('value', [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize('term', range(6))  # mass, C, g, f, τ, q̇
def test_non_finite_inputs_give_what_numpy_gives(value, term):
    def spoil(k, terms):
        if k == 3:
            terms[term].reshape(-1)[2] = value

    got, expected = run_both([None] + [1e-3] * 6, np.full(N, 50.0),
                             np.random.default_rng(term), spoil)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, equal_nan=True)
    assert not np.isfinite(got[3:]).all()


def test_every_update_returns_a_new_array_that_stays_as_returned(robot):
    """Callers keep the returned τ_ext (a sample, a list of a run): later steps never write
    into it."""
    observer = make_residual('momentum_observer', robot)
    rng = np.random.default_rng(1)
    kept, copies = [], []
    for k in range(20):
        q, v, tau = rng.normal(size=(3, robot.n))
        out = observer.update(k * 1e-3, q, v, tau)
        kept.append(out)
        copies.append(out.copy())
    assert len({id(x) for x in kept}) == len(kept)
    np.testing.assert_array_equal(kept, copies)


def test_the_kernel_is_ready_when_the_observer_is_built(robot):
    """Compiled (or loaded from numba's cache) at construction: running a stream compiles
    nothing more, so no sample waits for numba."""
    observer = make_residual('momentum_observer', robot, friction_params=(0.3, 0.05))
    compiled = list(_observe.signatures)
    assert compiled
    rng = np.random.default_rng(2)
    for k in range(10):
        q, v, tau = rng.normal(size=(3, robot.n))
        observer.update(k * 1e-3, q, v, tau)
    assert list(_observe.signatures) == compiled


def test_the_finite_check_is_numpys():
    rng = np.random.default_rng(3)
    cases = [np.zeros(N), np.full(N, 1e308), np.full(N, -np.finfo(float).max), np.zeros(0),
             np.array([5e-324, -0.0, 0.0])]
    for value in (np.nan, np.inf, -np.inf):
        for place in range(N):
            spoiled = rng.normal(size=N)
            spoiled[place] = value
            cases.append(spoiled)
    for values in cases:
        assert _all_finite(values) == np.isfinite(values).all(), values


@pytest.mark.parametrize('model', sorted(friction.MODELS))
def test_the_compiled_friction_is_the_numpy_formula(robot, model):
    rng = np.random.default_rng(len(model))
    spec = friction.MODELS[model]
    params = rng.uniform(spec.lower, spec.upper, size=(robot.n, len(spec.parameters)))
    terms = StaticTerms(robot, None, model, params.ravel())
    speeds = [rng.normal(size=robot.n) * scale for scale in (1e-4, 1e-2, 1.0, 1e3)]
    speeds += [np.zeros(robot.n), np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e-300])]
    for v in speeds:
        with np.errstate(all='ignore'):
            expected = friction.joint_friction(model, params, v)
        np.testing.assert_allclose(terms.friction(v), expected, rtol=1e-12, atol=1e-15,
                                   equal_nan=True)


@pytest.mark.parametrize('velocity', [True, False], ids=['q̇ given', 'q̇ fitted'])
def test_the_chain_compiles_nothing_on_its_samples(context, velocity):
    """A new array layout or write flag from upstream would make numba compile on a live
    sample (a second's stall): the kernels are compiled for what the chain hands on."""
    kernels = (_observe, _all_finite, *residual._COMPILED_FRICTION.values())
    run = replay.build(context, [], lambda *_: None)
    try:
        compiled = [list(k.signatures) for k in kernels]
        assert compiled[0] and compiled[1]
        listener = next(n for n in run.nodes if n.get_name() == 'joint_state_listener')
        for stamp, raw in _recording(velocity)[:200]:
            run.step(stamp)
            listener.take_waiting([raw])
        residual_node = next(n for n in run.nodes if n.get_name() == 'residual_node')
        assert residual_node.problems.traffic['residuals_published'] > 100
        assert [list(k.signatures) for k in kernels] == compiled
    finally:
        run.close()
