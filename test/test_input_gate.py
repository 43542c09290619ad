"""The input gate (core/chain/input_gate.py), ROS-free: each cause in its order, which one
wins when several hold, and what holds until a reset."""

from contact_estimation.core.chain.input_gate import (BAD_STAMP, BEHIND, CAUSES, FAULT,
                                                      STALE, WAITING, GateConfig, InputGate,
                                                      Verdict)
from contact_estimation.core.chain.detector import FAULT as NODE_FAULT
from contact_estimation.core.chain.detector import CollisionDetector, DetectorConfig
from contact_estimation.core.chain.lag import LATE_INPUT
from contact_estimation.core.restart import RESTARTED

CONFIG = GateConfig('joint state', input_timeout=0.1, timeout_name='joint_state_timeout',
                    max_lag=0.05, fault_hold=1.0)


def fed(now: float = 10.0) -> InputGate:
    """A gate whose input arrived at `now`, stamped `now`, checked then: clear."""
    gate = InputGate(CONFIG)
    gate.arrived(now)
    gate.newest(now, now)
    assert gate.judge(now).cause == ''
    return gate


def test_the_causes_are_judged_in_one_order():
    assert CAUSES == (RESTARTED, FAULT, WAITING, BAD_STAMP, STALE, BEHIND)


def test_no_input_yet_is_waiting_and_the_first_input_clears_it():
    gate = InputGate(CONFIG)
    assert gate.judge(0.0).cause == WAITING
    assert gate.judge(0.0).reason == 'waiting for the first joint state'
    assert gate.refusal(0.0) == 'cannot reset: no joint state received yet'
    gate.arrived(0.0)
    assert gate.judge(0.0).cause == ''


def test_an_upstream_watchdog_that_never_saw_the_input_fresh_is_waiting_then_stale():
    gate = fed()
    gate.upstream('joint states are stale (listener watchdog)')
    assert gate.judge(10.0).cause == WAITING
    assert 'listener watchdog' in gate.judge(10.0).reason
    gate.upstream('')
    assert gate.judge(10.0).cause == ''
    gate.upstream('joint states are stale (listener watchdog)')
    assert gate.judge(10.0) == (Verdict(STALE, 'joint states are stale (listener watchdog)'))


def test_no_input_for_the_timeout_is_stale_and_new_input_clears_it():
    gate = InputGate(GateConfig('residual', input_timeout=0.1))
    gate.arrived(10.0)
    assert gate.judge(10.1).cause == ''
    verdict = gate.judge(10.15)
    assert verdict.cause == STALE
    assert verdict.reason == 'no residual for 0.150 s (input_timeout 0.1 s)'
    assert gate.refusal(10.15) == f'cannot reset: {verdict.reason}'
    gap = gate.arrived(10.2)
    assert gap.cause == STALE and gap.reason == (
        'gap of 0.200 s between residuals (input_timeout 0.1 s)')
    assert gate.judge(10.2).cause == '' and gate.arrived(10.25).cause == ''


def test_a_newest_sample_older_than_max_lag_beyond_the_offset_is_stale():
    gate = fed()
    gate.newest(10.04, 10.0)  # 40 ms old at the check: within max_lag
    assert gate.judge(10.04).cause == ''
    gate.newest(10.06, 10.0)
    verdict = gate.judge(10.06)
    assert verdict.cause == STALE and verdict.reason.startswith('joint states stale: the '
                                                                'latest is 60 ms old')


def test_another_input_stale_is_judged_after_the_main_one():
    gate = fed()
    lidar = 'lidar stale: no cloud arrived'
    assert gate.judge(10.0, lidar) == Verdict(STALE, lidar)
    assert gate.judge(10.2, 'lidar stale').reason.startswith('no joint state for')


def test_stamps_that_go_back_are_a_bad_stamp_for_that_check_only():
    gate = fed()
    gate.arrived(10.01)
    gate.newest(10.01, 9.5)
    verdict = gate.judge(10.01)
    assert verdict.cause == BAD_STAMP and 'went back 500.0 ms' in verdict.reason
    gate.newest(10.02, 9.51)  # the new time base: its offset learned anew
    assert gate.judge(10.02).cause == ''


def test_this_node_late_is_behind_until_it_is_in_time_again():
    gate = fed()
    gate.late('this check came 80.0 ms after it was due')
    assert gate.judge(10.0) == Verdict(BEHIND, 'this check came 80.0 ms after it was due')
    assert gate.refusal(10.0).startswith('cannot reset: this check came')
    gate.late('')
    assert gate.judge(10.0).cause == ''


def test_a_batch_late_by_the_node_stands_behind_its_input_late_or_gone_back_does_not():
    gate = fed()
    gate.sample_lag(BEHIND, 'behind its input')
    assert gate.judge(10.0).cause == BEHIND
    for cause in (LATE_INPUT, BAD_STAMP, ''):
        gate.sample_lag(cause, 'the batch')
        assert gate.judge(10.0).cause == ''


def test_a_fault_is_held_for_fault_hold_after_the_last_one():
    gate = fed()
    gate.fault(10.0, 'unexpected ZeroDivisionError')
    gate.fault(10.5, 'unexpected KeyError')
    assert gate.judge(11.4).reason == 'unexpected KeyError'
    assert gate.refusal(11.4) == 'cannot reset: unexpected KeyError'
    gate.arrived(11.5)
    gate.newest(11.5, 11.5)
    assert gate.judge(11.5).cause == ''


def test_a_restart_holds_until_a_reset_is_allowed_and_done():
    gate = InputGate(CONFIG)
    gate.restarted('restarted after the process before it died (killed by SIGKILL)')
    assert gate.judge(0.0).cause == RESTARTED
    assert gate.refusal(0.0) == 'cannot reset: no joint state received yet'
    gate.arrived(1.0)
    gate.newest(1.0, 1.0)
    assert gate.judge(100.0).cause == RESTARTED  # no timeout clears it
    assert gate.refusal(1.0) == ''
    assert gate.judge(1.0).cause == RESTARTED  # a refusal check releases nothing
    assert 'SIGKILL' in gate.reset()
    assert gate.judge(1.0).cause == '' and gate.reset() == ''


def test_when_several_hold_the_first_in_the_order_wins():
    gate = InputGate(CONFIG)
    gate.arrived(10.0)
    gate.newest(10.0, 10.0)
    gate.late('this check came late')                    # behind
    gate.newest(10.3, 10.0)                              # stale (and its timeout)
    assert gate.judge(10.3).cause == STALE
    gate.newest(10.3, 9.0)                               # bad stamp
    assert gate.judge(10.3).cause == BAD_STAMP
    gate.upstream('stale upstream')                      # never fresh upstream: waiting
    assert gate.judge(10.3).cause == WAITING
    gate.fault(10.3, 'fault')
    assert gate.judge(10.3).cause == FAULT
    gate.restarted('restarted')
    assert gate.judge(10.3).cause == RESTARTED
    causes = []
    for undo in (gate.reset, lambda: gate.fault(-10.0, ''), lambda: gate.upstream(''),
                 lambda: gate.newest(10.3, 10.3), lambda: gate.arrived(10.3),
                 lambda: gate.late('')):
        undo()
        causes.append(gate.judge(10.3).cause)
    assert causes == [FAULT, WAITING, BAD_STAMP, STALE, BEHIND, '']


def test_the_detector_latches_as_the_table_says():
    """The detector's column of the gate's table: a fault latches and refuses a reset while
    held, then a reset clears it; bad_stamp latches and a reset clears it; behind refuses a
    reset until a batch is in time; waiting never latches."""
    detector = CollisionDetector(DetectorConfig.build(('j1', 'j2'), persistence_time=0.005))
    assert detector.state(0.0).cause == WAITING
    t = 0.0
    for _ in range(60):
        t += 0.001
        detector.update(t, [0.0, 0.0])
    assert not detector.state(t).stop  # waiting was not latched
    detector.fault(t, 'unexpected KeyError')
    assert detector.state(t).cause == NODE_FAULT
    assert detector.reset(t + 0.5) == 'cannot reset: unexpected KeyError'
    for _ in range(1100):  # past the hold, quiet
        t += 0.001
        detector.update(t, [0.0, 0.0])
    assert detector.state(t).cause == NODE_FAULT  # latched after the hold
    assert detector.reset(t) == '' and not detector.state(t).stop
    detector.set_lag(t, BAD_STAMP, 'the stamps went back')
    assert detector.state(t).cause == BAD_STAMP
    assert detector.reset(t) == ''
    detector.set_lag(t, BEHIND, 'behind its input')
    assert detector.reset(t) == 'cannot reset: behind its input'
    detector.set_lag(t, '', '')
    assert detector.state(t).cause == BEHIND and detector.reset(t) == ''
