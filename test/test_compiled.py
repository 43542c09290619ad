"""core/compiled.py: a kernel computes as numpy does, division by zero included."""
import numpy as np

from contact_estimation.core.compiled import kernel


@kernel
def _ratios(tau, thresholds, out):
    for i in range(tau.shape[0]):
        out[i] = abs(tau[i]) / thresholds[i]


def test_a_kernel_divides_as_numpy_does_zero_included():
    tau = np.array([1.5, -2.0, 0.0, 3.0])
    thresholds = np.array([0.5, 4.0, 0.0, 0.0])
    out = np.empty(4)
    _ratios(tau, thresholds, out)
    with np.errstate(divide='ignore', invalid='ignore'):
        expected = np.abs(tau) / thresholds
    np.testing.assert_array_equal(out, expected)  # nan and inf where numpy has them
