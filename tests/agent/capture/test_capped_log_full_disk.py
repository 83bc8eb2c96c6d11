"""#41, the fifth replay: a full disk stopped ``CappedLog`` where the write failed, so the log ended
with old output and the reason read from its last line (an ``eval --apps`` row's, a failed app's)
was not the last thing the process said. The log now writes its latest output, kept in memory,
behind the head and the line saying what was dropped and why. The full disk is simulated: the
log's file refuses to grow past a size (a short write, then "No space left on device")."""
from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import termios
import time

from swizzleperf.agent.capture.capture import CappedLog, last_line


class FullDisk:
    """The log's file on a disk with room for ``limit`` bytes of it: a write past that is cut short,
    the next one refused, as the kernel does; truncating frees the room again."""

    def __init__(self, file, limit: int):
        self.file, self.limit, self.refused = file, limit, 0

    def write(self, data) -> int:
        room = self.limit - self.file.tell()
        if room <= 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.file.write(bytes(data[:room]))

    def __getattr__(self, name):
        return getattr(self.file, name)


def _lines(first: int, count: int) -> bytes:
    return b"".join(b"output line %06d\n" % i for i in range(first, first + count))


def _through_the_pipe(capped: CappedLog, pieces: list) -> None:
    """Each piece written into the log's pipe, as a process writes it, and read by the log before the
    next is written (one read each: the log sees the pieces as they are); a callable piece is called
    there instead."""
    with os.fdopen(os.dup(capped.fd), "wb", buffering=0) as pipe:
        capped.started()
        for piece in pieces:
            if callable(piece):
                piece()
            else:
                pipe.write(piece)
            _read_by_the_log(capped)


def _read_by_the_log(capped: CappedLog) -> None:
    """Until the pipe is empty, and a moment for the log to write what it read."""
    deadline = time.monotonic() + 10
    while struct.unpack("i", fcntl.ioctl(capped.read_fd, termios.FIONREAD, b"\0" * 4))[0] and \
            time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(0.02)


def _dropped(text: bytes) -> int:
    found = re.findall(rb"\[swizzleperf: (\d+) bytes of output dropped here", text)
    assert len(found) == 1, text[:2000]
    return int(found[0])


def test_on_a_full_disk_the_log_ends_with_the_latest_output_and_says_why(tmp_path):
    log = tmp_path / "app.log"
    output = _lines(0, 3000) + b"Traceback: the real reason\n"
    capped = CappedLog(log, head=1000, tail=4000)
    capped.file = disk = FullDisk(capped.file, limit=2500)   # less than the head and the tail
    with capped:
        _through_the_pipe(capped, [output[i:i + 700] for i in range(0, len(output), 700)])
    text = log.read_bytes()
    assert last_line(log) == "Traceback: the real reason"
    assert disk.refused and len(text) <= 2500
    assert text[:1000] == output[:1000] and b"(writing this log failed: No space left on device)" in text
    tail = text[text.index(b"]\n", 1000) + 2:]
    assert output.endswith(tail) and len(tail) >= 256
    assert 1000 + _dropped(text) + len(tail) == len(output)   # every byte kept or counted


def test_a_disk_that_stays_full_keeps_the_head_and_the_latest_output_comes_once_it_frees(tmp_path):
    log = tmp_path / "app.log"
    capped = CappedLog(log, head=1000, tail=4000)
    capped.file = disk = FullDisk(capped.file, limit=1000)   # room for the head, nothing more

    def freed():
        assert log.read_bytes() == first[:1000]   # the head alone while nothing else fits
        disk.limit = 1 << 20

    first, then = _lines(0, 500), _lines(500, 10) + b"exit: the last line\n"
    with capped:
        _through_the_pipe(capped, [first, freed, then])
    text = log.read_bytes()
    assert text[:1000] == first[:1000] and last_line(log) == "exit: the last line"
    tail = text[text.index(b"]\n", 1000) + 2:]
    assert (first + then).endswith(tail) and 1000 + _dropped(text) + len(tail) == len(first + then)


def test_a_log_within_its_cap_on_a_roomy_disk_is_the_output_as_it_was(tmp_path):
    log = tmp_path / "app.log"
    output = _lines(0, 200)
    capped = CappedLog(log, head=1000, tail=4000)
    capped.file = FullDisk(capped.file, limit=1 << 20)
    with capped:
        _through_the_pipe(capped, [output[i:i + 333] for i in range(0, len(output), 333)])
    assert log.read_bytes() == output
