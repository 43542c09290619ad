"""core/chain/watchdog_clock.py: a watchdog's time neither jumps nor stands still when the
node's time source changes (issue 27)."""
import pytest

from contact_estimation.core.chain.watchdog_clock import WatchdogClock


def test_it_reads_its_first_source_as_it_is():
    clock = WatchdogClock()
    assert clock.read('monotonic', 5000.0) == 5000.0
    assert clock.read('monotonic', 5000.5) == 5000.5


def test_a_switch_to_simulated_time_starting_at_zero_keeps_ages_true():
    clock = WatchdogClock()
    arrived = clock.read('monotonic', 5000.0)
    assert clock.read('ros', None) == 5000.0           # no /clock yet: time holds
    assert clock.read('ros', 1.0) == pytest.approx(5000.0)
    assert clock.read('ros', 1.3) - arrived == pytest.approx(0.3)


def test_a_switch_back_to_monotonic_time_goes_on_from_where_it_was():
    clock = WatchdogClock()
    clock.read('ros', 1.7e9)
    before = clock.read('ros', 1.7e9 + 2.0)
    assert clock.read('monotonic', 10.0) == pytest.approx(before)
    assert clock.read('monotonic', 10.25) == pytest.approx(before + 0.25)
