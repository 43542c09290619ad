"""The ROS-free collision detector: seed 001 eq. 7 in seconds (consecutive and weighted
persistence), roles, dynamic thresholds, latch, fail-safe, irregular and out-of-order stamps."""

import numpy as np
import pytest


from contact_estimation.core.chain.detector import (COLLISION, FORCE, INVALID, POSITION,
                                              STALE, WAITING, WEIGHTED, AccelerationEstimate,
                                              CollisionDetector, DetectorConfig)
from contact_estimation.core.restart import RESTARTED
from contact_estimation.core.chain.lag import BEHIND

NAMES = ('j1', 'j2', 'j3')
DT = 0.001


def make(n=5, **kwargs) -> CollisionDetector:
    """A detector whose persistence time is n samples of DT (seed 001's n of eq. 7), with
    seed 001's consecutive rule unless told otherwise."""
    kwargs.setdefault('reset_quiet_time', 0.0)
    kwargs.setdefault('persistence', 'consecutive')
    return CollisionDetector(DetectorConfig.build(NAMES, persistence_time=n * DT, **kwargs))


def started(n=5, **kwargs) -> tuple[CollisionDetector, float]:
    """`make`, after one quiet sample at t = 0 (the first sample has no Δt: it counts for
    nothing); returns the detector and the time of the next sample."""
    detector = make(n, **kwargs)
    detector.update(0.0, [0.0] * len(NAMES))
    return detector, DT


def feed(detector, t0, samples, dt=DT, **kwargs):
    """Feed rows of τ_ext at `dt` spacing from t0; return the list of states and the next time."""
    states = []
    for k, tau in enumerate(samples):
        states.append(detector.update(t0 + k * dt, tau, **kwargs))
    return states, t0 + len(samples) * dt


def test_n_minus_one_samples_over_threshold_is_no_collision():
    detector = make(n=5)
    over, under = [0.0, 4.5, 0.0], [0.0, 3.9, 0.0]
    states, t = feed(detector, 0.0, [over] * 4 + [under] + [over] * 4 + [under])
    assert not any(s.stop for s in states)
    states, _ = feed(detector, t, [over] * 5)
    assert [s.stop for s in states] == [False] * 4 + [True]
    assert states[-1].cause == COLLISION and states[-1].colliding_joints == (1,)
    assert 'j2' in states[-1].reason


def test_count_runs_over_joints_as_in_eq7_exists_clause():
    """m counts samples where some joint is over, even if the joint over changes."""
    detector, t = started(n=4)
    states, _ = feed(detector, t, [[5, 0, 0], [5, 0, 0], [0, -5, 0], [0, 0, 5]])
    assert states[-1].stop and states[-1].colliding_joints == (2,)


@pytest.mark.parametrize('persistence', ['consecutive', 'weighted'])
def test_at_1_khz_a_residual_just_over_threshold_needs_seed_001s_25_samples(persistence):
    """Both rules reduce to eq. 7 with n = 25 at 1 kHz for a residual just over ψ."""
    detector, t = started(n=25, persistence=persistence)
    states, _ = feed(detector, t, [[0.0, 4.01, 0.0]] * 30)
    assert [s.stop for s in states].index(True) == 24
    assert '25 samples' in states[24].reason and persistence in states[24].reason


def test_weighted_persistence_shortens_with_the_exceedance_but_never_to_one_sample():
    """E grows by Δt·(|τ|/ψ)²: a hit r times ψ needs T/r² (at most T/2 per sample)."""
    for tau, samples in ((8.0, 7), (12.0, 3), (4000.0, 2)):
        detector, t = started(n=25, persistence=WEIGHTED)
        states, _ = feed(detector, t, [[0.0, tau, 0.0]] * 30)
        assert [s.stop for s in states].index(True) + 1 == samples, tau
    # A single sample, however large, is not a collision; the run restarts under ψ.
    detector, t = started(n=25, persistence=WEIGHTED)
    states, _ = feed(detector, t, [[0.0, 4000.0, 0.0], [0.0, 3.0, 0.0]] * 20)
    assert not any(s.stop for s in states)


@pytest.mark.parametrize('persistence', ['consecutive', 'weighted'])
def test_irregular_100_hz_stamps_count_time_not_samples(persistence):
    """4–10 ms steps: a residual just over ψ is a collision once its run spans 25 ms."""
    steps = np.random.default_rng(3).uniform(0.004, 0.010, 40)
    stamps = np.concatenate([[0.0], np.cumsum(steps)])
    detector = make(n=25, persistence=persistence)
    stops = [detector.update(s, [0.0, 0.0, 0.0] if k < 5 else [0.0, 4.01, 0.0]).stop
             for k, s in enumerate(stamps)]
    over_time = np.cumsum(steps[4:])  # the run over ψ starts at sample 5 with Δt = steps[4]
    weight = 1.0025 ** 2 if persistence == WEIGHTED else 1.0
    expected = 5 + int(np.flatnonzero(over_time * weight >= 0.025 - 1e-9)[0])
    assert stops.index(True) == expected


def test_out_of_order_stamps_are_ignored_and_counted_a_restarted_clock_is_taken():
    detector, t = started(n=5, input_timeout=0.1)
    over = [0.0, 5.0, 0.0]
    states, t = feed(detector, t, [over] * 3)
    late = detector.update(t, over, stamp=t - 0.0025)    # older than the last sample
    repeated = detector.update(t, over, stamp=t - DT)    # the same stamp again
    assert late.ignored and 'out of order' in late.ignored and repeated.ignored
    assert detector.out_of_order == 2 and not repeated.stop
    states, t = feed(detector, t, [over] * 3)            # the run goes on: 3 + 2 = 5 samples
    assert [s.stop for s in states] == [False, True, True] and not states[-1].ignored
    # The driver's clock restarts far back: the sample is taken, the run starts over.
    restarted = make(n=5, input_timeout=0.1)
    feed(restarted, 100.0, [over] * 4)
    states = [restarted.update(100.004 + k * DT, over, stamp=3.0 + k * DT) for k in range(6)]
    assert [s.stop for s in states] == [False] * 5 + [True]
    assert restarted.out_of_order == 0


def test_a_stream_of_out_of_order_samples_ends_in_a_stale_stop():
    detector, t = started(n=5, input_timeout=0.05)
    states = [detector.update(t + k * DT, [0.0, 0.0, 0.0], stamp=0.0) for k in range(100)]
    assert detector.out_of_order == 100
    assert not states[40].stop and states[-1].stop and states[-1].cause == STALE


def test_roles_pick_the_threshold_and_switch_at_run_time():
    detector = make(n=2, thresholds_position=4.0, thresholds_force=8.0,
                    roles=[POSITION, FORCE, POSITION])
    tau = [0.0, 6.0, 0.0]
    states, t = feed(detector, 0.0, [tau] * 3)
    assert not any(s.stop for s in states)
    np.testing.assert_allclose(states[-1].thresholds, [4.0, 8.0, 4.0])
    detector.configure(detector.config.replace(roles=POSITION))
    states, _ = feed(detector, t, [tau] * 2)
    assert states[-1].stop and states[-1].colliding_joints == (1,)
    with pytest.raises(ValueError, match='joint_roles'):
        detector.config.replace(roles=['position', 'torque', 'force'])


def test_threshold_grows_with_speed_and_acceleration():
    detector, t = started(n=2, thresholds_position=4.0, speed_gain=[0.0, 2.0, 0.0],
                          acceleration_gain=[0.0, 0.5, 0.0])
    tau = [0.0, 6.0, 0.0]
    states, t = feed(detector, t, [tau] * 3, velocity=[0, -0.5, 0], acceleration=[0, 3.0, 0])
    np.testing.assert_allclose(states[-1].thresholds, [4.0, 4.0 + 1.0 + 1.5, 4.0])
    assert not any(s.stop for s in states)
    states, _ = feed(detector, t, [tau] * 2, velocity=[0, 0.5, 0], acceleration=[0, 0, 0])
    assert states[-1].stop


def parabola(estimate: AccelerationEstimate, t0: float, samples: int, acceleration: float,
             stamp_offset: float = 0.0, in_use: bool = True) -> list:
    """q̈ of `samples` positions at 1 kHz of q = a t²/2 on three joints from the motion's
    time t0, stamped `stamp_offset` from it."""
    return [estimate.update(t0 + k * DT + stamp_offset,
                            np.full(3, 0.5 * acceleration * (t0 + k * DT) ** 2), in_use)
            for k in range(samples)]


def test_the_acceleration_term_restarts_after_a_stamp_going_back():
    estimate = AccelerationEstimate(0.01)
    got = parabola(estimate, 100.0, 40, 2.0)
    assert got[0] is None and estimate.restarted is None  # no full window yet
    np.testing.assert_allclose(got[-1], 2.0, atol=1e-3)
    back = parabola(estimate, 100.04, 1, 2.0, stamp_offset=-0.5)  # the clock jumps back
    assert back == [None] and 'increase' in estimate.restarted  # the fit starts over there
    later = parabola(estimate, 100.041, 39, 2.0, stamp_offset=-0.5)
    assert estimate.restarted is None
    np.testing.assert_allclose(later[-1], 2.0, atol=1e-3)


def test_the_acceleration_term_starts_afresh_when_used_again():
    """After a pause (acceleration gain 0), the positions before it are out of date: the
    q̈ of the old motion must not come back."""
    estimate = AccelerationEstimate(0.01)
    np.testing.assert_allclose(parabola(estimate, 100.0, 40, 8.0)[-1], 8.0, atol=1e-3)
    paused = parabola(estimate, 100.04, 40, 0.0, in_use=False)
    assert all(a is None for a in paused)
    again = [a for a in parabola(estimate, 100.08, 25, 0.0) if a is not None]
    assert again and np.all(np.abs(again) < 1e-6)


def test_latch_until_reset_which_is_refused_while_over_threshold():
    detector, t = started(n=2)
    _, t = feed(detector, t, [[9, 0, 0]] * 2)
    assert 'j1' in detector.reset(t)
    states, t = feed(detector, t, [[0, 0, 0]] * 500)
    assert all(s.stop for s in states)
    assert states[-1].colliding_joints == (0,)  # the latched collision's joints, until cleared
    assert detector.reset(t) == ''
    state = detector.state(t)
    assert not state.stop and state.colliding_joints == ()


def test_reset_during_an_ongoing_contact_is_refused_and_cannot_blind_the_detector():
    """A latched 5 N·m contact dips to 3.9 N·m for one sample: a reset then must be refused,
    and the contact must keep the stop raised."""
    detector = make(n=5, reset_quiet_time=0.02)
    contact, dip = [0.0, 5.0, 0.0], [0.0, 3.9, 0.0]
    states, t = feed(detector, 0.0, [contact] * 10)
    assert states[-1].stop and states[-1].cause == COLLISION
    _, t = feed(detector, t, [dip])
    refusal = detector.reset(t)
    assert refusal.startswith('cannot reset') and 'under threshold for 0.02 s' in refusal
    states, t = feed(detector, t, [contact] * 5)
    assert all(s.stop for s in states)
    # Quiet for the persistence time but not yet reset_quiet_time: refused; then it clears.
    _, t = feed(detector, t, [dip] * 10)
    assert 'cannot reset' in detector.reset(t)
    _, t = feed(detector, t, [dip] * 11)
    assert detector.reset(t) == '' and not detector.state(t).stop
    # Once cleared, a new contact is counted from its start as usual.
    states, _ = feed(detector, t, [contact] * 5)
    assert [s.stop for s in states] == [False] * 4 + [True]


def test_hold_time_releases_only_after_the_residual_is_quiet():
    detector = make(n=5, hold_time=0.005)
    contact, dip = [0.0, 5.0, 0.0], [0.0, 3.9, 0.0]
    _, t = feed(detector, 0.0, [contact] * 10)
    states, t = feed(detector, t, ([dip] * 4 + [contact] * 2) * 5)  # dips shorter than n
    assert all(s.stop for s in states)
    states, _ = feed(detector, t, [dip] * 6)
    assert [s.stop for s in states] == [True] * 5 + [False]


def test_hold_time_releases_after_the_last_sample_over_threshold():
    detector = make(n=2, hold_time=0.1)
    _, t = feed(detector, 0.0, [[9, 0, 0]] * 50)
    quiet, t = feed(detector, t, [[0, 0, 0]] * 99)
    assert all(s.stop for s in quiet)
    states, _ = feed(detector, t, [[0, 0, 0]] * 2)
    assert not states[-1].stop


def test_a_restarted_process_starts_latched_with_its_cause_and_only_a_reset_clears_it():
    """core/restart.py: the cause shows from the start, before any residual (stop True
    either way), keeps its name through a `behind` start, is not released by hold_time, and
    a reset clears it once the residual has been quiet."""
    detector = make(n=2, hold_time=0.01)
    detector.restarted(0.0, 'restarted after the process before it died (killed by SIGKILL)')
    waiting = detector.state(0.0)
    assert waiting.stop and waiting.cause == RESTARTED and 'SIGKILL' in waiting.reason
    assert 'no residual' in detector.reset(0.0)
    detector.set_lag(0.0, BEHIND, 'behind its input')  # the new process catching up: still named
    detector.set_lag(0.0, '', '')
    states, t = feed(detector, 0.0, [[0, 0, 0]] * 100)
    assert all(s.stop and s.cause == RESTARTED for s in states)
    assert detector.reset(t) == '' and not detector.state(t).stop


def test_markers_joints_stay_with_the_latched_collision_and_grow_with_it():
    detector, t = started(n=3)
    _, t = feed(detector, t, [[0, 5, 0]] * 3)
    states, t = feed(detector, t, [[0, 0, 0], [0, 0, 6], [0, 0, 6], [0, 0, 6], [0, 0, 0]])
    assert [s.colliding_joints for s in states] == [(1,)] * 3 + [(1, 2)] * 2
    assert [s.contact for s in states] == [False, False, False, True, False]


def test_contact_is_eq7_at_the_latest_sample_while_stop_is_the_latch():
    detector, t = started(n=2)
    states, _ = feed(detector, t, [[5, 0, 0]] * 3 + [[0, 0, 0]])
    assert [s.contact for s in states] == [False, True, True, False]
    assert [s.stop for s in states] == [False, True, True, True]


def test_stale_input_and_watchdog_latch_stop():
    detector = make(n=3, input_timeout=0.05)
    first = detector.state(0.0)
    assert first.stop and first.cause == WAITING and first.input_problem == WAITING
    assert not detector.update(0.0, [0, 0, 0]).stop  # waiting is not latched
    assert not detector.state(0.04).stop
    late = detector.state(0.06)
    assert late.stop and late.cause == STALE and 'no residual' in late.reason
    assert late.input_problem == STALE
    assert detector.reset(0.06).startswith('cannot reset')
    states, t = feed(detector, 0.07, [[0, 0, 0]] * 2)
    assert all(s.stop for s in states)  # still latched after input resumes
    assert states[-1].input_problem == ''
    assert 'so far 0.001 s' in detector.reset(t)  # quiet shown anew after stale input
    _, t = feed(detector, t, [[0, 0, 0]] * 2)
    assert detector.reset(t) == ''
    detector.set_input_stale(True)
    state = detector.state(t)
    assert state.stop and 'watchdog' in state.reason
    assert 'watchdog' in detector.reset(t)


def test_a_listener_that_has_not_yet_seen_joint_states_means_waiting_not_a_latch():
    """At start the listener reports stale until the driver's first joint state; a residual
    may overtake its 'fresh' message. That is waiting, not a failure to latch."""
    detector = make(n=3)
    detector.set_input_stale(True)
    states, t = feed(detector, 0.0, [[0, 0, 0]] * 5)
    assert all(s.stop and s.cause == WAITING and s.input_problem == WAITING for s in states)
    detector.set_input_stale(False)
    assert not detector.state(t).stop
    detector.set_input_stale(True)  # from now on a stale listener is a failure: latched
    state = detector.state(t)
    assert state.stop and state.cause == STALE
    detector.set_input_stale(False)
    assert detector.state(t).stop


def test_a_gap_between_residuals_latches_stale_even_without_a_watchdog_check():
    detector = make(n=3, input_timeout=0.1)
    assert not detector.update(0.0, [0, 0, 0]).stop
    state = detector.update(1.0, [0, 0, 0])
    assert state.stop and state.cause == STALE and 'gap of 1.000 s' in state.reason
    assert detector.update(1.05, [0, 0, 0]).stop  # latched


def test_non_finite_residual_stops_at_once():
    detector = make(n=10, hold_time=0.005)
    detector.update(0.0, [0, 0, 0])
    state = detector.update(0.001, [0, np.nan, 0])
    assert state.stop and state.cause == INVALID and 'j2' in state.reason
    assert state.input_problem == INVALID
    assert 'not finite' in detector.reset(0.001)
    # hold_time counts from the last bad sample, and needs the persistence time of valid
    # quiet samples after it.
    states, _ = feed(detector, 0.002, [[0, 0, 0]] * 11)
    assert [s.stop for s in states] == [True] * 9 + [False] * 2


def test_fast_motion_cannot_raise_the_threshold_past_its_cap():
    detector, t = started(n=2, speed_gain=10.0, threshold_max=[6.0, 20.0, 6.0])
    states, _ = feed(detector, t, [[7.0, 0.0, 0.0]] * 2, velocity=[3.0, 3.0, 3.0])
    np.testing.assert_allclose(states[-1].thresholds, [6.0, 20.0, 6.0])
    assert states[-1].stop and states[-1].colliding_joints == (0,)


@pytest.mark.parametrize('kwargs, message', [
    ({'thresholds_position': -1.0}, 'thresholds_position'),
    ({'thresholds_force': [8.0, 0.0, 8.0]}, r'thresholds_force = .*: 0.0 outside'),
    ({'persistence_time': 0.0}, 'persistence_time'),
    ({'persistence_time': np.inf}, 'persistence_time'),
    ({'persistence': 'cusum'}, 'persistence'),
    ({'speed_gain': [1.0, 2.0]}, 'expected 1 or 3'),
    ({'acceleration_gain': np.nan}, 'acceleration_gain'),
    ({'hold_time': -0.5}, 'hold_time'),
    ({'input_timeout': 0.0}, 'input_timeout'),
    ({'roles': 'admittance'}, 'joint_roles'),
    ({'threshold_max': 0.0}, 'threshold_max'),
    ({'threshold_max': [10.0, 3.0, 10.0]}, r'threshold_max\[1\] = 3 N·m is below'),
    ({'threshold_max': 6.0, 'roles': FORCE}, 'threshold_max.*force role'),
    ({'reset_quiet_time': -0.1}, 'reset_quiet_time'),
])
def test_bad_parameters_are_refused_with_the_parameter_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DetectorConfig.build(NAMES, **kwargs)
