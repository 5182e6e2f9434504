"""Running one test body in several Python threads at once."""

import threading


def run_concurrently(worker, n):
    """Calls worker(0), ..., worker(n - 1), each in its own thread, all at
    once; re-raises the first exception a thread raised (an assertion in a
    thread would otherwise only be printed)."""
    errors = []

    def guarded(i):
        try:
            worker(i)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
