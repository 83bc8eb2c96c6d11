"""A reader that would block for ever fails the test instead: this process's stdin is a pipe nobody
writes (a link to ``/proc/self/fd/0`` then leads to it) and SIGALRM raises TimeoutError after
``seconds``."""
from __future__ import annotations

import contextlib
import os
import signal


@contextlib.contextmanager
def never_blocks(seconds: int, what: str):
    """Within the block: stdin a pipe nobody writes; a read still blocked after ``seconds`` raises
    ``TimeoutError(what)``. Everything restored after."""
    stdin_r, stdin_w = os.pipe()
    saved = os.dup(0)
    os.dup2(stdin_r, 0)

    def hung(*_):
        raise TimeoutError(what)
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.dup2(saved, 0)
        for fd in (saved, stdin_r, stdin_w):
            os.close(fd)
