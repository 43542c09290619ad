"""The MuJoCo simulated cobot that stands in for the arm in the demo, the tests and the
benchmarks, and its offscreen renderer.

MuJoCo picks its OpenGL backend when it is first imported: headless (these machines, CI, a
robot cell's PC), only EGL works, so it is the default unless the user chose one.
"""
import os

os.environ.setdefault('MUJOCO_GL', 'egl')
