"""`python3 -m moegrad`: prints moegrad.info() as JSON, for bug reports."""
import json
import sys

import moegrad

try:
    print(json.dumps(moegrad.info(), indent=2))
except moegrad.Error as e:  # a malformed MOEGRAD_* variable
    print(f"moegrad: error: {e} ({e.status})", file=sys.stderr)
    sys.exit(1)
