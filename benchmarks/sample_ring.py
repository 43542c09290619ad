"""What the shared-memory sample ring (core/chain/sample_ring.py) costs per joint sample: the
chain's write and a reader's take, in batches as composed mode runs them (issue 39: the slot
described once as a numpy structured dtype must cost no more than the hand layout did).

    PYTHONPATH=$PWD python benchmarks/sample_ring.py [--batch 1000] [--repeats 20] [--joints 7]

The table gives the best and the median over `--repeats` batches, µs per sample.
"""
from __future__ import annotations

import argparse
import time
import uuid

import numpy as np

from contact_estimation.core.chain.sample import JointSample
from contact_estimation.core.chain.sample_ring import SampleRingReader, SampleRingWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--batch', type=int, default=1000)
    parser.add_argument('--repeats', type=int, default=20)
    parser.add_argument('--joints', type=int, default=7)
    args = parser.parse_args()
    name = f'contact_estimation_bench_{uuid.uuid4().hex[:8]}'
    ones = np.ones(args.joints)
    samples = [JointSample(100 + k * 1e-3, ones, ones, ones, ones, (100, k * 1_000_000), 'base')
               for k in range(args.batch)]
    writer, reader = SampleRingWriter(name, args.joints), SampleRingReader(name)
    writes, takes = [], []
    try:
        reader.take()
        for _ in range(args.repeats):
            started = time.perf_counter()
            writer.write_batch(samples)
            writes.append((time.perf_counter() - started) / args.batch)
            started = time.perf_counter()
            taken = reader.take()
            takes.append((time.perf_counter() - started) / args.batch)
            assert len(taken) == args.batch
    finally:
        reader.close()
        writer.close()
    print(f'{args.joints} joints, batches of {args.batch}, {args.repeats} repeats\n')
    print('| step | best µs/sample | median µs/sample |\n|---|---|---|')
    for step, times in (('write (chain)', writes), ('take (reader)', takes)):
        print(f'| {step} | {min(times) * 1e6:.2f} | {np.median(times) * 1e6:.2f} |')


if __name__ == '__main__':
    main()
