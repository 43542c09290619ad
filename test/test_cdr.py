"""ros/cdr.py against rclpy's own serialisation: the same values from the same bytes, and a
clear ValueError (never a crash, never a read beyond the buffer) on bytes that are not a
message. hypothesis is not installed here: seeded random messages and fuzzing instead."""
import string

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState

from contact_estimation.ros import cdr
from contact_estimation.ros.conversions import stamp_to_seconds

ALPHABET = string.ascii_letters + string.digits + '_/äé'


def random_text(rng, longest=12) -> str:
    return ''.join(rng.choice(list(ALPHABET), size=int(rng.integers(0, longest + 1))))


def random_joint_state(rng) -> JointState:
    """Names of random lengths (odd ones too, empty ones), 0–12 joints, each field either
    one value per name or empty, any stamp."""
    n = int(rng.integers(0, 13))
    msg = JointState(name=[random_text(rng) for _ in range(n)])
    for field in ('position', 'velocity', 'effort'):
        size = n if rng.random() < 0.7 else int(rng.integers(0, 13))
        setattr(msg, field, rng.normal(scale=10.0, size=size).tolist())
    msg.header.frame_id = random_text(rng) if rng.random() < 0.5 else ''
    msg.header.stamp.sec = int(rng.integers(-2**31, 2**31))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    return msg


def random_wrench(rng) -> WrenchStamped:
    msg = WrenchStamped()
    msg.header.frame_id = random_text(rng) if rng.random() < 0.5 else ''
    msg.header.stamp.sec = int(rng.integers(0, 2**31))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    for vector in (msg.wrench.force, msg.wrench.torque):
        vector.x, vector.y, vector.z = rng.normal(scale=50.0, size=3).tolist()
    return msg


def test_joint_states_decode_to_what_rclpy_serialised():
    rng = np.random.default_rng(26)
    for _ in range(500):
        msg = random_joint_state(rng)
        raw = serialize_message(msg)
        state = cdr.decode_joint_state(raw)
        assert state.stamp == stamp_to_seconds(msg.header.stamp) == cdr.stamp_of(raw)
        assert (state.sec, state.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
        assert state.frame_id == msg.header.frame_id
        assert state.names == tuple(msg.name)
        for field in ('position', 'velocity', 'effort'):
            values = getattr(state, field)
            assert values.dtype == np.float64
            np.testing.assert_array_equal(values, np.asarray(getattr(msg, field)))


def test_messages_of_one_shape_decode_to_what_rclpy_serialised():
    """A driver's stream (one names list and frame_id) read from the last shape's offsets,
    and messages of the same length and names with other counts or values that are not read
    from it: each gives what rclpy serialised."""
    rng = np.random.default_rng(30)
    for _ in range(100):
        first = random_joint_state(rng)
        n = len(first.name)
        for _ in range(10):
            msg = JointState(name=first.name)
            msg.header = first.header
            msg.header.stamp.sec = int(rng.integers(0, 2**31))
            sizes = [len(getattr(first, field)) for field in ('position', 'velocity', 'effort')]
            if rng.random() < 0.3:  # the same number of values, spread otherwise
                sizes = rng.multinomial(sum(sizes), [1 / 3] * 3).tolist()
            for field, size in zip(('position', 'velocity', 'effort'), sizes):
                values = rng.normal(size=size)
                values[rng.random(size) < 0.1] = np.nan
                setattr(msg, field, values.tolist())
            raw = serialize_message(msg)
            state = cdr.decode_joint_state(raw)
            assert (state.sec, state.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
            assert state.names == tuple(msg.name) and len(state.names) == n
            assert state.frame_id == msg.header.frame_id
            for field in ('position', 'velocity', 'effort'):
                np.testing.assert_array_equal(getattr(state, field), getattr(msg, field))


def test_wrenches_decode_to_what_rclpy_serialised():
    rng = np.random.default_rng(27)
    for _ in range(200):
        msg = random_wrench(rng)
        raw = serialize_message(msg)
        wrench = cdr.decode_wrench_stamped(raw)
        assert wrench.stamp == stamp_to_seconds(msg.header.stamp) == cdr.stamp_of(raw)
        assert (wrench.sec, wrench.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
        assert wrench.frame_id == msg.header.frame_id
        force, torque = msg.wrench.force, msg.wrench.torque
        np.testing.assert_array_equal(wrench.force, [force.x, force.y, force.z])
        np.testing.assert_array_equal(wrench.torque, [torque.x, torque.y, torque.z])


def decodes_or_refuses(decode, raw: bytes) -> None:
    """`decode` either gives a value or raises ValueError; any other exception fails."""
    try:
        decode(raw)
    except ValueError as err:
        assert str(err)


@pytest.mark.parametrize('decode, make', [(cdr.decode_joint_state, random_joint_state),
                                          (cdr.decode_wrench_stamped, random_wrench),
                                          (cdr.stamp_of, random_wrench)])
def test_truncated_and_garbled_bytes_give_a_value_error_or_a_value(decode, make):
    rng = np.random.default_rng(28)
    for _ in range(200):
        raw = serialize_message(make(rng))
        for end in range(len(raw)):  # every truncation
            decodes_or_refuses(decode, raw[:end])
        garbled = bytearray(raw)
        for at in rng.integers(0, len(raw), size=int(rng.integers(1, 6))):
            garbled[at] = int(rng.integers(0, 256))
        decodes_or_refuses(decode, bytes(garbled))
        decodes_or_refuses(decode, rng.bytes(int(rng.integers(0, 200))))


def test_a_message_cut_inside_its_last_field_is_refused_with_where():
    msg = JointState(name=['panda_joint1', 'panda_joint2'], position=[0.1, 0.2],
                     velocity=[0.0, 0.0], effort=[1.0, 2.0])
    raw = serialize_message(msg)
    with pytest.raises(ValueError, match='truncated: effort'):
        cdr.decode_joint_state(raw[:-1])
    with pytest.raises(ValueError, match='effort of 2 elements does not fit'):
        cdr.decode_joint_state(raw[:-9])


def test_a_huge_sequence_length_is_refused_before_anything_is_read():
    raw = bytearray(serialize_message(JointState(name=['a'])))
    raw[20:24] = (2**32 - 1).to_bytes(4, 'little')  # the names' count
    with pytest.raises(ValueError, match='names of 4294967295 elements does not fit'):
        cdr.decode_joint_state(bytes(raw))


@pytest.mark.parametrize('raw, match', [
    (b'\x00\x00\x00\x00' + bytes(60), 'encapsulation 0000'),   # big-endian CDR
    (b'\x00\x01\x00\x00\x01', 'too short'),
])
def test_bytes_that_are_no_little_endian_cdr_are_refused(raw, match):
    with pytest.raises(ValueError, match=match):
        cdr.decode_joint_state(raw)


def test_a_string_without_nul_or_not_utf8_is_refused():
    raw = bytearray(serialize_message(JointState(name=['ab'])))
    # header(4) stamp(8) frame_id: length 1 + NUL, padded (8) names count (4) name length (4)
    name = 4 + 8 + 8 + 4 + 4
    raw[name + 2] = ord('c')
    with pytest.raises(ValueError, match='does not end with NUL'):
        cdr.decode_joint_state(bytes(raw))
    raw[name + 2], raw[name] = 0, 0xff
    with pytest.raises(ValueError, match='not UTF-8'):
        cdr.decode_joint_state(bytes(raw))


def test_rclpy_reads_the_same_bytes_the_same_way():
    """The reference itself: deserialize_message of the bytes gives the message back."""
    msg = random_joint_state(np.random.default_rng(29))
    raw = serialize_message(msg)
    back = deserialize_message(raw, JointState)
    assert cdr.decode_joint_state(raw).names == tuple(back.name)
