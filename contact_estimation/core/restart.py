"""A process started again after it died (issue 36): its stops come back latched, saying why.

Whatever the dead process knew is gone with it (a collision it had latched, a person it saw
near the arm), so the new one must not clear the stop on its own: an operator looks and calls
`~/reset`. The supervisor (`contact-estimation up`, the launch file: launcher.RestartPolicy)
starts the new process with RESTARTED_AFTER in its environment, the exit code of the one
that died; a node that raises a stop reads it (`restart_reason`) and latches its stop with
the cause RESTARTED until `~/reset`. No ROS.
"""
from __future__ import annotations

import os
import signal
from typing import Mapping

RESTARTED_AFTER = 'CONTACT_ESTIMATION_RESTARTED_AFTER'  # the previous process's exit code
RESTARTED = 'restarted'  # the stop's cause


def exit_description(code: int) -> str:
    """An exit code as Popen and launch give it ('exit code 1'; negative: 'killed by
    SIGKILL')."""
    if code >= 0:
        return f'exit code {code}'
    try:
        return f'killed by {signal.Signals(-code).name}'
    except ValueError:
        return f'killed by signal {-code}'


def restart_reason(environment: Mapping[str, str] | None = None) -> str:
    """Why this process's stops start latched: '' on a first start, else that it was
    restarted and how the process before it ended."""
    value = (os.environ if environment is None else environment).get(RESTARTED_AFTER)
    if value is None:
        return ''
    try:
        ended = exit_description(int(value))
    except ValueError:
        ended = f'exit {value!r}'
    return (f'{RESTARTED} after the process before it died ({ended}): latched until '
            '~/reset')
