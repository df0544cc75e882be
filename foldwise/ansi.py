"""Terminal escape sequences out of text that people read elsewhere (a web page, a table).

Ray colours the header of a remote traceback (``\\x1b[36mray::DDPWorker.run()\\x1b[39m``) even
when nothing reads it on a terminal; stored as is, the codes show up as ``[36m`` litter.
"""

from __future__ import annotations

import re

ANSI_ESCAPE = re.compile(
    r"\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves (ESC [ 36 m)
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: window titles, hyperlinks, ended by BEL or ST
    r"|[@-Z\\-_]"  # any other two-character escape
    r")"
)


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences; everything else is left as it is."""
    return ANSI_ESCAPE.sub("", text) if "\x1b" in text else text
