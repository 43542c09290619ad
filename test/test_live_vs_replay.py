"""benchmarks/live_vs_replay.py in a tiny configuration (a push and an impact, without the
residual subscriber): it records, plays live, replays, and compares every contact. No
timing is asserted: the figures are the benchmark's to print."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_two_contacts_give_a_complete_comparison(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get('PYTHONPATH', '')]))
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'benchmarks' / 'live_vs_replay.py'), '--contacts', '2',
         '--no-subscriber', '--out', str(tmp_path)], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = proc.stdout
    assert '2 contacts (1 pushes, 1 impacts' in out
    for row in ('pushes: stopped, stop after onset', 'impacts: stopped, stop after onset',
                'the same stop sample as the replay', 'live − replay, p50 / p95 / max',
                'late: > replay + 20 ms, no behind stop first', '`behind` stops',
                'localizer: right link, point median', 'F/T: right link, point median'):
        assert row in out, row
    assert "the user's residual plot" not in out  # --no-subscriber: one run, without
    contacts = re.findall(r'^ +(\d) \| (push|impact) +\| (panda_link[2-7]) +\|(.*)$', out,
                          re.MULTILINE)
    assert [(k, kind) for k, kind, _, _ in contacts] == [('0', 'push'), ('1', 'impact')]
    for _, _, _, cells in contacts:
        force, onset, replayed, live = (c.strip() for c in cells.split('|')[:4])
        assert 10.0 <= float(force) and float(onset) > 0.0
        assert replayed != 'nan' and live != 'nan'  # the oracle and the live suite stopped
    run = tmp_path / 'without_subscriber'
    for bag in (run / 'inputs', run / 'replay'):
        assert (bag / 'metadata.yaml').is_file(), bag
    assert (tmp_path / 'recording.npz').is_file() and (tmp_path / 'parameters.yaml').is_file()
