"""benchmarks/live_vs_replay.py in tiny configurations, without the residual subscriber: it
records, plays live, replays, and compares every contact. No timing is asserted: the figures
are the benchmark's to print; what is asserted is what live and replay decided."""
import os
import re
import subprocess
import sys
from pathlib import Path

from contact_estimation.core.chain.lag import MAX_LAG

ROOT = Path(__file__).resolve().parents[1]
CONTACT_ROW = re.compile(r'^ +(\d) \| (push|impact|touch) +\| (panda_link[2-7]) +\|(.*)$',
                         re.MULTILINE)


def run_benchmark(out: Path, *args: str) -> str:
    """The benchmark's printout, one run (without the residual subscribed) into `out`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get('PYTHONPATH', '')]))
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'benchmarks' / 'live_vs_replay.py'), *args,
         '--no-subscriber', '--out', str(out)], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def contacts(out: str) -> list[tuple[str, list[str]]]:
    """Per contact row: its kind and its cells after the link."""
    return [(kind, [c.strip() for c in cells.split('|')])
            for _, kind, _, cells in CONTACT_ROW.findall(out)]


def test_two_contacts_give_a_complete_comparison(tmp_path):
    out = run_benchmark(tmp_path, '--contacts', '2')
    assert '2 contacts (1 pushes, 1 impacts' in out
    for row in ('pushes: stopped, stop after onset', 'impacts: stopped, stop after onset',
                'the same stop sample as the replay', 'live − replay, p50 / p95 / max',
                f'late: > replay + {MAX_LAG * 1e3:.0f} ms, no behind stop first',
                'stops with no contact while the driver streamed: `behind` / `stale_input` / '
                '`node_fault`',
                'localizer: right link, point median', 'F/T: right link, point median'):
        assert row in out, row
    assert "the user's residual plot" not in out  # --no-subscriber: one run, without
    assert 'classified touch first' not in out  # touch.enabled false: no class decided
    rows = contacts(out)
    assert [kind for kind, _ in rows] == ['push', 'impact']
    for _, cells in rows:
        force, onset, replayed, live = cells[:4]
        assert 10.0 <= float(force) and float(onset) > 0.0
        assert replayed != 'nan' and live != 'nan'  # the oracle and the live suite stopped
    run = tmp_path / 'without_subscriber'
    for bag in (run / 'inputs', run / 'replay'):
        assert (bag / 'metadata.yaml').is_file(), bag
    assert (tmp_path / 'recording.npz').is_file() and (tmp_path / 'parameters.yaml').is_file()


def test_touch_and_impact_are_classified_live_as_in_the_replay(tmp_path):
    """Issue 29: with touch.enabled, a push, an impact and a hand's touch; every contact gets
    the same classes live as in the replay of the same inputs, decided on the same samples."""
    out = run_benchmark(tmp_path, '--touch', '--contacts', '3')
    assert '3 contacts (1 pushes, 1 impacts, 1 touches' in out
    rows = contacts(out)
    assert [kind for kind, _ in rows] == ['push', 'impact', 'touch']
    for kind, cells in rows:
        replayed, live, decided = cells[-3:]
        assert replayed == live, (kind, replayed, live)  # every class, in order
        assert decided == '+0', (kind, decided)          # the first decision's sample
    replayed = {kind: cells[-3] for kind, cells in rows}
    assert replayed['touch'].startswith('touch') and replayed['impact'] == 'impact', replayed
    assert re.search(r'the same decisions \(every class, sample and hold\) +\| +\| 3 of 3',
                     out)
    assert re.search(r'the same hold sample as the replay .* +\| +\| 3 of 3', out)
