"""Identification of gravity, friction and payload from recordings (seed 001), and the
trajectories that excite them, ROS-free."""
