"""Writing a benchmark's section of docs/performance.md and describing the machine."""
from __future__ import annotations

import os
import platform
import re
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PERFORMANCE_DOC = ROOT / "docs" / "performance.md"


def machine() -> str:
    model = "unknown CPU"
    try:
        model = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M).group(1)
    except (OSError, AttributeError):
        pass
    return (f"{model}, {os.cpu_count()} CPU(s), {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def conditions() -> str:
    """One sentence: when, on what, and how loaded the machine was before the run."""
    load = os.getloadavg()[0]
    busy = (" -- other sessions were using the cores, so absolute figures are what was left over; compare "
            "each with its same-run baseline" if load > 1 else "")
    return f"Run {stamp()} on {machine()}; load average {load:.2f} before the run{busy}."


def write_section(title: str, body: str) -> None:
    """Replace (or append) the section ``title`` ("## ...") of docs/performance.md."""
    section = f"{title}\n\n{body.rstrip()}\n"
    text = PERFORMANCE_DOC.read_text("utf-8") if PERFORMANCE_DOC.exists() else "# Performance\n"
    pattern = re.compile(rf"^{re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section
    PERFORMANCE_DOC.write_text(text, "utf-8")


def publish(title: str, table: str, verdicts: dict, *, write: bool) -> int:
    """A benchmark's last step: print its table, write it as the section ``title`` unless
    told not to, and give the exit status, 1 when any target was missed."""
    print(f"\n{table}\n")
    if write:
        write_section(title, table)
    return 0 if all(met for _, met in verdicts.values()) else 1
