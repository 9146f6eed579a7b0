"""The check runner shared by the Python end-to-end suites (nats_py.py, jetstream_py.py).

A suite is a list of (name, async function) pairs; a check fails by raising CheckFailed (or
anything else, or by timing out). NATS_E2E_ONLY=<text> runs only checks whose name contains it.
Prints one PASS/FAIL line per check; the caller prints the final "N passed, M failed".
"""

import asyncio
import os
import sys
import traceback


class CheckFailed(Exception):
    """A check's expectation did not hold."""


async def run_checks(checks, check_timeout):
    """Runs the checks one by one; returns (passed, failed)."""
    passed = failed = 0
    only = os.environ.get("NATS_E2E_ONLY", "")
    for name, fn in checks:
        if only and only not in name:
            continue
        try:
            await asyncio.wait_for(fn(), check_timeout)
        except CheckFailed as e:
            failed += 1
            print(f"FAIL: {name}: {e}")
        except asyncio.TimeoutError:
            failed += 1
            print(f"FAIL: {name}: timed out (>{check_timeout}s or a client timeout)")
        except Exception as e:  # noqa: BLE001 - report anything as a failure
            failed += 1
            print(f"FAIL: {name}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=3, file=sys.stdout)
        else:
            passed += 1
            print(f"PASS: {name}")
        sys.stdout.flush()
    return passed, failed
