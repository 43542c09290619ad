"""ros/heartbeat.py over rclpy: the stop repeated from its own thread, and True while the
node has not decided for longer than it may (issue 19); the speed scale repeated with it."""
from rclpy.node import Node
from std_msgs.msg import Bool, Float64

from contact_estimation.ros.heartbeat import Heartbeat
from contact_estimation.ros.qos import STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning

TIMEOUT = 15.0


def test_the_heartbeat_says_stop_while_the_node_is_late_and_its_decision_again_after(context):
    node = Node('heartbeat_test', context=context)
    stops = []
    node.create_subscription(Bool, '/heartbeat_test/stop', lambda m: stops.append(m.data),
                             STOP_QOS)
    clock = [100.0]  # the node's clock, s: moved by the test
    told = []  # the silences the heartbeat said it was late after (the node names the cause)
    heartbeat = Heartbeat(node.create_publisher(Bool, '/heartbeat_test/stop', STOP_QOS), 50.0,
                          lambda: False, lambda: clock[0], 'heartbeat test',
                          on_late=told.append)
    heartbeat.SLOWEST_CLOCK = 1e-9  # only the node's clock, moved by the test, makes it late
    try:
        with spinning(context, node) as executor:
            assert spin_until(executor, lambda: len(stops) >= 5, TIMEOUT)
            assert not any(stops) and heartbeat.late == 0
            clock[0] += 0.07  # no decision for 3.5 periods of 20 ms: nobody is watching
            count = len(stops)
            assert spin_until(executor, lambda: len(stops) > count + 3, TIMEOUT)
            assert all(stops[count + 1:]) and heartbeat.late >= 3
            assert len(told) == 1 and told[0] >= 0.07  # once per late stretch, however long
            heartbeat.decision()
            count = len(stops)
            assert spin_until(executor, lambda: len(stops) > count + 3, TIMEOUT)
            assert not any(stops[count + 1:]) and len(told) == 1
            clock[0] += 0.07  # late again: told again
            assert spin_until(executor, lambda: len(told) == 2, TIMEOUT)
    finally:
        heartbeat.close()


def test_the_heartbeat_says_stop_when_the_nodes_clock_stands_still(context):
    """Issue 27: on simulated time whose /clock stopped, the node's clock, timers and
    timeouts stand still; the heartbeat judges on the monotonic clock too."""
    node = Node('heartbeat_test', context=context)
    stops = []
    node.create_subscription(Bool, '/heartbeat_test/stop', lambda m: stops.append(m.data),
                             STOP_QOS)
    heartbeat = Heartbeat(node.create_publisher(Bool, '/heartbeat_test/stop', STOP_QOS), 200.0,
                          lambda: False, lambda: 100.0, 'heartbeat test')
    try:
        with spinning(context, node) as executor:
            # 3 periods of 5 ms / SLOWEST_CLOCK = 0.15 s of real time without a decision
            assert spin_until(executor, lambda: stops and stops[-1] is True, TIMEOUT)
            assert heartbeat.late >= 1
    finally:
        heartbeat.close()


def test_the_speed_scale_is_repeated_while_the_nodes_executor_does_not_run(context):
    """The speed scale rides on the heartbeat's thread: a node whose executor is held (here:
    never spun) still repeats it, as a follower of f_S needs (the simulated cobot holds after
    150 ms without one)."""
    owner, listener = Node('heartbeat_owner', context=context), Node('scale_listener',
                                                                       context=context)
    scales = []
    listener.create_subscription(Float64, '/heartbeat_test/scale',
                                 lambda m: scales.append(m.data), STOP_QOS)
    scale_pub = owner.create_publisher(Float64, '/heartbeat_test/scale', STOP_QOS)
    heartbeat = Heartbeat(owner.create_publisher(Bool, '/heartbeat_test/stop', STOP_QOS), 50.0,
                          lambda: False, lambda: 100.0, 'heartbeat test',
                          repeat=lambda: scale_pub.publish(Float64(data=0.5)))
    try:
        with spinning(context, listener) as executor:
            assert spin_until(executor, lambda: len(scales) >= 5, TIMEOUT)
            assert set(scales) == {0.5}
    finally:
        heartbeat.close()
