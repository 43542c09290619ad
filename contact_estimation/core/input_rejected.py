"""InputRejected: one exception for every message or sample a node cannot use.

Its `kind` is one of a fixed set, the name under which the problem is counted on
/diagnostics, so the same fault has the same name in every node.
"""
from __future__ import annotations

WRONG_JOINTS = 'wrong_joints'        # not the model's joints (or not in model order)
WRONG_SIZE = 'wrong_size'            # a field without one value per joint, a vector too short
NOT_FINITE = 'not_finite'            # NaN or inf where a number is needed
UNKNOWN_FRAME = 'unknown_frame'      # a frame_id whose pose is not known
BAD_CLOUD = 'bad_cloud'              # a PointCloud2 without x, y, z or truncated
CLOUD_TOO_LARGE = 'cloud_too_large'  # more points than cloud.max_points
EMPTY_CLOUD = 'empty_cloud'          # a cloud without points where one is needed
NO_POSE = 'no_pose'                  # no joint state near enough the message's stamp
IMPLAUSIBLE = 'implausible'          # finite, but no real input: a keypoint 1 km away
OUT_OF_ORDER = 'out_of_order'        # stamped before the last one of its stream
SATURATED = 'saturated'              # a sensor reading at or beyond its range
ZERO_READING = 'zero_reading'        # a sensor reading exactly zero: not measuring
MALFORMED = 'malformed'              # bytes that are not the message they claim to be
KINDS = (WRONG_JOINTS, WRONG_SIZE, NOT_FINITE, UNKNOWN_FRAME, BAD_CLOUD, CLOUD_TOO_LARGE,
         EMPTY_CLOUD, NO_POSE, IMPLAUSIBLE, OUT_OF_ORDER, SATURATED, ZERO_READING, MALFORMED)


class InputRejected(ValueError):
    """An input dropped for `kind` (one of KINDS); `detail` says what was wrong with it."""

    def __init__(self, kind: str, detail: str):
        if kind not in KINDS:
            raise ValueError(f'unknown input problem {kind!r} (one of {", ".join(KINDS)})')
        super().__init__(detail)
        self.kind = kind

    def __reduce__(self):
        """Pickled whole (a cloud worker hands it to its node: ros/cloud_process.py)."""
        return type(self), (self.kind, str(self))
