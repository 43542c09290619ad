"""The robot: its model (pinocchio), its payload and its link surfaces, ROS-free."""
