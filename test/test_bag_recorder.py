"""ros/bag_recorder.py over rclpy: each topic subscribed as reliably and durably as all of its
publishers offer (as rosbag2 adapts), so that a loaded machine delays the recording rather than
loses samples the suite took; and each message handed on as it is recorded."""
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from contact_estimation import manifest
from contact_estimation.ros.bag_recorder import BagRecorder
from contact_estimation.ros.conversions import seconds_to_stamp
from contact_estimation.ros.qos import DRIVER_QOS, SENSOR_QOS, STOP_QOS
from contact_estimation.ros.spinning import spin_until
from contact_estimation.ros.testing import spinning

TIMEOUT = 15.0
JOINT_STATES = '/' + manifest.node('joint_state_listener').topic('joint_states')
STOP = '/' + manifest.node('collision_detector').topic('stop')


def _subscribed(recorder, topic):
    """(reliability, durability) of the recorder's subscription to `topic`, None before it."""
    found = recorder.node.get_subscriptions_info_by_topic(topic)
    return (found[0].qos_profile.reliability, found[0].qos_profile.durability) if found else None


def test_the_recorder_subscribes_as_its_publishers_offer_and_hands_each_message_on(context,
                                                                                    tmp_path):
    driver = Node('recorder_test_driver', context=context)
    stop = driver.create_publisher(Bool, STOP, STOP_QOS)
    stop.publish(Bool(data=True))  # before the recorder: kept for it (transient local)
    joint_states = driver.create_publisher(JointState, JOINT_STATES, DRIVER_QOS)
    tapped = []
    recorder = BagRecorder.for_suite(context, tmp_path / 'bag',
                                     tap=lambda topic, cdr: tapped.append(topic))
    try:
        with spinning(context, recorder.node) as executor:
            assert spin_until(executor, lambda: _subscribed(recorder, JOINT_STATES)
                              and _subscribed(recorder, STOP), TIMEOUT)
            assert _subscribed(recorder, JOINT_STATES) == (ReliabilityPolicy.RELIABLE,
                                                           DurabilityPolicy.VOLATILE)
            assert _subscribed(recorder, STOP) == (ReliabilityPolicy.RELIABLE,
                                                   DurabilityPolicy.TRANSIENT_LOCAL)
            assert spin_until(executor, lambda: STOP in tapped, TIMEOUT)  # sent before it
            msg = JointState(name=['panda_joint1'], position=[0.0])
            msg.header.stamp = seconds_to_stamp(1.0)
            joint_states.publish(msg)
            assert spin_until(executor, lambda: JOINT_STATES in tapped, TIMEOUT)
            # A best-effort driver comes too: the subscription hears it.
            other = driver.create_publisher(JointState, JOINT_STATES, SENSOR_QOS)
            assert spin_until(executor, lambda: _subscribed(recorder, JOINT_STATES)[0]
                              == ReliabilityPolicy.BEST_EFFORT, TIMEOUT)
            count = tapped.count(JOINT_STATES)
            other.publish(msg)
            assert spin_until(executor, lambda: tapped.count(JOINT_STATES) > count, TIMEOUT)
    finally:
        recorder.close()
        driver.destroy_node()
