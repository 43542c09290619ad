"""The chain's wake period (issue 35): at rest the composed chain asks its process to sleep
the rest of joint_state_listener's `wake_period` after each wake, so that the 1 kHz input is
taken in batches; while a residual nears its threshold the detector says a contact lasts and
the process wakes per message again. The chain built in process as `up` builds it, fed the
driver's serialised messages as its executor hands them over."""
import time

from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from contact_estimation import composed, manifest
from contact_estimation.nodes.joint_state_listener import MAX_BATCH, JointStateListenerNode
from contact_estimation.ros.conversions import seconds_to_stamp

CHAIN = manifest.process_of('collision_detector')
WAKE_PERIOD = 0.004  # s


def _chain(context):
    files = [manifest.node(n).parameters_path() for n in CHAIN.nodes]
    args = ['--ros-args'] + [a for f in files for a in ('--params-file', f)] + [
        '-p', f'joint_state_listener:wake_period:={WAKE_PERIOD}']
    nodes = composed.build(CHAIN.nodes, context=context, cli_args=args)
    return {node.get_name(): node for node in nodes}


def _feed(chain, standing, seconds: float, push: float = 0.0, per_take: int = 10) -> None:
    """Driver messages for `seconds`, `per_take` every 10 ms stamped 1 ms apart up to now
    (the node's clock), handed to the listener as its executor does, the last batch just
    now; joint 4 pushed by `push` N·m (the measured effort falls short: τ_ext = -push)."""
    listener = chain['joint_state_listener']
    names, q, tau = standing
    effort = tau.copy()
    effort[3] -= push
    msg = JointState(name=names, position=q.tolist(), velocity=[0.0] * len(names),
                     effort=effort.tolist())
    for _ in range(int(seconds / 0.01)):
        time.sleep(0.01)
        now = listener.get_clock().now().nanoseconds * 1e-9
        batch = []
        for i in range(per_take):
            msg.header.stamp = seconds_to_stamp(now - (per_take - 1 - i) * 1e-3)
            batch.append(serialize_message(msg))
        listener.take_waiting(batch)


def test_at_rest_the_chain_rests_and_wakes_per_message_while_a_residual_nears_its_threshold(
        context, standing):
    chain = _chain(context)
    listener, detector = chain['joint_state_listener'], chain['collision_detector']
    try:
        _feed(chain, standing, 0.3)
        rest = listener.rest_after_wake()
        # The rest of the period after the take (less than it, or below 0 when this process
        # was kept from running since): not 0, which is "no rest".
        assert rest != 0.0 and rest <= WAKE_PERIOD and not detector.contact_lasts
        assert listener.rest_after_wake() == 0.0  # once per wake that took messages

        psi = detector.detector.state(detector.seconds()).thresholds[3]
        _feed(chain, standing, 0.3, push=0.75 * psi)  # over half ψ, under ψ: no stop
        state = detector.detector.state(detector.seconds())
        assert not state.stop and abs(state.residuals[3]) > 0.5 * psi
        assert detector.contact_lasts  # the process does not rest (ros/node_main.py)

        _feed(chain, standing, 0.5)
        assert not detector.contact_lasts

        _feed(chain, standing, 0.01, per_take=MAX_BATCH)  # a full take: a backlog behind it
        assert listener.rest_after_wake() == 0.0  # taken at once, no rest
    finally:
        for node in chain.values():
            node.destroy_node()


def test_a_listener_in_a_process_of_its_own_wakes_per_message(context, standing):
    """Separate mode: no detector beside it can say that a contact nears."""
    listener = JointStateListenerNode(context=context, cli_args=[
        '--ros-args', '--params-file', manifest.node('joint_state_listener').parameters_path(),
        '-p', f'wake_period:={WAKE_PERIOD}'])
    try:
        _feed({'joint_state_listener': listener}, standing, 0.05)
        assert listener.rest_after_wake() == 0.0
    finally:
        listener.destroy_node()
