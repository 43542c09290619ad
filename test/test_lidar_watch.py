"""core/contact/lidar_watch.py: when a lidar's clouds stop arriving (issue 36)."""
import pytest

from contact_estimation.core.contact.lidar_watch import LidarWatch, LidarWatchConfig


def test_stale_only_after_a_first_cloud_unless_required():
    watch = LidarWatch(LidarWatchConfig(timeout=0.5), started=10.0)
    assert watch.stale(100.0) == '' and watch.summary(100.0) == 'no cloud yet'
    watch.arrived(100.0)
    assert watch.stale(100.5) == ''
    assert watch.stale(101.25) == ('lidar stale: the last cloud arrived 1.25 s ago '
                                   '(lidar.timeout 0.5 s)')
    assert watch.summary(101.25) == 'last cloud 1.25 s ago'


def test_a_required_lidar_is_stale_when_none_arrives_within_the_timeout():
    watch = LidarWatch(LidarWatchConfig(timeout=0.5, required=True), started=10.0)
    assert watch.stale(10.5) == ''
    assert 'no cloud arrived in the 0.75 s since the start' in watch.stale(10.75)
    watch.arrived(10.8)
    assert watch.stale(11.0) == ''


def test_a_timeout_that_is_no_time_is_refused():
    with pytest.raises(ValueError, match='timeout'):
        LidarWatchConfig(timeout=0.0)
