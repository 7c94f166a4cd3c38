"""How a repro.py ends: a lost case converts in a child process, whose end shows the bug; a missing file or library
is an exit status of its own, and so is any other failure of main (4), which must not read as the bug."""
import os
import sys
import traceback

from fuzzer.cases.harness.head import CHILD_TIMEOUT_S, LOST, MEMORY_MB, SYMPTOM
from fuzzer.cases.harness.judging import outcome


def exit_status(main):
    """main's status (run in a child for a lost case); 3 when a library is missing, 2 when a case file is, 4 when
    main fails otherwise (an uncaught exception's own status, 1, would read as the bug)."""
    try:
        return in_child(main) if SYMPTOM in LOST else main()
    except ImportError as exc:  # the converter under test (onnxsim, onnxslim, ...) is not installed
        print(f"repro.py: cannot run: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:  # a file of the case folder is missing or unreadable
        print(f"repro.py: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
    except Exception:  # outside the step the bug is in (reading inputs, judging): a failure, but not this bug
        traceback.print_exc()
        print("repro.py: failed outside the conversion this case was filed for", file=sys.stderr)
        return 4


def in_child(main):
    """A death, hang or memory exhaustion takes the process with it: the conversion runs in a child, and how that
    child ends is what shows the bug."""
    import signal
    import subprocess

    if os.environ.get("CONVSMITH_REPRO_CHILD") == "1":
        if SYMPTOM == "out_of_memory":
            _limit_memory()
        return main()
    env = dict(os.environ, CONVSMITH_REPRO_CHILD="1")
    print(f"converting in a child process (the case is a {SYMPTOM}; timeout {CHILD_TIMEOUT_S} s)", flush=True)
    try:
        child = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"observed: no result after {CHILD_TIMEOUT_S} s (killed)")
        return outcome(SYMPTOM == "hang")
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        print(f"observed: the converting process was killed by {name}")
        return outcome(SYMPTOM == "process_death" or (SYMPTOM == "out_of_memory" and name == "SIGKILL"))
    return child.returncode  # it ran to the end: its own status (0 the bug does not show, 4 another failure)


def _limit_memory():
    import resource

    with open("/proc/self/status") as handle:
        size = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
    limit = size + MEMORY_MB * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
