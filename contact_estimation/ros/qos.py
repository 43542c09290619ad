"""QoS profiles shared by every node.

A best-effort subscription matches both best-effort and reliable publishers, so sensor
inputs use it; the stop signal is reliable and transient-local so that a controller that
starts late still gets the current state at once.
"""
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# Sample streams (joint states, F/T readings, residuals: up to 1 kHz): one second of them is
# kept while the node is busy, so that a stall loses nothing (on simulated time the graph
# just runs later; on a real arm the watchdogs, on the monotonic clock, stop it meanwhile).
SENSOR_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1000,
    reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)

# Inputs of which only the newest counts (point clouds: 10 Hz, up to MBs each; the tracked
# hands): at most two are held.
LATEST_QOS = CLOUD_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=2,
    reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)

# Outputs of our own pipeline: reliable (matches reliable and best-effort subscribers).
PIPELINE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=50,
    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)

# The simulated driver's sample streams (sim_cobot: joint states, F/T readings, the true
# contact at 1 kHz): reliable, one second kept for a reliable subscriber that falls behind, so
# that a recorder on a loaded machine records every sample the suite took (the replay's
# input; ros/bag_recorder.py). At PIPELINE_QOS's 50 the demo's recording still lost some.
DRIVER_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1000,
    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)

# A history of 10, not 1: a reliable reader holds newer samples behind one lost in transport
# until the writer says what it still holds; a publisher keeping one left its monitor 300 ms
# without a stop while other programs joined the domain (benchmarks/stop_depth.py). The
# suite's Fast DDS settings (config/fastdds.xml) also make every writer say so every 50 ms
# while a sample is unacknowledged, not every 3 s.
STOP_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=10,
    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)

# Service requests (~/reset, ...): rclpy's default keeps the last 10, so a flood of 200 calls
# at once lost 190 with no answer (issue 27); every request waiting is kept and answered.
SERVICE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1000,
    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
