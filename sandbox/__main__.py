"""The box's init, as the box starts it: ``python -m swizzleperf.sandbox OPTIONS -- COMMAND...``
(sandbox/__init__.py's ``box_main``)."""
import sys

from swizzleperf.sandbox import box_main

if __name__ == "__main__":
    sys.exit(box_main(sys.argv[1:]))
