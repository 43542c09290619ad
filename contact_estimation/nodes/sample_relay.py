"""sample_relay: the 1 kHz streams for whoever subscribes, in a process of their own.

In composed mode (contact_estimation/composed.py) the chain writes every joint sample into
shared memory and publishes none of them. This node's process takes them (ros/sample_feed.py)
and publishes `joint_state` (effort = τ) and `residual` (effort = τ_ext) while anyone
subscribes, with their stamps, at normal priority: a user's plot costs this process, never
the stop's nor the estimators' (issue 35). Separate nodes publish their own streams, so it
runs in composed mode only (nodes.yaml `composed_only`).
"""
from __future__ import annotations

import sys

from contact_estimation.ros.node_main import run
from contact_estimation.ros.suite_node import SuiteNode

NAME = 'sample_relay'


class SampleRelayNode(SuiteNode):
    """The feed's host: its name, robot, timer and diagnostics."""

    def __init__(self, **kwargs):
        super().__init__(NAME, **kwargs)
        with self.starting():
            pass
        self.get_logger().info(f'relaying {self.spec.topic("joint_state")} and '
                               f'{self.spec.topic("residual")} to their subscribers')


def main(args=None):
    return run(SampleRelayNode, args)


if __name__ == '__main__':
    sys.exit(main())
