"""The 1 kHz detection chain, ROS-free: joint states conditioned into samples, the residual
(τ_ext), the detector and the reaction (seeds 001 and 003)."""
