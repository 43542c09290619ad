"""Where and how hard: contact estimation from joint torques, the base F/T sensor and the
lidar (seeds 000 and 004), fused, and the proximity monitor (seed 002), ROS-free."""
