"""A reader that would block for ever fails the test instead: this process's stdin is a pipe nobody
writes (a link to ``/proc/self/fd/0`` then leads to it) and SIGALRM raises ``Hung`` after
``seconds`` (a BaseException: no ``except OSError`` or ``except Exception`` on the way swallows it,
as httpcore turned a TimeoutError, an OSError, into a read error and kept waiting)."""
from __future__ import annotations

import contextlib
import os
import signal


class Hung(BaseException):
    """A read that was still blocked when the guard's time ran out."""


@contextlib.contextmanager
def never_blocks(seconds: int, what: str):
    """Within the block: stdin a pipe nobody writes; a read still blocked after ``seconds`` raises
    ``Hung(what)``. Everything restored after."""
    stdin_r, stdin_w = os.pipe()
    saved = os.dup(0)
    os.dup2(stdin_r, 0)

    def hung(*_):
        raise Hung(what)
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
