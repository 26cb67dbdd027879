"""`python3 -m moegrad`: prints moegrad.info() as JSON, for bug reports."""
import argparse
import json
import os
import sys

import moegrad


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m moegrad",
        description="Prints moegrad.info() as JSON: the version, the CPU, the ISA path and thread count a "
        "context gets here, the cache sizes and the MOEGRAD_* variables set. It takes no arguments.")
    parser.parse_args(argv)  # --help, or exit 2 on any argument
    try:
        text = json.dumps(moegrad.info(), indent=2)
    except moegrad.Error as e:  # a malformed MOEGRAD_* variable
        print(f"moegrad: error: {e} ({e.status})", file=sys.stderr)
        return 1
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # A reader that stopped early (`| head`): no traceback, and none at
        # exit when Python flushes stdout again (os.devnull takes it).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
