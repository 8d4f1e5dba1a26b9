"""`tests.helpers.processes`: a script that runs past its timeout is stopped with everything it
started, even a child in a session of its own (as the embedded servers are), and none is left."""

from __future__ import annotations

import os
import sys

import pytest

from tests.helpers.processes import MARK, marked, run_script

_SCRIPT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print("started", flush=True)
time.sleep(120)
"""


def _sleepers() -> set[int]:
    """This session's processes running the script's child."""
    return {pid for pid, command in marked(os.environ[MARK]) if "time.sleep(120)" in command}


def test_a_script_past_its_timeout_is_stopped_with_its_own_sessions_children() -> None:
    with pytest.raises(AssertionError, match="ran past 3s"):
        run_script([sys.executable, "-c", _SCRIPT], timeout=3, grace=2)
    assert not _sleepers()


def test_a_script_that_leaves_a_child_running_fails_and_the_child_is_stopped() -> None:
    script = _SCRIPT.replace('print("started", flush=True)\ntime.sleep(120)\n', "")
    with pytest.raises(AssertionError, match="left processes running"):
        run_script([sys.executable, "-c", script], timeout=60)
    assert not _sleepers()
