"""The chain's start-up: its three nodes built in a fresh process as `up` builds them (issue 35).

Prints the CPU time (and wall time) of the imports and of building the nodes, which is where
numba compiles the per-sample kernels (an empty cache: the first start after an install) or
loads them from its cache. `--empty-cache` deletes this tree's numba cache first.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/chain_startup.py [--empty-cache]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--empty-cache', action='store_true',
                        help="delete contact_estimation's numba cache (*.nbi, *.nbc) first")
    args = parser.parse_args(argv)
    if args.empty_cache:
        package = pathlib.Path(__file__).resolve().parent.parent / 'contact_estimation'
        for cached in [*package.rglob('*.nbi'), *package.rglob('*.nbc')]:
            cached.unlink()
    wall, cpu = time.time(), time.process_time()
    from chain_wake import chain_nodes
    from contact_estimation.ros.testing import ros_context
    imported = time.time(), time.process_time()
    with ros_context() as context:
        nodes = chain_nodes(context)
        built = time.time(), time.process_time()
        for node in nodes:
            node.destroy_node()
    print(f'imports: {imported[1] - cpu:.2f} s of CPU ({imported[0] - wall:.2f} s wall); '
          f'the chain built: {built[1] - imported[1]:.2f} s of CPU '
          f'({built[0] - imported[0]:.2f} s wall)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
